"""Problem-aware feasibility: ConvProblem parsing, and for_problem against an independent
statement of CK's IsSupportedArgument checks (tests/reference_problem.py)."""

from __future__ import annotations

import math
from dataclasses import FrozenInstanceError
from functools import cache

import numpy as np
import pytest
import reference_problem as ref
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from strategies import GEMM_COUNT_EDGE, boundary_problems, depthwise_configs, gemm_configs

from ckspace import CkspaceError, Space
from ckspace.constraints.evaluators.classify import columns
from ckspace.constraints.evaluators.model import CellModel
from ckspace.constraints.language.expr import evaluate
from ckspace.constraints.language.render import why
from ckspace.constraints.rulebook.problem_rules import (
    depthwise_problem_rules,
    describe,
    gemm_problem_rules,
    gemm_problem_templates,
    problem_values,
)
from ckspace.core.config import GemmConfig
from ckspace.core.fields import DEPTHWISE_FIELDS, GEMM_BOUNDS, GEMM_FIELD_NAMES
from ckspace.core.vocab import Dtype, Variant
from ckspace.workloads.problem import ConvProblem


@st.composite
def problems(draw) -> ConvProblem:
    ndim = draw(st.sampled_from([1, 2, 3]))
    g = draw(st.sampled_from([1, 2, 4, 8, 32]))
    values = {
        "ndim": ndim,
        "N": draw(st.integers(1, 8)),
        "G": g,
        "C": g * draw(st.sampled_from([1, 2, 3, 4, 6, 8, 16, 30, 64])),
        "K": g * draw(st.sampled_from([1, 2, 4, 5, 8, 12, 16, 64, 128])),
        "k_batch": draw(st.sampled_from([1, 1, 2, 4])),
    }
    dims = ["d", "h", "w"][3 - ndim :]
    names = {"d": ("Di", "Z"), "h": ("Hi", "Y"), "w": ("Wi", "X")}
    for d in dims:
        values[names[d][0]] = draw(st.integers(1, 40))
        values[names[d][1]] = draw(st.sampled_from([1, 1, 3, 3, 5]))
        values[f"stride_{d}"] = draw(st.sampled_from([1, 1, 2, 3]))
        values[f"pad_{d}"] = draw(st.sampled_from([0, 0, 1, 2]))
        values[f"dil_{d}"] = draw(st.sampled_from([1, 1, 2]))
    try:
        return ConvProblem.from_values(values)
    except CkspaceError:
        assume(False)
        raise


@cache
def space(variant: str, rule_set: str) -> Space:
    """The upstream rule space (``ck=None``): every kernel the rules emit, depthwise included, is
    checked against the reference."""
    return Space("gfx950", variant, rule_set=rule_set, ck=None)


@cache
def listed(variant: str, rule_set: str) -> tuple[tuple[str, dict], ...]:
    """(name, config as the reference reads it) of every kernel of a space, dumped once."""
    return tuple((c.name, c.model_dump(mode="json")) for c in space(variant, rule_set))


PAIRS = [
    (v, rs)
    for v in ("forward", "bwd_data", "bwd_weight")
    for rs in ("full", "default")
    if (v, rs) != ("bwd_data", "full")
]  # full's bwd_data is empty (quirk 14.1, docs/rules.md)


@pytest.mark.parametrize("variant,rule_set", PAIRS)
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(problem=st.one_of(problems(), boundary_problems()))
@pytest.mark.slow
def test_for_problem_keeps_exactly_the_supported_kernels(variant, rule_set, problem) -> None:
    """Each (variant, rule set) draws its own problems, half of them at the rules' edges."""
    kernels = listed(variant, rule_set)
    assert kernels
    kept = set(space(variant, rule_set).for_problem(problem).names())
    p = problem.model_dump()
    for name, data in kernels:
        assert (name in kept) == ref.supports(data, p), (name, problem.text())


def _agreeing_verdicts(config: GemmConfig, problem: ConvProblem) -> dict[str, bool]:
    """Whether ``config`` passes each problem rule, asserting that the backends agree: numpy on the
    bound rules (listing, ``for_problem``), the unbound rules' partial evaluation (the selector) and
    CP-SAT on the bound rules (``explain``, ``contains``)."""
    row = config.row()
    cols = columns([row], GEMM_FIELD_NAMES)
    values = problem_values(problem)
    templates = gemm_problem_templates(config.variant, config.ndim, config.dtype)
    bound = gemm_problem_rules(problem, config.variant, config.ndim, config.dtype)
    model = CellModel(GEMM_FIELD_NAMES, GEMM_BOUNDS, bound, None)
    fixed = dict(zip(GEMM_FIELD_NAMES, row, strict=True))
    verdicts = {}
    for template, rule in zip(templates, bound, strict=True):
        by_numpy = bool(np.all(evaluate(rule.expr, cols)))
        by_partial = bool(np.all(template.check(values, cols)))
        by_cpsat = model.feasible(fixed, enabled=[rule.name])
        assert by_numpy == by_partial == by_cpsat, (rule.name, config.name, problem.text())
        verdicts[rule.name] = by_numpy
    return verdicts


@pytest.mark.parametrize("variant", list(Variant))
@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
@pytest.mark.slow
def test_each_problem_rule_matches_the_reference_on_raw_configs(variant: Variant, data) -> None:
    """Every variant gets its own examples: a config from the raw domains (vector widths 1 to 16,
    3 and 6 too, every specialisation, split-K and merged-group settings) and a problem at the
    edges of the checks, mostly of the config's rank. Each rule is compared on its own with the
    reference's verdict for that check, so a mutant of one check shows even when another fails."""
    config = data.draw(gemm_configs(arch="gfx950", variant=variant))
    ndim = data.draw(st.sampled_from([config.ndim] * 4 + [1, 2, 3]))
    problem = data.draw(boundary_problems(ndim))
    cfg, p = config.model_dump(mode="json"), problem.model_dump()
    verdicts = _agreeing_verdicts(config, problem)
    assert all(verdicts.values()) == ref.supports(cfg, p), (config.name, problem.text())
    if ndim == config.ndim:
        failed = {name for name, ok in verdicts.items() if not ok}
        assert failed == ref.gemm_failures(cfg, p), (config.name, problem.text())


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    depthwise_configs(arch="gfx950"),
    st.one_of(boundary_problems(2), boundary_problems()),
    st.sampled_from([(1, 1), (1, 2), (2, 1), None]),
)
def test_depthwise_problem_rules_match_the_reference(config, problem, channels) -> None:
    """Half the problems are moved onto the config's own shape (filter, strides, pads, dilation),
    with one or both per-group channel counts at 1, so each of the checks decides."""
    if channels is not None and problem.ndim == 2:
        cg, kg = channels
        values = problem.model_dump() | {
            "C": problem.G * cg,
            "K": problem.G * kg,
            "Y": config.filter,
            "X": config.filter,
            "stride_h": config.stride_h,
            "stride_w": config.stride_w,
            "pad_h": config.pad_h,
            "pad_w": config.pad_w,
            "dil_h": config.dilation,
            "dil_w": config.dilation,
            "Hi": config.dilation * (config.filter - 1) + 1 + problem.Hi % 3,
            "Wi": config.dilation * (config.filter - 1) + 1 + problem.Wi % 3,
        }
        problem = ConvProblem.from_values(values)
    rules = depthwise_problem_rules(problem)
    cols = columns([config.row()], DEPTHWISE_FIELDS)
    runs = all(bool(np.all(evaluate(rule.expr, cols))) for rule in rules)
    assert runs == ref.supports(
        config.model_dump(mode="json") | {"kind": "depthwise", "ndim": 2}, problem.model_dump()
    ), problem.text()


@pytest.mark.parametrize("factors", GEMM_COUNT_EDGE)
@pytest.mark.parametrize("dilation", [1, 2])
def test_bwd_data_gemm_count_at_its_limit(factors, dilation) -> None:
    """Every edge product (127, 128, 129, past them) decides the GEMM-count check as the reference
    does; with dilation 2 an even stride splits into half as many phases."""
    values = {"ndim": 3, "N": 1, "G": 1, "C": 8, "K": 8}
    for d, f, big in zip("dhw", factors, ("Di", "Hi", "Wi"), strict=True):
        values |= {f"stride_{d}": f, f"dil_{d}": dilation, {"d": "Z", "h": "Y", "w": "X"}[d]: f, big: dilation * f}
    problem = ConvProblem.from_values(values)
    config = next(c for c in space("bwd_data", "default") if c.ndim == 3)
    failed = {name for name, ok in _agreeing_verdicts(config, problem).items() if not ok}
    assert failed == ref.gemm_failures(config.model_dump(mode="json"), problem.model_dump())


@pytest.mark.parametrize("merged,groups,blamed", [(1, 7, ""), (2, 6, ""), (4, 6, "since num_groups_to_merge > 1: ")])
def test_groups_to_merge_check_and_its_words(merged, groups, blamed) -> None:
    """Merging one group divides every G (the check cannot fail), more must divide G; explain
    words a failure with the condition that made the check apply."""
    config = next(c for c in space("bwd_weight", "full") if c.ndim == 2).model_copy(
        update={"num_groups_to_merge": merged}
    )
    problem = ConvProblem.from_values(
        {"ndim": 2, "N": 1, "G": groups, "C": groups * 8, "K": groups * 8, "Hi": 4, "Wi": 4, "Y": 1, "X": 1}
    )
    (rule,) = [
        r for r in gemm_problem_rules(problem, config.variant, 2, config.dtype) if r.name == "groups_to_merge_divides_g"
    ]
    words = why(rule.expr, dict(zip(GEMM_FIELD_NAMES, config.row(), strict=True)))
    assert (words == "holds") == (not blamed), words
    assert words.startswith(blamed)


@settings(max_examples=60, deadline=None)
@given(boundary_problems())
def test_rule_words_quote_the_problem(problem: ConvProblem) -> None:
    """The numbers the rules' words quote (explain, select's refusals): channels per group, the
    filter, strides and pads per dimension, and the backward-data GEMM count."""
    p = problem.model_dump()
    dims = ["d", "h", "w"][3 - problem.ndim :]
    taps = {"d": p["Z"], "h": p["Y"], "w": p["X"]}
    count = math.prod(min(p[f"stride_{d}"] // math.gcd(p[f"stride_{d}"], p[f"dil_{d}"]), taps[d]) for d in dims)
    words = describe(problem, problem_values(problem))
    assert (words["Cg"], words["Kg"]) == (p["C"] // p["G"], p["K"] // p["G"])
    assert words["filter"] == [taps[d] for d in dims]
    assert words["stride"] == [p[f"stride_{d}"] for d in dims] and words["pad"] == [p[f"pad_{d}"] for d in dims]
    assert words["gemm_count"] == count and words["k_batch"] == p["k_batch"] and words["G"] == p["G"]


SPEC_EDGES = [  # (Cg, filter per dimension, stride, pad): each just meets or just misses a precondition
    (1, 3, 1, 0),
    (1, 3, 2, 1),
    (2, 3, 1, 0),
    (0, 3, 1, 0),
    (1, 2, 1, 0),
    (1, 4, 1, 0),
    (1, 1, 1, 0),
    (1, 1, 2, 0),
    (1, 1, 1, 1),
    (2, 1, 1, 0),
    (1, 2, 1, 0),
]


@pytest.mark.parametrize("variant", list(Variant))
@pytest.mark.parametrize("ndim", [1, 2, 3])
@pytest.mark.parametrize("specialization", ["filter3x3", "filter1x1_pad0", "filter1x1_stride1_pad0"])
def test_specialisations_at_their_edges(variant, ndim, specialization) -> None:
    """One channel per group and 3-wide filters (filter3x3), 1-wide filters without padding, unit
    strides: each edge in all dimensions, and in one dimension only (the others at the usual 3x3)."""
    config = GemmConfig(
        arch="gfx950",
        variant=variant,
        ndim=ndim,
        dtype="bf16",
        tile_m=64,
        tile_n=64,
        tile_k=32,
        wave_m=2,
        wave_n=2,
        wave_k=1,
        warp_tile_m=16,
        warp_tile_n=16,
        warp_tile_k=16,
        vec_a=1,
        vec_b=1,
        vec_c=1,
        pipeline="compv3",
        scheduler="intrawave",
        epilogue="cshuffle",
        specialization=specialization,
    )
    dims = ["d", "h", "w"][3 - ndim :]
    for cg, taps, stride, pad in SPEC_EDGES:
        for changed in [dims, dims[-1:]]:
            values = {"ndim": ndim, "N": 1, "G": 2, "C": 2 * cg, "K": 2 * max(cg, 1)}
            for d, (big, tap) in zip("dhw", (("Di", "Z"), ("Hi", "Y"), ("Wi", "X")), strict=True):
                if d in dims:
                    inside = d in changed
                    values |= {
                        tap: taps if inside else 3,
                        f"stride_{d}": stride if inside else 1,
                        f"pad_{d}": pad if inside else 1,
                        big: 8,
                    }
            if values["C"] == 0:
                continue  # no convolution has no channels
            problem = ConvProblem.from_values(values)
            cols = columns([config.row()], GEMM_FIELD_NAMES)
            failed = {
                rule.name
                for rule in gemm_problem_rules(problem, variant, ndim, config.dtype)
                if not np.all(evaluate(rule.expr, cols))
            }  # the backends agree: see above
            assert failed == ref.gemm_failures(config.model_dump(mode="json"), problem.model_dump()), problem.text()


def test_problem_rules_are_immutable() -> None:
    """The checks are built once per cell and shared by every caller (explain, select, the
    dispatcher generator): none may change them."""
    rule = gemm_problem_templates(Variant.FORWARD, 2, Dtype.BF16)[0]
    with pytest.raises(FrozenInstanceError):
        rule.name = "renamed"  # type: ignore[misc]
    assert hash(rule) == hash(gemm_problem_templates(Variant.FORWARD, 2, Dtype.BF16)[0])


def test_swapped_operand_mutant_bwd_data_vec_b_reads_the_weights_cg_not_kg() -> None:
    """Kills the swapped-operand mutant: backward data's GEMM B is the weight, read along
    its input channels per group (Cg); checking ``vec_b`` against the output channels per group (Kg)
    instead (``OPERANDS[BWD_DATA].b`` with channels ``"Kg"``, or the rule reading ``CHANNELS["Kg"]``)
    passed the whole suite before. Cg and Kg are chosen to differ in divisibility by vec_b both ways."""
    listed_kernel = next(c for c in space("bwd_data", "default") if c.ndim == 2)
    assert (listed_kernel.vec_a, listed_kernel.vec_b, listed_kernel.vec_c) == (4, 8, 8)
    cg8_kg4 = ConvProblem.parse("N=1,G=2,C=16,K=8,Hi=8,Wi=8,Y=3,X=3,pad=1")
    assert listed_kernel.name in set(space("bwd_data", "default").for_problem(cg8_kg4).names())
    config = listed_kernel.model_copy(update={"vec_a": 1, "vec_b": 8, "vec_c": 1})
    cg8_kg3 = ConvProblem.parse("N=1,G=2,C=16,K=6,Hi=8,Wi=8,Y=3,X=3,pad=1")
    assert all(_agreeing_verdicts(config, cg8_kg3).values())
    cg3_kg8 = ConvProblem.parse("N=1,G=2,C=6,K=16,Hi=8,Wi=8,Y=3,X=3,pad=1")
    assert [name for name, ok in _agreeing_verdicts(config, cg3_kg8).items() if not ok] == ["vec_b_divides_cg"]
    names = {t.name for t in gemm_problem_templates(Variant.BWD_DATA, 2, config.dtype)}
    assert "vec_b_divides_cg" in names and "vec_b_divides_kg" not in names


def test_problem_text_round_trip_and_shorthands() -> None:
    p = ConvProblem.parse("N=1,G=1,C=64,K=128,Hi=56,Wi=56,Y=3,X=3,stride=1,pad=1")
    assert (p.ndim, p.pad_h, p.pad_w, p.stride_h) == (2, 1, 1, 1)
    assert ConvProblem.parse(p.text()) == p
    q = ConvProblem.parse("n=2 g=4 c=64 k=32 di=8 hi=8 wi=8 z=3 y=3 x=3 stride=1 stride_d=2 pad=1 dil=1 dil_w=2")
    assert (q.ndim, q.Cg, q.Kg, q.stride_d, q.stride_h, q.dil_w, q.pad_d) == (3, 16, 8, 2, 1, 2, 1)
    assert q.gemm_mnk("bwd_weight") == (8, 27 * 16, 2 * q.output_volume)


@pytest.mark.parametrize(
    "text,bad",
    [
        ("N=1,C=64,K=64,Hi=8,Wi=8,Y=3,X=3,colour=3", "colour"),
        ("N=1,C=64,K=64,Hi=8,Wi=8,Y=3,X=3,N=2", "twice"),
        ("N=1,G=3,C=64,K=64,Hi=8,Wi=8,Y=3,X=3", "multiples of G"),
        ("N=1,C=64,K=64,Hi=2,Wi=8,Y=5,X=3", "output is empty"),
        ("N=1,C=64,K=64,Hi=8,Wi=8,Y=3,X=three", "not an integer"),
        ("N=0,C=64,K=64,Hi=8,Wi=8,Y=3,X=3", "N"),
        ("N=1,C=64,Hi=8,Wi=8,Y=3,X=3", "K"),
        # a lone per-dimension key would leave the others at their neutral value
        ("N=1,C=64,K=64,Hi=8,Wi=8,Y=3,X=3,stride_h=2", "stride_h given without stride_w"),
        ("N=1,C=64,K=64,Di=8,Hi=8,Wi=8,Z=3,Y=3,X=3,pad_d=1,pad_h=1", "pad_d, pad_h given without pad_w"),
    ],
)
def test_bad_problems_are_one_line_errors(text: str, bad: str) -> None:
    with pytest.raises(CkspaceError) as info:
        ConvProblem.parse(text)
    assert bad in str(info.value) and "\n" not in str(info.value)


def test_explain_names_the_failing_check_with_its_source() -> None:
    sp = Space("gfx950", "forward", 2, "bf16").for_problem("N=1,C=60,K=128,Hi=56,Wi=56,Y=3,X=3,pad=1")
    name = "grouped_conv_fwd_bf16_nhwgc_2d_compv3_cshuffle_intrawave_128x128x64_2x2x1_32x32x16_vec8_8_8"
    (cell,) = sp.explain(name).cells
    blamed = {b.constraint: b for b in cell.blame}
    assert set(blamed) == {"vec_a_divides_cg", "vec_b_divides_cg"}
    assert "grouped_convolution_forward_kernel.hpp" in blamed["vec_a_divides_cg"].source
    assert all(b.kind == "problem" for b in cell.blame)


def test_depthwise_kernels_need_a_depthwise_problem() -> None:
    sp = Space("gfx950", "forward", 2, "fp16", ck=None)  # the rule space: the CK found builds no depthwise
    depthwise = sp.for_problem("N=1,G=32,C=32,K=32,Hi=56,Wi=56,Y=5,X=5,pad=2")
    kinds = {c.kind for c in depthwise}
    assert "depthwise" in kinds
    assert all(c.filter == 5 and c.pad_h == 2 for c in depthwise if c.kind == "depthwise")
    assert not any(c.kind == "depthwise" for c in sp.for_problem("N=1,C=32,K=32,Hi=56,Wi=56,Y=5,X=5,pad=2"))
