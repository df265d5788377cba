"""The selector's features, restated for one (problem, config) pair in plain Python.

Independent of ckspace.features.matrix and ckspace.features.formula: integer arithmetic where CK's
sizes are integers, math.ceil/floor, the implicit GEMM of each variant written out per variant
(not read from core.operands), and the feature meanings of the module docstring; the analytical
model's feature is tests/reference_performance.py's. Tests compare the vectorised features against
it, so a wrong operator or constant in the formulas shows.
"""

from __future__ import annotations

import math

from reference_performance import reference_log2_tflops

from ckspace.core.config import GemmConfig
from ckspace.core.fields import GEMM_FIELD_NAMES
from ckspace.core.vocab import Dtype, Pipeline, Variant
from ckspace.features.hardware import HardwareFacts
from ckspace.workloads.problem import ConvProblem

ELEMENT_BYTES = {Dtype.FP16: 2, Dtype.BF16: 2, Dtype.FP32: 4}


def warp_size(arch: str) -> int:
    """RDNA (gfx11, gfx12) runs these kernels in 32-lane waves, CDNA in 64-lane ones."""
    return 32 if arch.startswith(("gfx11", "gfx12")) else 64


def _out(size: int, filt: int, stride: int, pad: int, dil: int) -> int:
    return (size + 2 * pad - dil * (filt - 1) - 1) // stride + 1


def _blocks_per_cu_hint(config: GemmConfig) -> int:
    """Upstream's deduce_block_per_cu, restated: compv4 and async pipelines keep one block per
    CU, the older ones two, compv3/compv5-like ones two unless the LDS is double-buffered."""
    if config.pipeline in (Pipeline.COMPV4, Pipeline.COMP_ASYNC):
        return 1
    if config.pipeline in (
        Pipeline.COMPV1,
        Pipeline.COMPV2,
        Pipeline.BASIC_V1,
        Pipeline.BASIC_V2,
        Pipeline.BASIC_ASYNC_V1,
        Pipeline.WAVELET,
    ):
        return 2
    return 1 if config.double_smem_buffer else 2


def reference_features(
    problem: ConvProblem, config: GemmConfig, variant: Variant, dtype: Dtype, hw: HardwareFacts
) -> dict[str, float]:
    """Every feature by name (the config block from the config's fields, the rest computed)."""
    p = problem
    cg, kg = p.C // p.G, p.K // p.G
    spatial = {
        "d": (p.Di, p.Z, p.stride_d, p.pad_d, p.dil_d),
        "h": (p.Hi, p.Y, p.stride_h, p.pad_h, p.dil_h),
        "w": (p.Wi, p.X, p.stride_w, p.pad_w, p.dil_w),
    }
    outs = {d: _out(*v) for d, v in spatial.items()}
    inp = p.Di * p.Hi * p.Wi
    taps = p.Z * p.Y * p.X
    out = outs["d"] * outs["h"] * outs["w"]
    if variant is Variant.FORWARD:  # A = input (Cg), B = weight (Cg), C = output (Kg)
        m, n, k, ch_a, ch_b, ch_c = p.N * out, kg, cg * taps, cg, cg, kg
    elif variant is Variant.BWD_DATA:  # A = output gradient (Kg), B = weight (Cg), C = input gradient (Cg)
        m, n, k, ch_a, ch_b, ch_c = p.N * inp, cg, kg * taps, kg, cg, cg
    else:  # bwd_weight: A = output gradient (Kg), B = input (Cg), C = weight gradient (Cg)
        m, n, k, ch_a, ch_b, ch_c = kg, taps * cg, p.N * out, kg, cg, cg
    elem = ELEMENT_BYTES[dtype]
    flops = 2 * p.G * p.N * out * kg * cg * taps
    moved = elem * (p.N * p.C * inp + p.K * cg * taps + p.N * p.K * out)
    f: dict[str, float] = {
        "N": p.N,
        "G": p.G,
        "Cg": cg,
        "Kg": kg,
        "Di": p.Di,
        "Hi": p.Hi,
        "Wi": p.Wi,
        "Z": p.Z,
        "Y": p.Y,
        "X": p.X,
        "Do": outs["d"],
        "Ho": outs["h"],
        "Wo": outs["w"],
        "stride_d": p.stride_d,
        "stride_h": p.stride_h,
        "stride_w": p.stride_w,
        "pad_d": p.pad_d,
        "pad_h": p.pad_h,
        "pad_w": p.pad_w,
        "dil_d": p.dil_d,
        "dil_h": p.dil_h,
        "dil_w": p.dil_w,
        "gemm_m": m,
        "gemm_n": n,
        "gemm_k": k,
        "log2_gemm_m": math.log2(m),
        "log2_gemm_n": math.log2(n),
        "log2_gemm_k": math.log2(k),
        "log2_flops": math.log2(flops),
        "log2_bytes": math.log2(moved),
        "arithmetic_intensity": flops / moved,
    }
    c = config
    f.update({name: float(value) for name, value in zip(GEMM_FIELD_NAMES, c.row(), strict=True)})
    lds = (c.tile_m + c.tile_n) * c.tile_k * elem * (2 if c.double_smem_buffer else 1)
    hint = _blocks_per_cu_hint(c)
    f.update(
        {
            "threads": warp_size(c.arch) * c.wave_m * c.wave_n * c.wave_k,
            "lds_bytes": lds,
            "block_per_cu_hint": hint,
            "warp_iters_m": c.tile_m / (c.wave_m * c.warp_tile_m),
            "warp_iters_n": c.tile_n / (c.wave_n * c.warp_tile_n),
            "warp_iters_k": c.tile_k / (c.wave_k * c.warp_tile_k),
        }
    )
    tiles_m, tiles_n, k_loop = -(-m // c.tile_m), -(-n // c.tile_n), -(-k // c.tile_k)
    eff_m, eff_n, eff_k = m / (tiles_m * c.tile_m), n / (tiles_n * c.tile_n), k / (k_loop * c.tile_k)
    tiles = tiles_m * tiles_n * p.G
    cus = hw.compute_units
    blocks_lds = (hw.lds_bytes_per_cu) // lds
    slots = cus * max(1, min(blocks_lds, hint))
    rounds = -(-tiles // slots)
    last_wave = tiles / (rounds * slots)
    pad_eff = {
        name: ch / (-(-ch // vec) * vec)
        for name, ch, vec in (("a", ch_a, c.vec_a), ("b", ch_b, c.vec_b), ("c", ch_c, c.vec_c))
    }
    traffic = p.G * elem * (tiles_n * m * k + tiles_m * n * k + m * n)
    eff = eff_m * eff_n * eff_k
    busy = min(tiles, slots) / slots
    padded_flops = flops / (eff * pad_eff["a"] * pad_eff["c"])
    seconds = max(
        padded_flops / (hw.peak_dense_tflops[dtype.value] * 1e12 * busy * last_wave),
        traffic / (hw.memory_bandwidth_gbs * 1e9),
    )
    f.update(
        {
            "eff_m": eff_m,
            "eff_n": eff_n,
            "eff_k": eff_k,
            "eff_mnk": eff,
            "padding_waste": 1 - eff,
            "tiles_m": tiles_m,
            "tiles_n": tiles_n,
            "log2_tiles": math.log2(tiles),
            "tiles_per_cu": tiles / cus,
            "last_wave_eff": last_wave,
            "waves_of_blocks": tiles / slots,
            "k_loop": k_loop,
            "blocks_per_cu_lds": blocks_lds,
            "vec_pad_eff_a": pad_eff["a"],
            "vec_pad_eff_b": pad_eff["b"],
            "vec_pad_eff_c": pad_eff["c"],
            "log2_tile_traffic": math.log2(traffic),
            "tile_intensity": flops / traffic,
            "log2_roofline_tflops": math.log2(flops / seconds / 1e12),
            # the analytical performance model (tests/reference_performance.py restates it)
            "log2_model_tflops": reference_log2_tflops(p, c, variant, dtype, hw),
        }
    )
    return f
