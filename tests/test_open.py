"""Rule set ``open``: exact counts against enumeration, lazy listing, uniform and stratified sampling,
the queries, the CLI and the probe.

Counting is checked against brute-force enumeration (every assignment of narrowed domains,
classified by the same rules with numpy) on random narrowed sub-spaces; sampled configs are
checked against the independent statement of the rules in tests/reference_rules.py.
"""

from __future__ import annotations

import json
import math
import sys
from collections import Counter
from itertools import islice, product
from pathlib import Path

import numpy as np
import pytest
import reference_rules as ref
from conftest import FAKE_OBJECT, ORACLE_REVISION
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from strategies import consistent_streamk
from test_build import use_fake_toolchain
from test_emit import AITER

from ckspace import Space
from ckspace.cli import main
from ckspace.constraints.evaluators.classify import columns, rule_masks
from ckspace.constraints.evaluators.count import MAX_TABLE, CountError, Tally, domain_of
from ckspace.constraints.rulesets import get_rule_set
from ckspace.core.cells import Cell
from ckspace.core.config import GemmConfig
from ckspace.core.fields import FIELD_KIND, GEMM_FIELD_NAMES, decode, plain
from ckspace.core.vocab import Dtype, Variant, arch_names
from ckspace.space import counted as open_space

FAST = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
LONG = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
MAX_PRODUCT = 60_000
"""Largest narrowed domain product the brute-force enumeration walks."""


def domains(arch: str, variant: Variant, dtype: Dtype) -> dict[str, list[int]]:
    """open's domain of every field in the cell (codes), from its domain rules."""
    rules = get_rule_set("open").domain_rules(arch, Cell(variant, 2, dtype))
    return dict(domain_of(rule) for rule in rules)  # type: ignore[misc]


def literal(field: str, code: int) -> str:
    """A value of ``field`` as a filter writes it."""
    value = plain(decode(field, code))
    return str(value).lower() if FIELD_KIND[field] is bool else str(value)


def brute_force(space: Space) -> np.ndarray:
    """Every valid config of the one cell of ``space`` by enumeration: the product of the domains
    (narrowed by the filters' one-field conjuncts), classified by every rule with numpy."""
    ((request, cell),) = open_space.places(space)
    rules = open_space.cell_rules(space, request, cell)
    narrowed = domains(request.arch, cell.variant, cell.dtype)
    for rule in rules:
        found = domain_of(rule)
        if found is not None:
            narrowed[found[0]] = sorted(set(narrowed[found[0]]) & set(found[1]))
    size = math.prod(len(v) for v in narrowed.values())
    assert size <= MAX_PRODUCT, size
    rows = np.array(list(product(*(narrowed[f] for f in GEMM_FIELD_NAMES))), dtype=np.int64)
    rows = rows.reshape(-1, len(GEMM_FIELD_NAMES))
    keep = np.ones(len(rows), dtype=bool)
    for mask in rule_masks(rules, columns(rows, GEMM_FIELD_NAMES), len(rows)).values():
        keep &= mask
    return rows[keep]


@st.composite
def narrowed_spaces(draw, arch: str = "gfx942") -> Space:
    """A one-cell open space narrowed by random ``field in [..]`` filters (small enough to enumerate)
    around a valid config drawn from the cell, so that most narrowings hold configs, and, sometimes,
    a random arithmetic filter tying several fields."""
    variant = draw(st.sampled_from(list(Variant)))
    dtype = draw(st.sampled_from(list(Dtype)))
    full = domains(arch, variant, dtype)
    cell = Space(arch, variant.value, 2, dtype.value, rule_set="open")
    drawn = cell.sample(1, seed=draw(st.integers(0, 10**9)))  # empty for a cell without configs
    seed = (
        dict(zip(GEMM_FIELD_NAMES, drawn[0].row(), strict=True))
        if drawn
        else {f: draw(st.sampled_from(full[f])) for f in GEMM_FIELD_NAMES}
    )
    wide = draw(st.lists(st.sampled_from(GEMM_FIELD_NAMES), min_size=4, max_size=12, unique=True))
    chosen: dict[str, list[int]] = {}
    budget = MAX_PRODUCT
    for field in GEMM_FIELD_NAMES:
        others = [v for v in full[field] if v != seed[field]]
        most = min(len(others), 5 if field in wide else 0, budget - 1)
        extra = draw(st.lists(st.sampled_from(others), max_size=most, unique=True)) if most > 0 else []
        picked = [seed[field], *extra]
        budget //= len(picked)
        chosen[field] = sorted(picked)
    filters = [f"{f} in [{', '.join(literal(f, v) for v in vs)}]" for f, vs in chosen.items()]
    if draw(st.booleans()):
        a, b = draw(
            st.sampled_from(
                [
                    ("tile_m", "tile_n"),
                    ("tile_k", "vec_a"),
                    ("tile_n", "warp_tile_n"),
                    ("vec_b", "vec_c"),
                    ("wave_m", "tile_k"),
                ]
            )
        )
        bound = draw(st.integers(1, 4096))
        filters.append(f"{a} * {b} {draw(st.sampled_from(['<=', '>=', '!=']))} {bound} or pipeline == mem")
    return Space(arch, variant.value, 2, dtype.value, rule_set="open").where(*filters)


def check_count_against_enumeration(space: Space) -> None:
    valid = brute_force(space)
    assert space.count() == len(valid)
    listed = [k.row for k in space.iter_kernels()]
    assert len(set(listed)) == len(listed) and set(listed) == set(map(tuple, valid.tolist()))


@FAST
@given(narrowed_spaces())
@pytest.mark.slow
def test_count_equals_enumeration_on_random_narrowings(space: Space) -> None:
    check_count_against_enumeration(space)


@pytest.mark.slow
@LONG
@given(st.sampled_from(arch_names()).flatmap(narrowed_spaces))
def test_count_equals_enumeration_long_run(space: Space) -> None:
    check_count_against_enumeration(space)


@pytest.mark.slow
def test_count_of_a_whole_cell_and_arch_without_listing() -> None:
    cell = Space("gfx942", "forward", 2, "bf16", rule_set="open", ck=None)
    assert cell.count() > 10**9  # counted, never listed: listing would take hours
    arch = Space("gfx942", rule_set="open", ck=None)
    counts = [
        Space("gfx942", v.value, n, d.value, rule_set="open", ck=None).count()
        for v in Variant
        for n in (1, 2, 3)
        for d in Dtype
    ]
    assert arch.count() == sum(counts) and counts[Variant.FORWARD.code * 9 + 1 * 3 + Dtype.BF16.code] == cell.count()


def test_listing_is_lazy_ordered_and_agrees_with_unranking() -> None:
    space = Space("gfx942", "bwd_weight", 2, "bf16", rule_set="open")
    first = [k.row for k in islice(space.iter_kernels(), 5000)]
    assert first == [k.row for k in islice(space.iter_kernels(), 5000)]  # a fixed order
    ((request, cell),) = open_space.places(space)
    tally = open_space.tally(space, request, cell)
    start = tally.count - 3000
    tail = tally.range_rows(start, tally.count)
    assert np.array_equal(tail, tally.rows(np.arange(start, tally.count)))
    assert np.array_equal(
        np.concatenate(list(tally.iter_rows(start - 100, chunk=777))), tally.rows(np.arange(start - 100, tally.count))
    )
    assert [tuple(r) for r in tally.range_rows(0, 5000).tolist()] == first


def small_space() -> Space:
    """About thirty configs of one bwd_weight cell (of the upstream rule space)."""
    return Space("gfx942", "bwd_weight", 2, "bf16", rule_set="open", ck=None).where(
        "tile_m == 32 and tile_n in [32, 64] and tile_k == 32 and pipeline == mem and scheduler == intrawave",
        "vec_a == 8 and vec_b in [4, 8] and vec_c == 8 and epilogue == cshuffle and pad_m and pad_n and pad_k",
        "not double_smem_buffer and num_groups_to_merge == 1 and not split_image and not explicit_gemm",
        "not two_stage and specialization == default and not streamk_enabled and num_wave_groups == 1",
        "wave_m == 1 and wave_n == 1",
    )


def test_sampling_is_uniform_chi_square() -> None:
    space = small_space()
    size = space.count()
    assert 10 <= size <= 60
    everything = space.sample(size + 5, seed=3)
    assert len({c.name for c in everything}) == size  # a sample never repeats and covers all
    draws = Counter(space.sample(1, seed=seed)[0].name for seed in range(40 * size))
    assert len(draws) == size
    expected = 40
    chi2 = sum((n - expected) ** 2 / expected for n in draws.values())
    df = size - 1  # Wilson-Hilferty: the 99.9 % quantile of chi-square(df)
    critical = df * (1 - 2 / (9 * df) + 3.09 * math.sqrt(2 / (9 * df))) ** 3
    assert chi2 < critical, (chi2, critical)


@pytest.mark.slow
def test_stratified_sampling_takes_turns_over_strata() -> None:
    space = Space("gfx942", "forward", 2, "bf16", rule_set="open", ck=None)
    picked = space.sample(12, seed=5, stratify_by=["pipeline"])
    assert len({c.pipeline for c in picked}) == 12  # every pipeline before any repeats
    again = space.sample(12, seed=5, stratify_by=["pipeline"])
    assert [c.name for c in picked] == [c.name for c in again]
    tiles = space.sample(30, seed=1, stratify_by=["pipeline", "tile_m", "tile_n", "tile_k"])
    assert len({(c.pipeline, c.tile_m, c.tile_n, c.tile_k) for c in tiles}) == 30
    assert all(space.contains(c) for c in picked[:3])


@FAST
@given(
    arch=st.sampled_from(["gfx90a", "gfx942", "gfx950", "gfx1100", "gfx1201"]),
    variant=st.sampled_from(list(Variant)),
    dtype=st.sampled_from(list(Dtype)),
    seed=st.integers(0, 10**6),
)
@pytest.mark.slow
def test_sampled_configs_satisfy_the_reference_rules(arch: str, variant: Variant, dtype: Dtype, seed: int) -> None:
    # the reference states the rules of the reproduced revision (the newer one widens the LDS budget)
    space = Space(arch, variant.value, 2, dtype.value, rule_set="open", rules_revision=ORACLE_REVISION, ck=None)
    full = domains(arch, variant, dtype)
    for config in space.sample(15, seed=seed):
        cfg = config.model_dump(mode="json")
        assert ref.is_emitted_valid(cfg, arch), (config.name, ref.violations_is_config_valid(cfg, arch))
        assert consistent_streamk(cfg)
        assert all(code in full[f] for f, code in zip(GEMM_FIELD_NAMES, config.row(), strict=True))


@pytest.mark.slow
def test_queries_work_unchanged() -> None:
    space = Space("gfx942", "forward", 2, "bf16", rule_set="open")
    config = next(iter(space))
    assert space.contains(config) and space.contains(config.name)
    outside = config.model_copy(update={"tile_m": 24})
    assert not space.contains(outside)
    blame = space.explain(outside).cells[0].blame
    assert {b.constraint for b in blame} >= {"open_tile_m"}
    assert any(b.kind.value == "rule_set" for b in blame)
    partial = space.explain({"pipeline": "compv4", "tile_k": 32, "tile_m": 64})
    assert (
        partial.valid
        and partial.cells[0].completions == space.where("pipeline == compv4 and tile_k == 32 and tile_m == 64").count()
    )
    best = space.best("tile_m * tile_n")
    assert best.status == "OPTIMAL" and best.value == 512 * 512
    problem = space.for_problem("N=1,G=1,C=64,K=128,Hi=56,Wi=56,Y=3,X=3,stride=1,pad=1")
    assert 0 < problem.count() < space.count()


@pytest.mark.slow
def test_open_rejects_what_it_cannot_answer() -> None:
    with pytest.raises(Exception, match="cannot share a Space"):
        Space("gfx942", rule_set=["open", "full"])
    space = Space("gfx942", "forward", 2, "bf16", rule_set="open")
    with pytest.raises(Exception, match="no raw proposals"):
        space.raw()
    with pytest.raises(Exception, match="too many to hold as a list"):
        space.names()
    with pytest.raises(CountError):
        space.where("tile_m + tile_n + tile_k + vec_a + vec_b + vec_c + warp_tile_m > 100").count()


def test_tally_needs_a_domain_for_every_field() -> None:
    with pytest.raises(ValueError, match="no domain rule"):
        Tally(("tile_m",), [])
    assert MAX_TABLE >= 1 << 20


def test_cli_count_list_and_bad_input(capsys: pytest.CaptureFixture[str]) -> None:
    narrow = [
        "--where",
        "tile_m == 32 and tile_n == 32 and tile_k == 32 and pipeline == mem and vec_c == 8",
        "--where",
        "pad_m and pad_n and pad_k and specialization == default and num_groups_to_merge == 1",
    ]
    base = [
        "enumerate",
        "--arch",
        "gfx942",
        "--variant",
        "bwd_data",
        "--ndim",
        "2",
        "--dtype",
        "bf16",
        "--rule-set",
        "open",
        *narrow,
    ]
    assert main([*base, "--count"]) == 0
    captured = capsys.readouterr()
    count = int(captured.out)
    assert count > 0
    assert captured.err.startswith("target: ")  # the target on stderr, stdout is the number
    assert main([*base, "--list"]) == 0
    names = capsys.readouterr().out.splitlines()
    assert len(names) == len(set(names)) == count
    assert main([*base, "--list", "--format", "jsonl"]) == 0
    records = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["name"] for r in records] == names and all(r["tile_m"] == 32 for r in records)
    assert main([*base, "--list", "--format", "json"]) == 0
    assert len(json.loads(capsys.readouterr().out)) == count
    assert main([*base, "--raw", "--count"]) == 2
    err = capsys.readouterr().err.strip().splitlines()  # the target line, then the one-line error
    assert len(err) == 2 and err[0].startswith("target: ") and "no raw proposals" in err[1]
    wide = [a for a in base if a not in narrow]
    assert (
        main(
            [
                *wide,
                "--where",
                "tile_m + tile_n + tile_k + vec_a + vec_b + vec_c + warp_tile_m + warp_tile_n > 9",
                "--count",
            ]
        )
        == 2
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and err[0].startswith("target: ")


def test_rules_command_states_the_domains(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["rules", "--arch", "gfx942", "--format", "json"]) == 0
    rules = json.loads(capsys.readouterr().out)["rules"]
    domain = {r["name"] for r in rules if r["section"] == "domain"}
    assert domain == {f"open_{f}" for f in GEMM_FIELD_NAMES}


PROBED = {
    # grouped_convolution_backward_data_kernel.hpp:549 (every kernel: kPadM && kPadN && kPadK)
    "grouped_conv_bwd_data_bf16_nhwgc_2d_mem_cshuffle_interwave_16x32x256_1x1x1_16x16x16_vec8_8_1_pad110": "ck_padding",
    # cshuffle_epilogue.hpp:642 -> static_encoding_pattern.hpp:157 (X0 = 128 threads > the wave)
    "grouped_conv_bwd_weight_bf16_nhwgc_2d_compv3_cshuffle_intrawave_32x512x32_1x4x1_32x32x16_vec16_8_1_gm32": (
        "ck_epilogue_pattern"
    ),
    # transpose_tile.hpp:160 (in_offset % vec_length_in); the same config with one wave group compiles
    "grouped_conv_bwd_data_bf16_nhwgc_2d_compv3_cshuffle_intrawave_112x64x32_1x2x1_16x16x32_vec1_8_1_wg2": (
        "ck_wave_groups_transpose"
    ),
}
"""Configs of open that the CK headers' rules accepted and the compiler rejected in the recorded
probe (docs/open.md), with the rule each finding led to."""


@pytest.mark.parametrize("name", sorted(PROBED))
def test_probe_findings_are_rules(name: str) -> None:
    revision = AITER  # the revision the probe compiled with, as its headers read
    config = GemmConfig.from_name(name, "gfx942")
    space = Space("gfx942", config.variant.value, 2, "bf16", rule_set="open", ck=None)
    assert space.contains(config)
    blamed = {b.constraint for b in space.for_ck(revision).explain(config).cells[0].blame}
    assert PROBED[name] in blamed


def test_the_compiling_twin_of_the_wave_group_finding_passes() -> None:
    twin = GemmConfig.from_name(
        "grouped_conv_bwd_data_bf16_nhwgc_2d_compv3_cshuffle_intrawave_112x64x32_1x2x1_16x16x32_vec1_8_1", "gfx942"
    )
    assert Space("gfx942", "bwd_data", 2, "bf16", rule_set="open").for_ck(AITER).contains(twin)


PROBE_COMPILER = f"""#!{sys.executable}
# Stand-in for clang: rejects every kernel with the interwave scheduler, with a located error.
import sys, pathlib
args = sys.argv[1:]
if "--version" in args:
    print("fake clang version 1.0"); sys.exit(0)
out = pathlib.Path(args[args.index("-o") + 1])
if "-shared" in args or "-nogpulib" in args:
    out.write_text("lib") if "-shared" in args else None; sys.exit(0)
source = pathlib.Path(args[args.index("-c") + 1])
if "interwave" in source.read_text():
    print("/x/include/ck_tile/ops/p.hpp:12:7: error: static assertion failed due to requirement '3 == 4'",
          file=sys.stderr); sys.exit(1)
out.write_bytes({FAKE_OBJECT!r})
"""


def test_probe_groups_compiler_rejections(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    compiler = tmp_path / "fakeclang"
    use_fake_toolchain(tmp_path, monkeypatch, compiler)
    compiler.write_text(PROBE_COMPILER)
    out = tmp_path / "probe"
    assert (
        main(
            [
                "probe",
                "--arch",
                "gfx942",
                "--variant",
                "forward",
                "bwd_weight",
                "--ndim",
                "2",
                "--dtype",
                "bf16",
                "--sample",
                "6",
                "--seed",
                "2",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    report = json.loads((out / "probe.json").read_text())
    assert report["sampled"] == 6 and report["compiled_ok"] + report["rejected"] == 6
    interwave = [
        n for n in (k["name"] for k in json.loads((out / "manifest.json").read_text())["kernels"]) if "interwave" in n
    ]
    if interwave:
        (group,) = report["groups"]
        assert group["where"] == "ck_tile/ops/p.hpp:12" and group["error"].endswith("'N == N'")
        assert sorted(group["kernels"]) == sorted(interwave)
    assert "sampled" in capsys.readouterr().out
