"""Selector features against values computed by hand."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from reference_features import reference_features
from strategies import boundary_problems, gemm_configs

import ckspace
from ckspace.core.vocab import Dtype, Variant
from ckspace.features.hardware import hardware_facts
from ckspace.features.matrix import FEATURE_NAMES, ConfigTable, feature_matrix, feature_spec
from ckspace.space.benchmark_names import config_from_benchmark_name
from ckspace.workloads.problem import ConvProblem

HW = hardware_facts("gfx950")


def features(problem: str, kernel: str) -> dict[str, float]:
    config = config_from_benchmark_name(kernel, "gfx950")
    row = feature_matrix(ConvProblem.parse(problem), Variant.FORWARD, Dtype.BF16, ConfigTable.build([config]), HW)[0]
    return dict(zip(FEATURE_NAMES, row, strict=True))


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
    assert (f["vec_pad_eff_a"], f["vec_pad_eff_b"], f["vec_pad_eff_c"]) == (
        1,
        pytest.approx(20 / 24),
        pytest.approx(36 / 40),
    )
    assert (f["warp_iters_m"], f["warp_iters_n"], f["warp_iters_k"]) == (1, 1, 4)  # 16/(1*16), 64/(4*16), 128/32


def test_feature_spec_is_versioned_and_unique() -> None:
    """The spec names every feature once, and is the one the shipped model was trained on (a
    model of another version or list is refused at load, so a changed spec must come with a
    retrained model and a new version)."""
    spec = feature_spec()
    assert len(set(spec["names"])) == len(spec["names"]) == len(FEATURE_NAMES)
    shipped = Path(ckspace.__file__).parent / "models" / "gfx950" / "forward_bf16" / "features.json"
    assert json.loads(shipped.read_text()) == spec and spec["version"] == 2


def test_config_tables_are_frozen() -> None:
    """A selector memoises its tables and hands them to every query: none may change them."""
    table = ConfigTable.build([config_from_benchmark_name("grouped_conv_forward_bf16_2d_16x64x64_compv3", "gfx950")])
    with pytest.raises(dataclasses.FrozenInstanceError):
        table.block = np.zeros((1, 1))  # type: ignore[misc]


def test_config_table_rows_follow_the_candidates() -> None:
    names = ["grouped_conv_forward_bf16_2d_16x64x64_compv3", "grouped_conv_forward_bf16_2d_128x64x128_compv5"]
    table = ConfigTable.build([config_from_benchmark_name(n, "gfx950") for n in names])
    m = feature_matrix(ConvProblem.parse("N=1,C=64,K=64,Hi=8,Wi=8,Y=1,X=1"), Variant.FORWARD, Dtype.BF16, table, HW)
    assert m.shape == (2, len(FEATURE_NAMES)) and m.flags.c_contiguous and np.isfinite(m).all()
    assert list(m[:, FEATURE_NAMES.index("tile_m")]) == [16, 128]


@st.composite
def sized_problems(draw) -> ConvProblem:
    """Problems the size of real layers (up to 256 images of 224x224, 2048 channels), where the
    grid fills the GPU for many waves and compute, not memory, bounds the roofline."""
    g = draw(st.sampled_from([1, 2, 32]))
    size, filt = draw(st.sampled_from([7, 14, 56, 224])), draw(st.sampled_from([1, 3]))
    stride = draw(st.sampled_from([1, 2]))
    return ConvProblem.from_values(
        {
            "ndim": 2,
            "N": draw(st.sampled_from([1, 8, 64, 256])),
            "G": g,
            "C": g * draw(st.sampled_from([3, 64, 256, 1024, 2048])),
            "K": g * draw(st.sampled_from([16, 64, 256, 2048])),
            "Hi": size,
            "Wi": size,
            "Y": filt,
            "X": filt,
            "stride_h": stride,
            "stride_w": stride,
            "pad_h": filt // 2,
            "pad_w": filt // 2,
        }
    )


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.one_of(boundary_problems(), sized_problems()),
    st.lists(gemm_configs(consistent=True), min_size=1, max_size=3),
    st.sampled_from(list(Variant)),
    st.sampled_from(list(Dtype)),
    st.sampled_from(["gfx942", "gfx950"]),
)
@pytest.mark.slow
def test_every_feature_matches_the_plain_python_statement(problem, configs, variant, dtype, arch) -> None:
    """Each feature of each candidate, against tests/reference_features.py: every variant's GEMM,
    every dtype's element size and peak, both hardware sheets, tiles far larger than LDS holds."""
    hw = hardware_facts(arch)
    # a config's own arch's facts price it (ConfigTable), so the configs are of the sheet's arch
    configs = [c.model_copy(update={"arch": arch, "variant": variant, "dtype": dtype}) for c in configs]
    matrix = feature_matrix(problem, variant, dtype, ConfigTable.build(configs), hw)
    for config, row in zip(configs, matrix, strict=True):
        expected = reference_features(problem, config, variant, dtype, hw)
        for name, value in zip(FEATURE_NAMES, row, strict=True):
            assert value == pytest.approx(expected[name], rel=1e-12, abs=1e-12), (name, problem.text(), config)
        # the estimate itself to 1e-13 (its logarithm hides a relative error of 1e-12 in a unit
        # constant): both sides round a few times at 1e-16
        roofline = 2 ** row[FEATURE_NAMES.index("log2_roofline_tflops")]
        assert roofline == pytest.approx(2 ** expected["log2_roofline_tflops"], rel=1e-13), (problem.text(), config)


def test_both_bounds_of_the_roofline_occur() -> None:
    """The roofline takes the longer of two times. A big 3x3 layer on a 128x128 tile is bound by
    its tile traffic at full bandwidth (tile-level traffic has an intensity of at most
    128 * 128 / 256 = 64 flops per byte, a fifth of gfx950's balance); a layer of one tile is
    compute-bound, at the peak scaled by its tile efficiency and its share of the 512 slots."""
    hw = hardware_facts("gfx950")
    tile = config_from_benchmark_name("grouped_conv_forward_bf16_2d_128x128x64_compv3", "gfx950")

    def features_of(text: str) -> dict[str, float]:
        row = feature_matrix(ConvProblem.parse(text), Variant.FORWARD, Dtype.BF16, ConfigTable.build([tile]), hw)[0]
        return dict(zip(FEATURE_NAMES, row, strict=True))

    f = features_of("N=256,C=256,K=256,Hi=56,Wi=56,Y=3,X=3,pad=1")
    m, k = 256 * 56 * 56, 256 * 9
    assert (f["tiles_m"], f["tiles_n"], f["last_wave_eff"]) == (6272, 2, pytest.approx(12544 / 12800))
    traffic = 2 * (2 * m * k + 6272 * 256 * k + m * 256)  # bf16: A read per N tile, B per M tile, C once
    assert 2 ** f["log2_tile_traffic"] == pytest.approx(traffic)
    assert 2 ** f["log2_roofline_tflops"] == pytest.approx(
        2 * m * 256 * k / (traffic / (hw.memory_bandwidth_gbs * 1e9)) / 1e12
    )
    f = features_of("N=1,C=64,K=64,Hi=8,Wi=8,Y=1,X=1")  # M = 64, N = 64, K = 64: one tile, a quarter used
    assert (f["eff_mnk"], f["last_wave_eff"]) == (0.25, 1 / 512)
    assert 2 ** f["log2_roofline_tflops"] == pytest.approx(hw.peak_tflops(Dtype.BF16) * 0.25 / 512 / 512)


def test_take_and_stack_keep_rows_whole() -> None:
    """A subset or a concatenation of a config table has exactly the rows of the configs it holds,
    in order (the selector narrows candidates this way per problem)."""
    names = [
        "grouped_conv_forward_bf16_2d_16x64x64_compv3",
        "grouped_conv_forward_bf16_2d_128x64x128_compv5",
        "grouped_conv_forward_bf16_2d_64x64x128_compv4",
    ]
    configs = [config_from_benchmark_name(n, "gfx950") for n in names]
    table = ConfigTable.build(configs)
    picked = table.take(np.array([2, 0]))
    again = ConfigTable.build([configs[2], configs[0]])
    assert picked.configs == again.configs and len(picked) == 2
    assert np.array_equal(picked.block, again.block) and np.array_equal(picked.formula_columns, again.formula_columns)
    stacked = table.take(np.array([1])).stack(table.take(np.array([2, 0])))
    whole = ConfigTable.build([configs[1], configs[2], configs[0]])
    assert stacked.configs == whole.configs and len(stacked) == 3
    assert np.array_equal(stacked.block, whole.block) and np.array_equal(stacked.formula_columns, whole.formula_columns)
    empty = ConfigTable.build([])
    assert len(empty) == 0 and empty.block.shape == (0, table.block.shape[1])
    assert empty.formula_columns.shape == (0, table.formula_columns.shape[1])
    assert np.array_equal(empty.stack(table).block, table.block)


def test_compiled_features_are_kept_per_hardware_sheet() -> None:
    """The memoised program of a cell is keyed by the hardware too: gfx942's CU count and peak
    give other interaction features than gfx950's for the same pair."""
    problem = ConvProblem.parse("N=32,C=128,K=128,Hi=28,Wi=28,Y=3,X=3,pad=1")
    table = ConfigTable.build([config_from_benchmark_name("grouped_conv_forward_bf16_2d_128x128x64_compv3", "gfx950")])
    rows = {
        arch: feature_matrix(problem, Variant.FORWARD, Dtype.BF16, table, hardware_facts(arch))[0]
        for arch in ("gfx950", "gfx942", "gfx950")
    }
    index = FEATURE_NAMES.index("tiles_per_cu")
    assert rows["gfx950"][index] == pytest.approx(rows["gfx942"][index] * 304 / 256)


def test_a_column_of_every_problem_at_once_is_each_problems_matrix_column() -> None:
    """feature_column, one computed feature over every problem of the shipped MI355X cell (231
    problems, 30 kernels), to the bit of the per-problem matrices, for each computed feature;
    config columns and unknown names are refused, naming the choices."""
    from ckspace.features.matrix import INTERACTION_FEATURES, PROBLEM_FEATURES, feature_column
    from ckspace.training.dataset import load_cells
    from ckspace.workloads.datasets import DATASETS

    (data,) = load_cells([DATASETS["mi355x-forward-bf16"].path])
    table, hw = ConfigTable.build(data.configs), hardware_facts(data.arch)
    matrices = np.stack([feature_matrix(p, data.variant, data.dtype, table, hw) for p in data.problems])
    for name in PROBLEM_FEATURES + INTERACTION_FEATURES:
        column = feature_column(name, data.problems, data.variant, data.dtype, table, hw)
        expected = matrices[:, :, FEATURE_NAMES.index(name)]
        assert column.shape == expected.shape
        assert np.array_equal(column, expected, equal_nan=True), name
    for bad in ("tile_m", "no_such_feature"):
        with pytest.raises(ValueError, match=f"'{bad}' is not a computed feature; computed features: N, G"):
            feature_column(bad, data.problems, data.variant, data.dtype, table, hw)
