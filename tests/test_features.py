"""Selector features against values computed by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ckspace.core.problem import ConvProblem
from ckspace.core.vocab import Dtype, Variant
from ckspace.select.benchmark_names import config_from_benchmark_name
from ckspace.select.features import (
    FEATURE_NAMES,
    ConfigTable,
    feature_matrix,
    feature_spec,
)
from ckspace.select.hardware import hardware_facts

HW = hardware_facts("gfx950")


def features(problem: str, kernel: str) -> dict[str, float]:
    config = config_from_benchmark_name(kernel, "gfx950")
    row = feature_matrix(ConvProblem.parse(problem), Variant.FORWARD, Dtype.BF16, ConfigTable.build([config]), HW)[0]
    return dict(zip(FEATURE_NAMES, row))


def test_3x3_problem_with_a_128x128x64_tile() -> None:
    # N=2, C=64, K=96, 30x30, 3x3, stride 1, pad 1 -> Ho=Wo=30; M = 2*30*30 = 1800, N = 96, K = 64*9 = 576
    f = features("N=2,C=64,K=96,Hi=30,Wi=30,Y=3,X=3,stride=1,pad=1", "grouped_conv_forward_bf16_2d_128x128x64_compv3")
    assert (f["Ho"], f["Wo"], f["gemm_m"], f["gemm_n"], f["gemm_k"]) == (30, 30, 1800, 96, 576)
    assert f["tiles_m"] == 15 and f["tiles_n"] == 1 and f["k_loop"] == 9  # ceil(1800/128), ceil(96/128), 576/64
    assert f["eff_m"] == pytest.approx(1800 / 1920) and f["eff_n"] == pytest.approx(96 / 128) and f["eff_k"] == 1
    assert f["padding_waste"] == pytest.approx(1 - (1800 / 1920) * (96 / 128))
    flops = 2 * 1800 * 96 * 576
    assert f["log2_flops"] == pytest.approx(math.log2(flops))
    moved = 2 * (2 * 64 * 900 + 96 * 64 * 9 + 2 * 96 * 900)  # bf16 input, weight, output bytes
    assert f["arithmetic_intensity"] == pytest.approx(flops / moved)
    # 4x4 waves of 64 lanes; LDS (128+128)*64*2 bytes; 160 KiB per CU holds 5; compv3 hint 2 blocks/CU
    assert (f["threads"], f["lds_bytes"], f["blocks_per_cu_lds"], f["block_per_cu_hint"]) == (1024, 32768, 5, 2)
    assert f["tiles_per_cu"] == pytest.approx(15 / 256)
    assert f["last_wave_eff"] == pytest.approx(15 / 512)  # 15 tiles on 256 CUs x 2 slots
    assert (f["vec_pad_eff_a"], f["vec_pad_eff_b"], f["vec_pad_eff_c"]) == (1, 1, 1)
    traffic = 2 * (1 * 1800 * 576 + 15 * 96 * 576 + 1800 * 96)
    assert f["log2_tile_traffic"] == pytest.approx(math.log2(traffic))


def test_strided_1x1_problem_with_compv4_and_channel_padding() -> None:
    # N=4, C=20, K=36, 28x28, 1x1, stride 2 -> 14x14; M = 784, N = 36, K = 20
    f = features("N=4,C=20,K=36,Hi=28,Wi=28,Y=1,X=1,stride=2,pad=0", "grouped_conv_forward_bf16_2d_16x64x128_compv4")
    assert (f["gemm_m"], f["gemm_n"], f["gemm_k"]) == (784, 36, 20)
    assert (f["tiles_m"], f["tiles_n"], f["k_loop"]) == (49, 1, 1)
    assert f["eff_k"] == pytest.approx(20 / 128)
    assert f["double_smem_buffer"] == 1 and f["lds_bytes"] == (16 + 64) * 128 * 2 * 2
    assert f["blocks_per_cu_lds"] == 163840 // 40960 and f["block_per_cu_hint"] == 1
    # vec (4, 8, 8): Cg=20 pads to 24 for vec_b = 8, Kg=36 pads to 40 for vec_c = 8
    assert (f["vec_pad_eff_a"], f["vec_pad_eff_b"], f["vec_pad_eff_c"]) == (1, pytest.approx(20 / 24), pytest.approx(36 / 40))
    assert (f["warp_iters_m"], f["warp_iters_n"], f["warp_iters_k"]) == (1, 1, 4)  # 16/(1*16), 64/(4*16), 128/32


def test_feature_spec_is_versioned_and_unique() -> None:
    spec = feature_spec()
    assert spec["version"] >= 1 and len(set(spec["names"])) == len(spec["names"]) == len(FEATURE_NAMES)


def test_config_table_rows_follow_the_candidates() -> None:
    names = ["grouped_conv_forward_bf16_2d_16x64x64_compv3", "grouped_conv_forward_bf16_2d_128x64x128_compv5"]
    table = ConfigTable.build([config_from_benchmark_name(n, "gfx950") for n in names])
    m = feature_matrix(ConvProblem.parse("N=1,C=64,K=64,Hi=8,Wi=8,Y=1,X=1"), Variant.FORWARD, Dtype.BF16, table, HW)
    assert m.shape == (2, len(FEATURE_NAMES)) and m.flags.c_contiguous and np.isfinite(m).all()
    assert list(m[:, FEATURE_NAMES.index("tile_m")]) == [16, 128]
