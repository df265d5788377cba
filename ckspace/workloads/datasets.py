"""The data sets ckspace ships, by name: real measurements and real problem lists.

Training, evaluating and planning need real data, and a clone or a ``pip install`` of ckspace has
nothing beside the package, so the files are package data under ``ckspace/data/<kind>/`` (the
measurements a byte-exact copy of upstream's file, the problem lists written out from upstream's
definitions; CRLF line ends kept), each with its source and sha256 here and how it was made in
``PROVENANCE.md`` beside it. Every command argument that reads such a CSV
takes a data set's name as well as a path (``--data mi355x-forward-bf16``, ``--problems
miopen-forward-300``; :func:`data_file`), and the tests read the files through this catalogue too,
so a test of it is a test of the package data.

A path that exists is a path: a file of the user's that is named like a data set is read, not the
data set.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from enum import StrEnum
from importlib import resources
from pathlib import Path

from ckspace.core.errors import InvalidInputError

ROCM_LIBRARIES = "ROCm/rocm-libraries"
GROUPED_CONV = "projects/composablekernel/tile_engine/ops/grouped_conv"
"""Where upstream keeps the tile_engine grouped-convolution files the data sets come from."""


class Kind(StrEnum):
    """What a data set holds, which is what a command argument asks for."""

    MEASUREMENTS = "measurements"  # timed (problem, kernel) pairs: train and evaluate --data
    PROBLEMS = "problems"  # shapes only: plan and bench --problems


@dataclass(frozen=True)
class Dataset:
    """One shipped file: its name on the command line, what it is, and where it comes from."""

    name: str
    kind: Kind
    file: str  # the file's name under ckspace/data/<kind>/ (upstream's own name)
    what: str
    rows: int  # data rows, the header not counted
    source: str  # repo @ commit : path of the upstream file it copies or is derived from
    sha256: str

    @property
    def path(self) -> Path:
        """The installed file."""
        return Path(str(resources.files("ckspace").joinpath("data", self.kind.value, self.file)))


DATASETS: dict[str, Dataset] = {
    d.name: d
    for d in (
        Dataset(
            "mi355x-forward-bf16",
            Kind.MEASUREMENTS,
            "benchmark_forward_300_bf16_gfx950.csv",
            "tile_engine's measurements on an MI355X (gfx950): 231 forward 2D bf16 problems x 30 CK Tile kernels, "
            "latency and TFLOPS (the shipped gfx950 forward bf16 model's training data)",
            6930,
            f"{ROCM_LIBRARIES} @ dd6553922c66e1f0530088512317f9d73942cad0 : "
            f"{GROUPED_CONV}/benchmark_forward_300_bf16_gfx950.csv",
            "54a04c78483661837c9c33a269b27be88893bfd7139fc9586650bcebbeebdeeb",
        ),
        Dataset(
            "miopen-forward-300",
            Kind.PROBLEMS,
            "forward_miopen300_problems.csv",
            "300 forward shapes taken from MIOpen's production configs (295 distinct; upstream trains on the "
            "first 200)",
            300,
            f"{ROCM_LIBRARIES} @ 4fb8322e931fbf4d3439f009d0fc83c8702bc7ab : "
            f"{GROUPED_CONV}/problems/forward_training_miopen.py",
            "bf1a3956158d8707bff7d7d8825b01967c7e91bc1fcbb124c33d11d695f386ef",
        ),
        Dataset(
            "benchmark-forward-300",
            Kind.PROBLEMS,
            "forward_bench300_problems.csv",
            "the 300 forward shapes of upstream's gfx950 benchmark and heuristic predictions (231 of them "
            "measured in mi355x-forward-bf16)",
            300,
            f"derived from {ROCM_LIBRARIES} @ dd6553922c66e1f0530088512317f9d73942cad0 : "
            f"{GROUPED_CONV}/benchmark_forward_300_bf16_gfx950.csv and ml_predictions_300.csv",
            "5f7e7d2538f31294c580943e19d5df55de51cae13fb0f2deaba4cfc3d6a5bde4",
        ),
        Dataset(
            "holdout-300",
            Kind.PROBLEMS,
            "validation_holdout_300_problems.csv",
            "300 shapes upstream holds out to test its heuristic: 250 2D and 50 3D, grouped and dilated ones "
            "among them",
            300,
            "ROCm/composable_kernel @ abe93a40fde26aa2d1a5ea851789e59ba01422c6 : "
            "tile_engine/ops/grouped_conv/problems/validation_holdout.py",
            "f2fcb920a3b44da429242c4b924acfad723fb70f5b886d65b3d242ead9ac17fe",
        ),
        Dataset(
            "validation-bwd-data",
            Kind.PROBLEMS,
            "bwd_data_test_validation_problems.csv",
            "10 backward-data shapes upstream validates on",
            10,
            f"{ROCM_LIBRARIES} @ 24b0439af8f3d06b8cdef22130a4f0e4dac71de5 : "
            f"{GROUPED_CONV}/problems/bwd_data_test_validation.py",
            "ab7ed898bbe957a6e3db0ce3f4a0dcd68ca5f703a589f35ad1702d424a3af9e4",
        ),
        Dataset(
            "validation-bwd-weight",
            Kind.PROBLEMS,
            "bwd_weight_test_validation_problems.csv",
            "10 backward-weight shapes upstream validates on",
            10,
            f"{ROCM_LIBRARIES} @ 24b0439af8f3d06b8cdef22130a4f0e4dac71de5 : "
            f"{GROUPED_CONV}/problems/bwd_weight_test_validation.py",
            "4b23b49507c430250d9e5f4d0f9ab6214256ec816609983d173836ecce5164ff",
        ),
        Dataset(
            "synthetic-forward",
            Kind.PROBLEMS,
            "forward_synthetic_extended_problems.csv",
            "upstream's synthetic forward training grid (groups, depthwise, 1x1/3x3/7x7, strides 1 and 2)",
            1538,
            f"{ROCM_LIBRARIES} @ 24b0439af8f3d06b8cdef22130a4f0e4dac71de5 : "
            f"{GROUPED_CONV}/problems/forward_synthetic_extended.py",
            "a86797da0e8dd138978c8afd6a7f65088122d3b75f486786e3cb2162c95ac6a0",
        ),
        Dataset(
            "synthetic-bwd-data",
            Kind.PROBLEMS,
            "bwd_data_synthetic_extended_problems.csv",
            "upstream's synthetic backward-data training grid",
            1242,
            f"{ROCM_LIBRARIES} @ 4fb8322e931fbf4d3439f009d0fc83c8702bc7ab : "
            f"{GROUPED_CONV}/problems/bwd_data_synthetic_extended.py",
            "f1a3c8b3a91a22546520664b5b40c84bcde4218f2d893742b15b7994fedc9a54",
        ),
        Dataset(
            "synthetic-bwd-weight",
            Kind.PROBLEMS,
            "bwd_weight_synthetic_extended_problems.csv",
            "upstream's synthetic backward-weight training grid",
            2009,
            f"{ROCM_LIBRARIES} @ 4fb8322e931fbf4d3439f009d0fc83c8702bc7ab : "
            f"{GROUPED_CONV}/problems/bwd_weight_synthetic_extended.py",
            "4064d9fbc28ac30e90b32d9a0a92a0fdfbb84d39bd3dc54b1d3e679f36be2862",
        ),
        Dataset(
            "torchvision-resnet50",
            Kind.PROBLEMS,
            "torchvision_resnet50_problems.csv",
            "the 53 convolutions of torchvision's ResNet-50 (the downsample 1x1 ones too, none with bias) at batch "
            "32 on 224x224 images, one row per layer with its module name (23 distinct shapes)",
            53,
            "derived from pytorch/vision : torchvision/models/resnet.py (resnet50) by scripts/torchvision_problems.py",
            "0b7d822b667c5887ca5542aaafe66857d486f8d5afde83be1cbefb02015ca968",
        ),
        Dataset(
            "torchvision-vgg16",
            Kind.PROBLEMS,
            "torchvision_vgg16_problems.csv",
            "the 13 convolutions of torchvision's VGG-16 (configuration D, every one with bias) at batch 32 on "
            "224x224 images, one row per layer with its module name (9 distinct shapes)",
            13,
            "derived from pytorch/vision : torchvision/models/vgg.py (vgg16) by scripts/torchvision_problems.py",
            "e9e61a0e8db27dca16874e141451766374e435615993232ed89aa5b64870bfe9",
        ),
    )
}
"""Every shipped data set by name, measurements first."""


def dataset_names(kind: Kind) -> tuple[str, ...]:
    """The names of the data sets of one kind, in catalogue order."""
    return tuple(name for name, d in DATASETS.items() if d.kind is kind)


def data_file(value: str, kind: Kind) -> Path:
    """What a CSV argument names: a path that exists (a link counts, even a dangling one, so the
    reader reports what is wrong with it) is that path; otherwise the file of the data set of this
    kind called ``value``; otherwise one error naming the value and the data sets of the kind."""
    if os.path.lexists(value):
        return Path(value)
    found = DATASETS.get(value)
    if found is not None and found.kind is kind:
        return found.path
    what = (
        f"is a {found.kind.value} data set, not a {kind.value} one"
        if found is not None
        else f"is neither an existing file nor a shipped {kind.value} data set"
    )
    raise InvalidInputError(
        f"{value!r} {what}; the {kind.value} data sets are {', '.join(dataset_names(kind))} "
        "(`ckspace info` describes them)"
    )


def argument_text(path: Path) -> str:
    """How a command line names ``path`` (a model card's training command): a shipped data set's
    file by its name, which means the same bytes on every install, and any other file by its path."""
    return next((d.name for d in DATASETS.values() if d.path == path), str(path))
