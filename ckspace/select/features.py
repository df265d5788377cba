"""Features of (problem, kernel config) pairs: the selector's model inputs.

Three blocks, always in this order (the order and names are the versioned feature spec saved with
every model; change either and bump :data:`FEATURE_VERSION`):

* problem: sizes as CK sees them (per-group channels, spatial/filter sizes, strides, pads,
  dilations), the variant's implicit GEMM M/N/K, FLOPs, bytes moved and arithmetic intensity;
* config: every :class:`~ckspace.core.config.GemmConfig` field (enums as their codes) plus
  threads per block, LDS footprint and the pipeline's blocks-per-CU hint;
* interaction: what a tile does to this problem on this arch: quantisation efficiency along M,
  N and K, output tiles against compute units, last-wave efficiency, padding waste, K-loop trip
  count, blocks per CU that LDS allows, channel padding the vector widths force, tile-level
  global traffic, and an analytical roofline TFLOPS estimate (also the cold-start score).

The last interaction feature, the roofline estimate, is also the *analytical fallback*
(:data:`ANALYTICAL_FEATURE`): it charges each kernel its padded work -- tile quantisation along M,
N and K and the channel padding its vector widths force -- at the arch's dense peak scaled by the
share of compute units its grid keeps busy and by its last-wave efficiency, or its tile-level
global traffic at full memory bandwidth, whichever takes longer. It needs only spec-sheet facts, so
it ranks kernels on an arch without measurements; cross-validation scores it beside the model.

Config columns depend on the candidates only, so a selector computes them once
(:class:`ConfigTable`); per problem it adds the scalars and the interactions in a handful of
numpy operations over all candidates at once.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ckspace.core.arch import arch_facts, element_size, lds_bytes
from ckspace.core.config import GemmConfig
from ckspace.core.fields import GEMM_FIELD_NAMES
from ckspace.core.operands import OPERANDS
from ckspace.core.problem import ConvProblem
from ckspace.core.vocab import Dtype, Variant
from ckspace.select.hardware import HardwareFacts

FEATURE_VERSION = 1

PROBLEM_FEATURES: tuple[str, ...] = (
    "N", "G", "Cg", "Kg", "Di", "Hi", "Wi", "Z", "Y", "X", "Do", "Ho", "Wo",
    "stride_d", "stride_h", "stride_w", "pad_d", "pad_h", "pad_w", "dil_d", "dil_h", "dil_w",
    "gemm_m", "gemm_n", "gemm_k", "log2_gemm_m", "log2_gemm_n", "log2_gemm_k",
    "log2_flops", "log2_bytes", "arithmetic_intensity",
)
CONFIG_FEATURES: tuple[str, ...] = GEMM_FIELD_NAMES + ("threads", "lds_bytes", "block_per_cu_hint",
                                                       "warp_iters_m", "warp_iters_n", "warp_iters_k")
INTERACTION_FEATURES: tuple[str, ...] = (
    "eff_m", "eff_n", "eff_k", "eff_mnk", "padding_waste",
    "tiles_m", "tiles_n", "log2_tiles", "tiles_per_cu", "last_wave_eff", "waves_of_blocks",
    "k_loop", "blocks_per_cu_lds", "vec_pad_eff_a", "vec_pad_eff_b", "vec_pad_eff_c",
    "log2_tile_traffic", "tile_intensity", "log2_roofline_tflops",
)
FEATURE_NAMES: tuple[str, ...] = PROBLEM_FEATURES + CONFIG_FEATURES + INTERACTION_FEATURES
ANALYTICAL_FEATURE = "log2_roofline_tflops"


def problem_values(problem: ConvProblem, variant: Variant, dtype: Dtype) -> np.ndarray:
    """The problem block, in :data:`PROBLEM_FEATURES` order."""
    m, n, k = problem.gemm_mnk(variant)
    out_sizes = {d: problem.output_size(d) for d in problem.dims}
    size = element_size(dtype)
    in_elems = problem.N * problem.C * problem.input_volume
    wei_elems = problem.K * problem.Cg * problem.filter_volume
    out_elems = problem.N * problem.K * problem.output_volume
    moved = (in_elems + wei_elems + out_elems) * size
    values = (
        problem.N, problem.G, problem.Cg, problem.Kg, problem.Di, problem.Hi, problem.Wi,
        problem.Z, problem.Y, problem.X, out_sizes.get("d", 1), out_sizes.get("h", 1), out_sizes["w"],
        problem.stride_d, problem.stride_h, problem.stride_w, problem.pad_d, problem.pad_h, problem.pad_w,
        problem.dil_d, problem.dil_h, problem.dil_w,
        m, n, k, math.log2(m), math.log2(n), math.log2(k),
        math.log2(problem.flops), math.log2(moved), problem.flops / moved,
    )
    return np.asarray(values, dtype=np.float64)


@dataclass(frozen=True)
class ConfigTable:
    """Candidate configs as columns, computed once per candidate set."""

    configs: tuple[GemmConfig, ...]
    block: np.ndarray  # (n, len(CONFIG_FEATURES)) float64
    col: dict[str, np.ndarray]  # float64 columns used by the interactions

    @classmethod
    def build(cls, configs: Sequence[GemmConfig]) -> "ConfigTable":
        configs = tuple(configs)
        rows = np.asarray([c.row() for c in configs], dtype=np.float64).reshape(len(configs), len(GEMM_FIELD_NAMES))
        warp = np.asarray([arch_facts(c.arch).warp_size for c in configs], dtype=np.float64)
        elem = np.asarray([element_size(c.dtype) for c in configs], dtype=np.float64)
        f = {name: rows[:, i] for i, name in enumerate(GEMM_FIELD_NAMES)}
        waves = f["wave_m"] * f["wave_n"] * f["wave_k"]
        lds = lds_bytes(f["tile_m"], f["tile_n"], f["tile_k"], elem) * (1 + f["double_smem_buffer"])
        hint = np.asarray([c.block_per_cu for c in configs], dtype=np.float64)
        derived = np.column_stack([
            warp * waves, lds, hint,
            f["tile_m"] / (f["wave_m"] * f["warp_tile_m"]), f["tile_n"] / (f["wave_n"] * f["warp_tile_n"]),
            f["tile_k"] / (f["wave_k"] * f["warp_tile_k"]),
        ]) if configs else np.empty((0, 6))
        block = np.ascontiguousarray(np.hstack([rows, derived]))
        col = {**f, "lds_bytes": lds, "block_per_cu_hint": hint, "elem": elem}
        return cls(configs, block, col)

    def __len__(self) -> int:
        return len(self.configs)


def _ceil_div(a: np.ndarray | float, b: np.ndarray) -> np.ndarray:
    return np.ceil(a / b)


def _vec_pad_eff(channels: int, vec: np.ndarray) -> np.ndarray:
    """Share of useful channels when ``channels`` are padded up to a multiple of ``vec``."""
    return channels / (np.ceil(channels / vec) * vec)


def feature_matrix(problem: ConvProblem, variant: Variant, dtype: Dtype, table: ConfigTable,
                   hw: HardwareFacts) -> np.ndarray:
    """Features of ``problem`` with every candidate of ``table``: (n, len(FEATURE_NAMES)) float64."""
    n_cand = len(table)
    p = problem_values(problem, variant, dtype)
    m, n, k = p[22], p[23], p[24]
    c = table.col
    tm, tn, tk = c["tile_m"], c["tile_n"], c["tile_k"]
    tiles_m, tiles_n, k_loop = _ceil_div(m, tm), _ceil_div(n, tn), _ceil_div(k, tk)
    eff_m, eff_n, eff_k = m / (tiles_m * tm), n / (tiles_n * tn), k / (k_loop * tk)
    eff = eff_m * eff_n * eff_k
    tiles = tiles_m * tiles_n * problem.G
    cus = float(hw.compute_units)
    blocks_lds = np.floor(hw.lds_bytes_per_cu / c["lds_bytes"])
    slots = cus * np.maximum(np.minimum(blocks_lds, c["block_per_cu_hint"]), 1.0)
    rounds = np.ceil(tiles / slots)
    last_wave = tiles / (rounds * slots)
    gemm = OPERANDS[variant]
    ch_a, ch_b, ch_c = (getattr(problem, operand.channels) for operand in (gemm.a, gemm.b, gemm.c))
    vec_a, vec_b, vec_c = (_vec_pad_eff(ch, c[f]) for ch, f in ((ch_a, "vec_a"), (ch_b, "vec_b"), (ch_c, "vec_c")))
    elem = c["elem"]
    traffic = problem.G * elem * (tiles_n * m * k + tiles_m * n * k + m * n)
    flops = float(problem.flops)
    # roofline: the padded work at peak over the CUs the grid keeps busy, or the tile traffic at
    # full bandwidth, whichever takes longer
    busy = np.minimum(tiles, slots) / slots
    compute_s = flops / (eff * vec_a * vec_c) / (hw.peak_tflops(dtype) * 1e12 * busy * last_wave)
    memory_s = traffic / (hw.memory_bandwidth_gbs * 1e9)
    roofline = flops / np.maximum(compute_s, memory_s) / 1e12
    inter = np.column_stack([
        eff_m, eff_n, eff_k, eff, 1.0 - eff,
        tiles_m, tiles_n, np.log2(tiles), tiles / cus, last_wave, tiles / slots,
        k_loop, blocks_lds, vec_a, vec_b, vec_c,
        np.log2(traffic), flops / traffic, np.log2(roofline),
    ])
    out = np.empty((n_cand, len(FEATURE_NAMES)), dtype=np.float64)
    out[:, :len(PROBLEM_FEATURES)] = p
    out[:, len(PROBLEM_FEATURES):len(PROBLEM_FEATURES) + table.block.shape[1]] = table.block
    out[:, len(PROBLEM_FEATURES) + table.block.shape[1]:] = inter
    return out


def feature_spec() -> dict[str, object]:
    """The versioned feature list saved with a model."""
    return {"version": FEATURE_VERSION, "names": list(FEATURE_NAMES)}
