"""Problem-aware feasibility: ConvProblem parsing, and for_problem against an independent
statement of CK's IsSupportedArgument checks (tests/reference_problem.py)."""

from __future__ import annotations

from functools import cache

import pytest
import reference_problem as ref
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from ckspace import CkspaceError, Space
from ckspace.core.problem import ConvProblem


@st.composite
def problems(draw) -> ConvProblem:
    ndim = draw(st.sampled_from([1, 2, 3]))
    g = draw(st.sampled_from([1, 2, 4, 8, 32]))
    values = {"ndim": ndim, "N": draw(st.integers(1, 8)), "G": g,
              "C": g * draw(st.sampled_from([1, 2, 3, 4, 6, 8, 16, 30, 64])),
              "K": g * draw(st.sampled_from([1, 2, 4, 5, 8, 12, 16, 64, 128])),
              "k_batch": draw(st.sampled_from([1, 1, 2, 4]))}
    dims = ["d", "h", "w"][3 - ndim:]
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
    return Space("gfx950", variant, rule_set=rule_set)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(problems(), st.sampled_from([(v, rs) for v in ("forward", "bwd_data", "bwd_weight")
                                     for rs in ("full", "default") if (v, rs) != ("bwd_data", "full")]))
def test_for_problem_keeps_exactly_the_supported_kernels(problem, variant_rule_set) -> None:
    variant, rule_set = variant_rule_set  # full's bwd_data is empty (RULES.md 14.1)
    base = space(variant, rule_set)
    assert base.count() > 0
    kept = {c.name + c.dtype for c in base.for_problem(problem)}
    p = problem.model_dump()
    for config in base:
        data = config.model_dump(mode="json")
        assert (config.name + config.dtype in kept) == ref.supports(data, p), (config.name, problem.text())


def test_problem_text_round_trip_and_shorthands() -> None:
    p = ConvProblem.parse("N=1,G=1,C=64,K=128,Hi=56,Wi=56,Y=3,X=3,stride=1,pad=1")
    assert (p.ndim, p.pad_h, p.pad_w, p.stride_h) == (2, 1, 1, 1)
    assert ConvProblem.parse(p.text()) == p
    q = ConvProblem.parse("n=2 g=4 c=64 k=32 di=8 hi=8 wi=8 z=3 y=3 x=3 stride_d=2 pad=1 dil_w=2")
    assert (q.ndim, q.Cg, q.Kg, q.stride_d, q.stride_h, q.dil_w, q.pad_d) == (3, 16, 8, 2, 1, 2, 1)
    assert q.gemm_mnk("bwd_weight") == (8, 27 * 16, 2 * q.output_volume)


@pytest.mark.parametrize("text,bad", [
    ("N=1,C=64,K=64,Hi=8,Wi=8,Y=3,X=3,colour=3", "colour"),
    ("N=1,C=64,K=64,Hi=8,Wi=8,Y=3,X=3,N=2", "twice"),
    ("N=1,G=3,C=64,K=64,Hi=8,Wi=8,Y=3,X=3", "multiples of G"),
    ("N=1,C=64,K=64,Hi=2,Wi=8,Y=5,X=3", "output is empty"),
    ("N=1,C=64,K=64,Hi=8,Wi=8,Y=3,X=three", "not an integer"),
    ("N=0,C=64,K=64,Hi=8,Wi=8,Y=3,X=3", "N"),
    ("N=1,C=64,Hi=8,Wi=8,Y=3,X=3", "K"),
])
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
    sp = Space("gfx950", "forward", 2, "fp16")
    depthwise = sp.for_problem("N=1,G=32,C=32,K=32,Hi=56,Wi=56,Y=5,X=5,pad=2")
    kinds = {c.kind for c in depthwise}
    assert "depthwise" in kinds
    assert all(c.filter == 5 and c.pad_h == 2 for c in depthwise if c.kind == "depthwise")
    assert not any(c.kind == "depthwise" for c in sp.for_problem("N=1,C=32,K=32,Hi=56,Wi=56,Y=5,X=5,pad=2"))
