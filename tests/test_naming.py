"""Kernel names: one grammar prints and parses GEMM, depthwise and tile-engine benchmark names.

Printing is checked against every kernel the rule sets list (name -> fields -> name), parsing
against every suffix combination and against malformed names (which it must reject, as before
the grammar became one table), and benchmark names against the configs recorded before their
mapping moved onto the ``default`` generator.
"""

from __future__ import annotations

import csv
import io
from contextlib import redirect_stdout
from itertools import permutations

import pytest
from conftest import upstream_csv
from hypothesis import given, settings
from hypothesis import strategies as st

from ckspace.cli import main
from ckspace.constraints.generate.default_list import proposals
from ckspace.core import naming
from ckspace.core.config import GemmConfig
from ckspace.core.errors import InvalidChoiceError, KernelNameError
from ckspace.core.fields import GEMM_DEFAULTS, GEMM_FIELD_NAMES, decode, default_row, encode, make_row
from ckspace.core.naming import (
    SUFFIXES,
    gemm_name,
    is_benchmark_name,
    is_depthwise_name,
    parse_benchmark_name,
    parse_gemm_name,
    parse_kernel_name,
)
from ckspace.core.tables import table
from ckspace.core.vocab import Dtype, Epilogue, Pipeline, Scheduler, Specialization, StreamKStrategy, Variant
from ckspace.space.benchmark_names import config_from_any_name, config_from_benchmark_name
from ckspace.space.space import Space
from ckspace.workloads.datasets import DATASETS

HEAD = "grouped_conv_bwd_weight_bf16_nhwgc_2d_compv3_cshuffle_intrawave_16x64x64_1x4x1_16x16x16"

SUFFIX_EXAMPLES = {
    "vec": "_vec1_2_3",
    "wg": "_wg2",
    "gm": "_gm4",
    "dsb": "_dsb",
    "2stage": "_2stage",
    "specialization": "_filter1x1_stride1_pad0",
    "explicit_gemm": "_explicit_gemm",
    "streamk": "_streamk_tree_persistent",
    "large_tensor": "_large_tensor",
    "pad": "_pad010",
}
"""One non-default instance of each suffix."""

NOT_NAMED = {"arch", "tagged", "kind"}
"""Config fields a GEMM name does not carry."""


# -- printing and parsing agree on every listed kernel ------------------------------------------------


@pytest.mark.parametrize(
    ("rule_set", "arch"),
    [("full", "gfx950"), ("full", "gfx1250"), ("default", "gfx942"), ("full-tests", "gfx1100"), ("tiny", "gfx90a")],
)
@pytest.mark.slow
def test_every_listed_name_parses_back_to_its_config(rule_set: str, arch: str) -> None:
    kernels = Space(arch, rule_set=rule_set).kernels(raw=True)
    assert kernels
    for kernel in kernels:
        config = kernel.config()
        fields = parse_kernel_name(kernel.name)
        unnamed = NOT_NAMED | ({"variant", "block_size", "dilation"} if kernel.depthwise else set())
        assert set(fields) == set(type(config).model_fields) - unnamed
        assert fields == {f: getattr(config, f) for f in fields}, kernel.name
        assert type(config)(arch=arch, **fields).name == kernel.name


# -- every suffix combination -------------------------------------------------------------------------


@st.composite
def suffix_rows(draw) -> dict[str, object]:
    """Field values for the suffixes, each suffix present or absent; stream-K consistent (a
    strategy exactly when enabled, persistence only with it), as every proposal is."""
    values = {
        "vec_a": draw(st.integers(1, 64)),
        "vec_b": draw(st.integers(1, 64)),
        "vec_c": draw(st.integers(1, 64)),
        "num_wave_groups": draw(st.integers(1, 8)),
        "num_groups_to_merge": draw(st.integers(1, 64)),
        "double_smem_buffer": draw(st.booleans()),
        "two_stage": draw(st.booleans()),
        "specialization": draw(st.sampled_from(list(Specialization))),
        "explicit_gemm": draw(st.booleans()),
        "split_image": draw(st.booleans()),
        "pad_m": draw(st.booleans()),
        "pad_n": draw(st.booleans()),
        "pad_k": draw(st.booleans()),
    }
    strategy = draw(st.sampled_from(list(StreamKStrategy)))
    values["streamk_strategy"] = strategy
    values["streamk_enabled"] = strategy is not StreamKStrategy.NONE
    values["streamk_persistent"] = values["streamk_enabled"] and draw(st.booleans())
    return values


def reference_suffixes(v: dict[str, object]) -> str:
    """The suffix rules as upstream states them, written out independently of the suffix table."""
    out = f"_vec{v['vec_a']}_{v['vec_b']}_{v['vec_c']}" if (v["vec_a"], v["vec_b"], v["vec_c"]) != (4, 8, 8) else ""
    out += f"_wg{v['num_wave_groups']}" if v["num_wave_groups"] != 1 else ""
    out += f"_gm{v['num_groups_to_merge']}" if v["num_groups_to_merge"] != 1 else ""
    out += ("_dsb" if v["double_smem_buffer"] else "") + ("_2stage" if v["two_stage"] else "")
    out += f"_{v['specialization']}" if v["specialization"] != "default" else ""
    out += "_explicit_gemm" if v["explicit_gemm"] else ""
    out += f"_streamk_{v['streamk_strategy']}" if v["streamk_enabled"] else ""
    out += "_persistent" if v["streamk_enabled"] and v["streamk_persistent"] else ""
    out += "_large_tensor" if v["split_image"] else ""
    pads = (v["pad_m"], v["pad_n"], v["pad_k"])
    return out + ("_pad" + "".join(str(int(p)) for p in pads) if pads != (True, True, True) else "")


@settings(max_examples=400, deadline=None)
@given(
    suffix_rows(),
    st.sampled_from(list(Variant)),
    st.sampled_from(list(Dtype)),
    st.integers(1, 3),
    st.sampled_from(list(Pipeline)),
    st.sampled_from(list(Epilogue)),
    st.sampled_from(list(Scheduler)),
)
def test_every_suffix_combination_prints_and_parses_back(
    values, variant, dtype, ndim, pipeline, epilogue, scheduler
) -> None:
    head = {
        "tile_m": 64,
        "tile_n": 32,
        "tile_k": 16,
        "wave_m": 2,
        "wave_n": 1,
        "wave_k": 1,
        "warp_tile_m": 32,
        "warp_tile_n": 32,
        "warp_tile_k": 8,
        "pipeline": pipeline,
        "epilogue": epilogue,
        "scheduler": scheduler,
    }
    row = make_row(default_row(), **{f: encode(f, v) for f, v in {**head, **values}.items()})
    name = gemm_name(variant, dtype, ndim, row)
    assert name == (
        f"grouped_conv_{variant.token}_{dtype}_nhwgc_{ndim}d_{pipeline}_{epilogue}_{scheduler}"
        f"_64x32x16_2x1x1_32x32x8{reference_suffixes(values)}"
    )
    assert parse_gemm_name(name) == {
        "variant": variant,
        "dtype": dtype,
        "ndim": ndim,
        **{f: decode(f, c) for f, c in zip(GEMM_FIELD_NAMES, row, strict=True) if f != "tagged"},
    }


def test_defaults_print_no_suffix_and_the_table_follows_common_json() -> None:
    assert [s.key for s in SUFFIXES] == table("common")["name_suffix_order"]
    fields = parse_gemm_name(HEAD)
    assert GemmConfig(arch="gfx950", **fields).name == HEAD
    assert all(fields[f] == GEMM_DEFAULTS[f] for s in SUFFIXES for f in s.fields)


# -- malformed names -----------------------------------------------------------------------------------


def test_all_suffixes_in_order_parse_and_any_other_order_is_rejected() -> None:
    order = table("common")["name_suffix_order"]
    fields = parse_gemm_name(HEAD + "".join(SUFFIX_EXAMPLES[k] for k in order))
    assert (fields["vec_a"], fields["vec_b"], fields["vec_c"], fields["num_wave_groups"]) == (1, 2, 3, 2)
    assert fields["streamk_strategy"] is StreamKStrategy.TREE and fields["streamk_persistent"]
    assert (fields["pad_m"], fields["pad_n"], fields["pad_k"]) == (False, True, False)
    for first, second in permutations(order, 2):
        if order.index(first) > order.index(second):
            with pytest.raises(KernelNameError, match="not a ckspace/upstream kernel name"):
                parse_gemm_name(HEAD + SUFFIX_EXAMPLES[first] + SUFFIX_EXAMPLES[second])
    for key in order:
        with pytest.raises(KernelNameError):
            parse_gemm_name(HEAD + SUFFIX_EXAMPLES[key] * 2)


@pytest.mark.parametrize(
    "name",
    [
        HEAD + "_persistent",  # persistence without stream-K
        HEAD + "_persistent_streamk_tree",
        HEAD + "_streamk_none",  # an enum suffix never spells its default
        HEAD + "_default",
        HEAD + "_streamk_foo",
        HEAD + "_filter5x5",
        HEAD + "_bpc",
        HEAD + "_pad2",
        HEAD + "_pad0101",
        HEAD + "_pad11",
        HEAD + "_vec1_2",
        HEAD + "_wg",
        HEAD + "_",
        HEAD.replace("compv3", "compv9"),
        HEAD.replace("cshuffle", "shuffle"),
        HEAD.replace("intrawave", "x"),
        HEAD.replace("bwd_weight", "forward"),
        HEAD.replace("_2d_", "_12d_"),
        HEAD.replace("16x64x64", "16x64"),
        HEAD.upper(),
        "x" + HEAD,
        "",
    ],
)
def test_malformed_names_are_rejected(name: str) -> None:
    with pytest.raises(KernelNameError, match="not a ckspace/upstream kernel name"):
        parse_gemm_name(name)


def test_explicit_defaults_and_unknown_cell_values_are_read_as_before() -> None:
    # explicit default values of integer suffixes are accepted (and not printed back)
    for suffix in ("_vec4_8_8", "_wg1", "_gm1", "_pad111"):
        fields = parse_gemm_name(f"  {HEAD}{suffix}\n")
        assert GemmConfig(arch="gfx950", **fields).name == HEAD
    # a well-formed name with an unknown dtype or layout names the valid ones; ndim is checked later
    with pytest.raises(InvalidChoiceError, match="dtype 'int8'"):
        parse_gemm_name(HEAD.replace("bf16", "int8"))
    with pytest.raises(InvalidChoiceError, match="layout 'xyz'"):
        parse_gemm_name(HEAD.replace("nhwgc", "xyz"))
    assert parse_gemm_name(HEAD.replace("_2d_", "_4d_"))["ndim"] == 4


def test_depthwise_names() -> None:
    name = "grouped_conv_fwd_depthwise_bf16_ngchw_2d_16x16_f3_s1x1_p1x1_nb8_sub1x4_vec8_8"
    fields = parse_kernel_name(name)
    assert is_depthwise_name(" " + name) and not is_depthwise_name(HEAD)
    assert (fields["dtype"], fields["ndim"], fields["sub_w"], fields["out_vec"]) == (Dtype.BF16, 2, 4, 8)
    for bad in (name + "_", name.replace("nb8", "nb"), name.replace("_vec8_8", "")):
        with pytest.raises(KernelNameError, match="not a depthwise kernel name"):
            parse_kernel_name(bad)


# -- tile-engine benchmark names ---------------------------------------------------------------------

BENCHMARK_CONFIGS = {
    "16x64x64_compv3": "compv3_cshuffle_intrawave_16x64x64_1x4x1_16x16x16",
    "16x64x128_compv3": "compv3_cshuffle_intrawave_16x64x128_1x4x1_16x16x32",
    "32x64x64_compv3": "compv3_cshuffle_intrawave_32x64x64_2x2x1_16x16x16",
    "32x64x128_compv3": "compv3_cshuffle_intrawave_32x64x128_2x2x1_16x16x32",
    "32x128x64_compv3": "compv3_cshuffle_intrawave_32x128x64_1x4x1_32x32x16",
    "64x64x64_compv3": "compv3_cshuffle_intrawave_64x64x64_4x1x1_16x16x16",
    "64x64x128_compv3": "compv3_cshuffle_intrawave_64x64x128_4x1x1_16x16x32",
    "64x128x64_compv3": "compv3_cshuffle_intrawave_64x128x64_2x2x1_32x32x16",
    "128x64x128_compv3": "compv3_cshuffle_intrawave_128x64x128_8x2x1_16x16x32",
    "128x128x64_compv3": "compv3_cshuffle_intrawave_128x128x64_4x4x1_32x32x16",
    "16x64x64_compv4": "compv4_cshuffle_intrawave_16x64x64_1x4x1_16x16x16_dsb",
    "16x64x128_compv4": "compv4_cshuffle_intrawave_16x64x128_1x4x1_16x16x32_dsb",
    "32x64x64_compv4": "compv4_cshuffle_intrawave_32x64x64_2x2x1_16x16x16_dsb",
    "32x64x128_compv4": "compv4_cshuffle_intrawave_32x64x128_2x2x1_16x16x32_dsb",
    "32x128x64_compv4": "compv4_cshuffle_intrawave_32x128x64_1x4x1_32x32x16_dsb",
    "64x64x64_compv4": "compv4_cshuffle_intrawave_64x64x64_4x1x1_16x16x16_dsb",
    "64x64x128_compv4": "compv4_cshuffle_intrawave_64x64x128_4x1x1_16x16x32_dsb",
    "64x128x64_compv4": "compv4_cshuffle_intrawave_64x128x64_2x2x1_32x32x16_dsb",
    "128x64x128_compv4": "compv4_cshuffle_intrawave_128x64x128_8x2x1_16x16x32_dsb",
    "128x128x64_compv4": "compv4_cshuffle_intrawave_128x128x64_4x4x1_32x32x16_dsb",
    "16x64x64_compv5": "compv5_cshuffle_intrawave_16x64x64_1x4x1_16x16x16",
    "16x64x128_compv5": "compv5_cshuffle_intrawave_16x64x128_1x4x1_16x16x32",
    "32x64x64_compv5": "compv5_cshuffle_intrawave_32x64x64_2x2x1_16x16x16",
    "32x64x128_compv5": "compv5_cshuffle_intrawave_32x64x128_2x2x1_16x16x32",
    "32x128x64_compv5": "compv5_cshuffle_intrawave_32x128x64_1x4x1_32x32x16",
    "64x64x64_compv5": "compv5_cshuffle_intrawave_64x64x64_4x1x1_16x16x16",
    "64x64x128_compv5": "compv5_cshuffle_intrawave_64x64x128_4x1x1_16x16x32",
    "64x128x64_compv5": "compv5_cshuffle_intrawave_64x128x64_2x2x1_32x32x16",
    "128x64x128_compv5": "compv5_cshuffle_intrawave_128x64x128_8x2x1_16x16x32",
    "128x128x64_compv5": "compv5_cshuffle_intrawave_128x128x64_4x4x1_32x32x16",
}
"""The configs (as their ckspace names, which carry every field but arch and tag) that the
benchmark kernels mapped to when the mapping had its own regex and literal field values."""

BENCHMARK_PREFIX, CKSPACE_PREFIX = "grouped_conv_forward_bf16_2d_", "grouped_conv_fwd_bf16_nhwgc_2d_"


def test_benchmark_names_map_to_the_recorded_configs() -> None:
    for short, expected in BENCHMARK_CONFIGS.items():
        config = config_from_benchmark_name(BENCHMARK_PREFIX + short, "gfx950")
        assert (config.name, config.arch, config.tagged) == (CKSPACE_PREFIX + expected, "gfx950", False)
        assert config_from_any_name(f" {BENCHMARK_PREFIX}{short}\n", "gfx950") == config


def test_every_benchmark_csv_kernel_is_a_recorded_one() -> None:
    """The kernels of the shipped measurements and of upstream's predictions on the same problems."""
    with DATASETS["mi355x-forward-bf16"].path.open(newline="") as f:
        kernels = {row["kernel"] for row in csv.DictReader(f)}
    kernels |= {row["kernel_name"] for row in upstream_csv("ml_predictions_300.csv")}
    assert kernels and {k.removeprefix(BENCHMARK_PREFIX) for k in kernels} == set(BENCHMARK_CONFIGS)


def test_benchmark_names_of_default_proposals_give_back_those_proposals() -> None:
    for variant in Variant:
        for row in proposals(variant):
            fields = dict(zip(GEMM_FIELD_NAMES, row, strict=True))
            pipeline = decode("pipeline", fields["pipeline"])
            if pipeline is Pipeline.COMPV4 or fields["two_stage"]:  # doubled tile_k; a second two_stage
                continue
            name = f"grouped_conv_{variant.value}_fp16_3d_{row[0]}x{row[1]}x{row[2]}_{pipeline.value}"
            assert config_from_benchmark_name(name, "gfx942").row() == row


def test_benchmark_name_grammar() -> None:
    assert parse_benchmark_name("grouped_conv_bwd_weight_fp32_1d_32x128x64_mem") == {
        "variant": Variant.BWD_WEIGHT,
        "dtype": Dtype.FP32,
        "ndim": 1,
        "tile_m": 32,
        "tile_n": 128,
        "tile_k": 64,
        "pipeline": Pipeline.MEM,
    }
    for name in (
        "grouped_conv_fwd_bf16_2d_16x64x64_compv3",
        "grouped_conv_forward_int8_2d_16x64x64_compv3",
        "grouped_conv_forward_bf16_4d_16x64x64_compv3",
        "grouped_conv_forward_bf16_2d_16x64x64_",
        HEAD,
    ):
        assert not is_benchmark_name(name)
        with pytest.raises(KernelNameError, match="not a tile-engine benchmark kernel name"):
            config_from_benchmark_name(name, "gfx950")
    with pytest.raises(InvalidChoiceError, match="pipeline 'compv9'"):
        config_from_benchmark_name("grouped_conv_forward_bf16_2d_16x64x64_compv9", "gfx950")
    with pytest.raises(KernelNameError, match="tile 48x64x64 is not in the default rule set's tile table"):
        config_from_benchmark_name("grouped_conv_forward_bf16_2d_48x64x64_compv3", "gfx950")


# -- explain parses a name once --------------------------------------------------------------------------


def test_explain_command_parses_the_name_once(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []
    parse = naming.parse_gemm_name
    monkeypatch.setattr(naming, "parse_gemm_name", lambda name: calls.append(name) or parse(name))
    out = io.StringIO()
    with redirect_stdout(out):
        assert main(["explain", HEAD, "--arch", "gfx950", "--rule-set", "default", "--format", "json"]) == 0
    assert calls == [HEAD] and f'"name": "{HEAD}"' in out.getvalue()
