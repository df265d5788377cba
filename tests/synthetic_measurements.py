"""Measurement CSVs in ckspace bench's schema, made up for tests: real kernels, real problem
shapes, invented timings.

No GPU measured bwd_data or bwd_weight kernels for this project, so the tests that train on those
variants need data with a known truth. The timings come from a small cost model written here, on
purpose unlike ckspace's analytical roofline (``ckspace.features.matrix``): the implicit GEMM sizes are
restated per variant, each block tile pays its quantisation waste and a fixed cost per K step,
bigger tiles run a larger share of peak, pipelines differ by a factor, the grid fills the compute
units in whole rounds, and split-K adds a reduction. Seeded lognormal noise makes rows vary as
measurements do. The truth (noise-free latency) is returned beside the rows, so a test can judge a
selector against it.

Kernels come from the real space (``Space(..., rule_set="default")``), problems from upstream's
synthetic problem lists (the ``synthetic-<variant>`` data sets of :mod:`ckspace.workloads.datasets`)
plus 1D/3D, dilated and split-K shapes drawn here; only pairs whose kernel supports the problem
(the selector's problem rules, as ``ckspace bench`` asks ``ckspace_is_supported``) get rows.
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ckspace.core.config import GemmConfig
from ckspace.select.selector import Selector
from ckspace.space.space import Space
from ckspace.workloads.datasets import DATASETS
from ckspace.workloads.measurement import COLUMNS, config_cells, problem_cells
from ckspace.workloads.problem import ConvProblem

ARCH, DTYPE = "gfx950", "bf16"
CUS, PEAK_TFLOPS = 256, 2516.6
PIPELINE_SPEED = {
    "compv3": 1.0,
    "compv4": 1.1,
    "compv5": 0.9,
    "compv6": 1.05,
    "mem": 0.7,
    "comp_async": 1.1,
    "basic_v1": 0.5,
}
"""Share of a tile's rate each pipeline reaches (invented; compv4 is the fast one)."""
_KEYS = (
    "N",
    "C",
    "K",
    "G",
    "Di",
    "Hi",
    "Wi",
    "Z",
    "Y",
    "X",
    "stride_d",
    "stride_h",
    "stride_w",
    "pad_d",
    "pad_h",
    "pad_w",
    "dil_d",
    "dil_h",
    "dil_w",
)


def listed_problems(variant: str, count: int, offset: int = 0) -> list[ConvProblem]:
    """``count`` distinct problems of the variant's published synthetic list, spread over it (2D)."""
    path = DATASETS[f"synthetic-{variant.replace('_', '-')}"].path
    with path.open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    out: dict[str, ConvProblem] = {}
    step = max(1, len(rows) // (count * 2))
    for row in rows[offset::step]:
        problem = ConvProblem(ndim=2, **{k: int(row[k]) for k in _KEYS})  # 2D rows carry the neutral depth
        out.setdefault(problem.text(), problem)
        if len(out) == count:
            break
    return list(out.values())


def drawn_problems(variant: str, count: int, seed: int) -> list[ConvProblem]:
    """1D and 3D problems, dilations, groups and (bwd_weight) split-K, which the lists lack."""
    rng = np.random.default_rng(seed)
    out: dict[str, ConvProblem] = {}
    while len(out) < count:
        ndim = int(rng.choice([1, 2, 3]))
        g = int(rng.choice([1, 1, 2, 4]))
        values = {
            "ndim": ndim,
            "N": int(rng.choice([1, 2, 4, 8])),
            "G": g,
            "C": g * int(rng.choice([32, 64, 128, 256])),
            "K": g * int(rng.choice([32, 64, 128, 256])),
            "k_batch": int(rng.choice([1, 2, 4])) if variant == "bwd_weight" else 1,
        }
        for dim, size, filt in (("d", "Di", "Z"), ("h", "Hi", "Y"), ("w", "Wi", "X"))[3 - ndim :]:
            values[size] = int(rng.choice([7, 14, 28, 56] if ndim < 3 else [4, 8, 16]))
            values[filt] = int(rng.choice([1, 3]))
            values[f"dil_{dim}"] = int(rng.choice([1, 1, 2]))
            values[f"pad_{dim}"] = values[f"dil_{dim}"] * (values[filt] - 1) // 2
            values[f"stride_{dim}"] = int(rng.choice([1, 1, 2]))
        problem = ConvProblem(**values)
        out.setdefault(problem.text(), problem)
    return list(out.values())


def gemm_sizes(problem: ConvProblem, variant: str) -> tuple[int, int, int]:
    """Per-group implicit GEMM M, N, K, restated: forward (N*out, K, C*filter), bwd_data (N*in, C,
    K*filter), bwd_weight (K, C*filter, N*out)."""
    out = math.prod(problem.output_size(d) for d in problem.dims)
    inp = math.prod(problem.input_size(d) for d in problem.dims)
    filt = math.prod(problem.filter_size(d) for d in problem.dims)
    cg, kg = problem.C // problem.G, problem.K // problem.G
    return {
        "forward": (problem.N * out, kg, cg * filt),
        "bwd_data": (problem.N * inp, cg, kg * filt),
        "bwd_weight": (kg, cg * filt, problem.N * out),
    }[variant]


def true_latency_ms(problem: ConvProblem, config: GemmConfig) -> float:
    """The cost model's noise-free latency of ``config`` on ``problem`` (see the module doc)."""
    m, n, k = gemm_sizes(problem, config.variant.value)
    tm, tn, tk = config.tile_m, config.tile_n, config.tile_k
    splits = problem.k_batch
    k_steps = math.ceil(math.ceil(k / splits) / tk)
    tiles = math.ceil(m / tm) * math.ceil(n / tn) * problem.G * splits
    tile_rate = PEAK_TFLOPS / CUS * PIPELINE_SPEED[config.pipeline.value] * (tm * tn) / (tm * tn + 2048)
    tile_us = (2 * tm * tn * tk * k_steps) / (tile_rate * 1e6) + 0.02 * k_steps
    rounds = math.ceil(tiles / CUS)
    reduction_us = 0.0 if splits == 1 else 2e-4 * m * n * problem.G * splits / 1e3
    return (1.0 + rounds * tile_us + reduction_us) / 1e3


@dataclass
class Sweep:
    """The rows of a made-up sweep and the truth behind them."""

    rows: list[dict[str, str]] = field(default_factory=list)
    truth: dict[tuple[str, str], float] = field(default_factory=dict)  # (problem_idx, kernel name) -> ms
    problems: dict[str, ConvProblem] = field(default_factory=dict)  # problem_idx -> problem
    configs: dict[str, list[GemmConfig]] = field(default_factory=dict)  # variant -> kernels

    def write(self, path: Path) -> Path:
        with path.open("w", newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=COLUMNS)
            writer.writeheader()
            writer.writerows(self.rows)
        return path


def kernels(variant: str) -> list[GemmConfig]:
    """The ``default`` rule set's GEMM kernels of the variant, 1D to 3D, in the upstream rule space
    (``ck=None``): what a sweep measures does not depend on the CK headers the test machine has."""
    return [c for c in Space(ARCH, variant, [1, 2, 3], DTYPE, "default", ck=None) if c.kind == "gemm"]


def sweep(
    problems: dict[str, list[ConvProblem]],
    seed: int = 0,
    noise: float = 0.03,
    bad: dict[str, float] | None = None,
    label: str = "name",
) -> Sweep:
    """Rows for every supported (kernel, problem) pair of each variant's ``problems``. ``bad``: the
    share of pairs ending ``wrong`` (with a latency ten times better than the truth, so a reader
    that used them would be fooled), ``crash``, ``timeout`` or ``failed`` (no latency).
    ``label="garbage"`` writes kernel labels that name nothing (identity must come from the config)."""
    rng = np.random.default_rng(seed)
    bad = bad or {}
    out = Sweep()
    index = 0
    for variant, listed in problems.items():
        configs = kernels(variant)
        out.configs[variant] = configs
        selector = (
            Selector.load(ARCH, variant, DTYPE, engine="lightgbm")
            if variant == "forward"
            else Selector.load(ARCH, variant, DTYPE)
        )
        prepared = selector.prepare(configs)
        for problem in listed:
            idx = str(index)
            index += 1
            out.problems[idx] = problem
            for j in np.flatnonzero(selector.feasible(problem, prepared)):
                config = configs[j]
                truth = true_latency_ms(problem, config)
                out.truth[(idx, config.name)] = truth
                status = _status(rng, bad)
                latency = truth * float(np.exp(rng.normal(0.0, noise)))
                if status == "wrong":
                    latency = truth / 10
                row = dict.fromkeys(COLUMNS, "")
                row.update(
                    problem_cells(problem),
                    **config_cells(config),
                    problem_idx=idx,
                    status=status,
                    kernel=config.name if label == "name" else f"kernel-{rng.integers(1 << 30)}",
                    ckspace_version="test",
                    device="0",
                    warmup="3",
                    repeat="10",
                )
                if status in ("ok", "wrong"):
                    row.update(
                        latency_ms=repr(latency), tflops=repr(problem.flops / (latency * 1e-3) / 1e12), non_zero="1"
                    )
                else:
                    row["detail"] = f"synthetic {status}"
                out.rows.append(row)
    return out


def _status(rng: np.random.Generator, bad: dict[str, float]) -> str:
    draw = rng.random()
    for status, share in bad.items():
        if draw < share:
            return status
        draw -= share
    return "ok"
