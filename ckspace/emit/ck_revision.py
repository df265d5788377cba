"""Which CK Tile headers are in use, what that revision offers, and the rules for what it lacks.

CK's grouped-convolution API changes between releases (template parameters appear, pipelines and
traits come and go). The revision is read from the headers themselves -- never assumed from a
version string -- as a set of *features*, each probed by a fact a compile depends on (a class that
exists, a template parameter that is declared). What a revision lacks becomes ``Rule`` objects of
predicate ``ck_revision``, so the space can say why a config is excluded for this CK and ``emit``
never writes a kernel its CK cannot compile.
"""

from __future__ import annotations

import hashlib
import importlib.util
import logging
import os
import re
from functools import cache
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from ckspace.constraints.expr import TRUE, Expr, Field, Not, implies, in_table
from ckspace.constraints.rules import Rule
from ckspace.errors import CkspaceError
from ckspace.space.vocab import Dtype, Epilogue, Pipeline, Variant

log = logging.getLogger(__name__)

F = Field
WARP = (F("warp_tile_m"), F("warp_tile_n"), F("warp_tile_k"))
CONV_DIR = Path("ck_tile/ops/grouped_convolution")
PIPELINE_DIR = Path("ck_tile/ops/gemm/pipeline")
WARP_DIR = Path("ck_tile/ops/gemm/warp")
MARKER = CONV_DIR.parent / "grouped_convolution.hpp"

PIPELINE_BASES: dict[Pipeline, str] = {
    Pipeline.BASIC_V1: "BaseGemmPipelineAGmemBGmemCRegV1",
    Pipeline.COMPV1: "BaseGemmPipelineAGmemBGmemCRegV1",
    Pipeline.BASIC_V2: "BaseGemmPipelineAGmemBGmemCRegV2",
    Pipeline.COMPV2: "BaseGemmPipelineAGmemBGmemCRegV2",
    Pipeline.MEM: "BaseGemmPipelineAgBgCrMem",
    Pipeline.COMPV3: "BaseGemmPipelineAgBgCrCompV3",
    Pipeline.COMPV4: "BaseGemmPipelineAgBgCrCompV4",
    Pipeline.COMPV5: "BaseGemmPipelineAgBgCrCompV5",
    Pipeline.COMPV6: "BaseGemmPipelineAgBgCrCompV6",
    Pipeline.COMP_ASYNC: "BaseGemmPipelineAgBgCrCompAsync",
    Pipeline.BASIC_ASYNC_V1: "BaseGemmPipelineAGmemBGmemCRegV1",
}
"""The base class a grouped-conv launcher dispatches hot loop and tail through (EMIT.md)."""

PIPELINE_CLASSES: dict[Pipeline, str] = {
    Pipeline.BASIC_V1: "GemmPipelineAGmemBGmemCRegV1",
    Pipeline.COMPV1: "GemmPipelineAGmemBGmemCRegV1",
    Pipeline.BASIC_V2: "GemmPipelineAGmemBGmemCRegV2",
    Pipeline.COMPV2: "GemmPipelineAGmemBGmemCRegV2",
    Pipeline.MEM: "GemmPipelineAgBgCrMem",
    Pipeline.COMPV3: "GemmPipelineAgBgCrCompV3",
    Pipeline.COMPV4: "GemmPipelineAgBgCrCompV4",
    Pipeline.COMPV5: "GemmPipelineAgBgCrCompV5",
    Pipeline.COMPV6: "GemmPipelineAgBgCrCompV6",
    Pipeline.COMP_ASYNC: "GemmPipelineAgBgCrCompAsync",
    Pipeline.BASIC_ASYNC_V1: "GemmPipelineAGmemBGmemCRegAsyncV1",
}
"""The pipeline class of each pipeline name; ``wavelet`` has none in any CK revision we know."""

KNOWN_REVISIONS: dict[str, str] = {
    "8584972ba06fd07fa50485012614e38c42ae6e297a504084c8ddde5db8545469":
        "amd-aiter 0.1.7.post2.dev18 (CK 2025-11-18)",
}
"""Fingerprint -> label of the revisions the emitted code has been compiled against (verified)."""


class CkRevision(BaseModel):
    """The CK headers in use: where, their fingerprint, and the features the emitter relies on."""

    model_config = ConfigDict(frozen=True)

    include_dir: str
    fingerprint: str
    label: str
    verified: bool
    pipelines: tuple[str, ...]
    """Pipeline names whose class and hot-loop / tail dispatch base both exist. (In the 2025-11 CK
    the v1 pipeline has no base and also reads ``Problem::VectorSizeC``, which the universal
    problem the grouped-conv kernels use lacks: it cannot be built there.)"""
    streamk_conv: bool
    """The grouped-conv kernels accept a stream-K tile partitioner."""
    explicit_gemm: bool
    """``GroupedConvTraits`` has an explicit-GEMM parameter."""
    split_image_variants: tuple[str, ...]
    """Variants whose kernel reads ``EnableSplitImage``."""
    merge_groups_variants: tuple[str, ...]
    """Variants whose kernel reads ``NumGroupsToMerge``."""
    two_stage: bool
    """The element-wise kernel and ``UnaryConvert`` the two-stage bwd_weight needs exist."""
    instance_string: bool
    """Kernels offer ``GetInstanceString`` (CK's experimental builder)."""
    depthwise: bool
    """A direct depthwise convolution kernel exists."""
    warp_gemms: dict[str, tuple[tuple[int, int, int], ...]]
    """Per dtype, the warp tiles (m, n, k) the warp-GEMM dispatcher has (non-transposed C)."""

    def summary(self) -> dict[str, object]:
        return self.model_dump(mode="json")


def _aiter_include() -> Path | None:
    spec = importlib.util.find_spec("aiter_meta")
    if spec is None or not spec.submodule_search_locations:
        return None
    for location in spec.submodule_search_locations:
        candidate = Path(location) / "3rdparty" / "composable_kernel" / "include"
        if (candidate / MARKER).is_file():
            return candidate
    return None


def _include_dir(root: Path) -> Path | None:
    """``root`` itself if it holds ``ck_tile/``, else ``root/include``."""
    for candidate in (root, root / "include"):
        if (candidate / MARKER).is_file():
            return candidate
    return None


def locate_ck(ck_root: str | os.PathLike[str] | None = None) -> Path:
    """The CK include directory: ``ck_root``, ``$CK_ROOT``, the ROCm include dir, the amd-aiter wheel.

    An explicit ``ck_root`` or ``$CK_ROOT`` that holds no CK Tile headers is an error rather than a
    silent fall-through, so a typo cannot select a different CK.
    """
    looked: list[str] = []
    for source, value in (("--ck-root", ck_root), ("CK_ROOT", os.environ.get("CK_ROOT"))):
        if value:
            found = _include_dir(Path(value))
            if found is None:
                raise CkspaceError(f"{source} {value!r} holds no {MARKER} (nor include/{MARKER})")
            return found.resolve()
    rocm = [os.environ.get("ROCM_PATH"), "/opt/rocm"]
    for value in rocm:
        if value:
            looked.append(f"{value}/include")
            found = _include_dir(Path(value) / "include")
            if found is not None:
                return found.resolve()
    looked.append("the amd-aiter wheel (aiter_meta/3rdparty/composable_kernel/include)")
    found = _aiter_include()
    if found is not None:
        return found.resolve()
    raise CkspaceError("no CK Tile headers found; looked at --ck-root, CK_ROOT, " + ", ".join(looked)
                       + " (scripts/install-toolchain-gfx942.sh installs them)")


def _read(include: Path, relative: Path | str) -> str:
    path = include / relative
    return path.read_text(encoding="utf-8", errors="replace") if path.is_file() else ""


WARP_GEMM_DTYPES = {"float": Dtype.FP32, "ck_tile::half_t": Dtype.FP16, "ck_tile::bf16_t": Dtype.BF16}
_WARP_GEMM = re.compile(r"struct WarpGemmDispatcher<\s*([\w:]+),\s*\1,\s*float,\s*(\d+),\s*(\d+),\s*(\d+),\s*false\s*>")


def _warp_gemms(include: Path) -> dict[str, tuple[tuple[int, int, int], ...]]:
    text = _read(include, "ck_tile/ops/gemm/warp/warp_gemm_dispatcher.hpp")
    found: dict[str, list[tuple[int, int, int]]] = {d.value: [] for d in Dtype}
    for match in _WARP_GEMM.finditer(text):
        dtype = WARP_GEMM_DTYPES.get(match.group(1))
        if dtype is not None:
            found[dtype.value].append((int(match.group(2)), int(match.group(3)), int(match.group(4))))
    return {d: tuple(sorted(set(t))) for d, t in found.items()}


def _fingerprint(include: Path) -> str:
    """sha256 over the grouped-convolution and GEMM-pipeline headers (names and contents)."""
    digest = hashlib.sha256()
    for folder in (CONV_DIR, PIPELINE_DIR, WARP_DIR):
        for path in sorted((include / folder).rglob("*.hpp")):
            digest.update(str(path.relative_to(include)).encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()


@cache
def detect_revision(include_dir: str) -> CkRevision:
    """Probe the headers under ``include_dir`` (a result of :func:`locate_ck`)."""
    include = Path(include_dir)
    pipeline_text = "\n".join(p.read_text(encoding="utf-8", errors="replace")
                              for p in sorted((include / PIPELINE_DIR).glob("*.hpp")))
    classes = {p for p, cls in PIPELINE_CLASSES.items() if re.search(rf"\bstruct {cls}\b", pipeline_text)}
    bases = {p for p, base in PIPELINE_BASES.items() if re.search(rf"\bstruct {base}\b", pipeline_text)}
    pipelines = tuple(p.value for p in Pipeline if p in classes and p in bases)
    utils = _read(include, CONV_DIR / "utils/grouped_convolution_utils.hpp")
    traits = utils[utils.find("struct GroupedConvTraits"):] if "struct GroupedConvTraits" in utils else ""
    traits_head = utils[:utils.find("struct GroupedConvTraits")].rsplit("template", 1)[-1] if traits else ""
    kernels = {
        Variant.FORWARD: _read(include, CONV_DIR / "kernel/grouped_convolution_forward_kernel.hpp"),
        Variant.BWD_DATA: _read(include, CONV_DIR / "kernel/grouped_convolution_backward_data_kernel.hpp"),
        Variant.BWD_WEIGHT: _read(include, CONV_DIR / "kernel/grouped_convolution_backward_weight_kernel.hpp"),
    }
    elementwise = _read(include, "ck_tile/ops/elementwise/unary_element_wise_operation.hpp")
    fingerprint = _fingerprint(include)
    label = KNOWN_REVISIONS.get(fingerprint, f"unknown CK ({fingerprint[:12]})")
    return CkRevision(
        include_dir=str(include),
        fingerprint=fingerprint,
        label=label,
        verified=fingerprint in KNOWN_REVISIONS,
        pipelines=pipelines,
        streamk_conv=any("StreamK" in text for text in kernels.values()),
        explicit_gemm="ExplicitGemm" in traits_head,
        split_image_variants=tuple(v.value for v, text in kernels.items() if "EnableSplitImage" in text),
        merge_groups_variants=tuple(v.value for v, text in kernels.items() if "NumGroupsToMerge" in text),
        two_stage=(include / "ck_tile/ops/elementwise.hpp").is_file() and "struct UnaryConvert" in elementwise,
        instance_string=any("GetInstanceString" in text for text in kernels.values()),
        warp_gemms=_warp_gemms(include),
        depthwise=any("depthwise" in p.name.lower() for p in (include / "ck_tile/ops").rglob("*.hpp")),
    )


def ck_rules(revision: CkRevision, variant: Variant, dtype: Dtype) -> tuple[Rule, ...]:
    """What ``revision`` cannot build, as rules of predicate ``ck_revision`` for one cell's variant
    and dtype.

    A rule folds to TRUE where the revision has the feature, keeping its name (as the space's
    other rules do), so callers can list every revision rule and see which ones bite.
    """
    source = f"CK headers {revision.label}"
    missing = [p.code for p in Pipeline if p.value not in revision.pipelines]

    def rule(name: str, expr: Expr, text: str) -> Rule:
        return Rule(name, "ck_revision", expr, text, source)

    return (
        rule("ck_pipeline", Not(F("pipeline").isin(missing)) if missing else TRUE,
             "the pipeline's class and dispatch base exist in this CK: "
             + (", ".join(revision.pipelines) or "none")),
        rule("ck_streamk", TRUE if revision.streamk_conv else F("streamk_enabled").eq(0),
             "this CK's grouped-conv kernels take no stream-K partitioner"),
        rule("ck_explicit_gemm", TRUE if revision.explicit_gemm else F("explicit_gemm").eq(0),
             "this CK's GroupedConvTraits has no explicit-GEMM parameter"),
        rule("ck_split_image",
             TRUE if variant.value in revision.split_image_variants else F("split_image").eq(0),
             f"this CK's {variant.value} kernel has no split-image mode"),
        rule("ck_groups_to_merge",
             TRUE if variant.value in revision.merge_groups_variants else F("num_groups_to_merge").eq(1),
             f"this CK's {variant.value} kernel does not merge groups"),
        rule("ck_two_stage",
             TRUE if revision.two_stage or variant is not Variant.BWD_WEIGHT else F("two_stage").eq(0),
             "this CK lacks the element-wise convert kernel of the two-stage bwd_weight"),
        rule("ck_warp_gemm", in_table(WARP, revision.warp_gemms.get(dtype.value, ())),
             f"this CK's warp-GEMM dispatcher has a {dtype.value} warp tile (m, n, k) in "
             f"{list(revision.warp_gemms.get(dtype.value, ()))}"),
        rule("ck_epilogue", F("epilogue").eq(Epilogue.CSHUFFLE.code),
             "grouped-conv kernels are emitted with the CShuffle epilogue only"),
        rule("ck_double_lds",
             implies(F("pipeline").isin([Pipeline.COMPV4.code, Pipeline.COMP_ASYNC.code]),
                     F("double_smem_buffer").eq(1)),
             "compv4 and comp_async static_assert the double LDS buffer"),
    )


def depthwise_note(revision: CkRevision) -> str:
    """Why depthwise configs are not emitted (stated in the manifest, never silent)."""
    if revision.depthwise:
        return "this CK has a depthwise kernel, but ckspace emits GEMM kernels only: depthwise configs skipped"
    return "this CK has no direct depthwise convolution kernel: depthwise configs skipped"
