"""The implicit GEMM of each variant (workloads/operands.py) against an independent statement of CK
Tile's grouped-convolution traits, through what reads it: the problem rules' words, the emitted
C++ layouts and ``ConvProblem.gemm_mnk``."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import boundary_problems, gemm_configs

from ckspace.constraints.rulebook.problem_rules import gemm_problem_templates
from ckspace.core.ck import PIPELINE_CLASSES
from ckspace.core.vocab import Dtype, Variant
from ckspace.emit.cxx import kernel_context
from ckspace.workloads.problem import ConvProblem

TENSORS = {
    # variant: (A, B, C) in words, as CK Tile's kernels read and write them
    Variant.FORWARD: ("input", "weight", "output"),
    Variant.BWD_DATA: ("output gradient", "weight", "input gradient"),
    Variant.BWD_WEIGHT: ("output gradient", "input", "weight gradient"),
}
SPATIAL = {1: "W", 2: "HW", 3: "DHW"}
FILTER = {1: "X", 2: "YX", 3: "ZYX"}


@pytest.mark.parametrize("variant", list(Variant))
def test_vector_rules_name_the_tensor_each_width_loads_or_stores(variant: Variant) -> None:
    """A wrong gradient flag or tensor in the operand table shows in ``explain``'s words."""
    texts = {t.vector_field: t.text for t in gemm_problem_templates(variant, 2, Dtype.BF16) if t.vector_field}
    for field, tensor in zip(("vec_a", "vec_b", "vec_c"), TENSORS[variant], strict=True):
        assert f"the {tensor}'s contiguous channels" in texts[field], texts[field]


@settings(max_examples=30, deadline=None)
@given(gemm_configs(arch="gfx950"), st.sampled_from(sorted(PIPELINE_CLASSES)))
def test_emitted_layouts_follow_the_rank(config, pipeline) -> None:
    """Channels innermost with the group beside them; the weight is G, K, filter taps, C."""
    config = config.model_copy(update={"pipeline": pipeline})  # one CK Tile has, so that it emits
    n = config.ndim
    expected = (f"N{SPATIAL[n]}GC", f"GK{FILTER[n]}C", f"N{SPATIAL[n]}GK")
    assert kernel_context(config)["layouts"] == expected


@settings(max_examples=60, deadline=None)
@given(boundary_problems())
def test_gemm_sizes_of_each_variant(problem: ConvProblem) -> None:
    """Forward: M = N x output pixels, N = Kg, K = Cg x taps; backward data: M = N x input pixels,
    N = Cg, K = Kg x taps; backward weight: M = Kg, N = taps x Cg, K = N x output pixels."""
    dims = problem.dims
    out = math.prod(problem.output_size(d) for d in dims)
    inp = math.prod(problem.input_size(d) for d in dims)
    taps = math.prod(problem.filter_size(d) for d in dims)
    cg, kg = problem.C // problem.G, problem.K // problem.G
    assert problem.gemm_mnk("forward") == (problem.N * out, kg, cg * taps)
    assert problem.gemm_mnk("bwd_data") == (problem.N * inp, cg, kg * taps)
    assert problem.gemm_mnk("bwd_weight") == (kg, taps * cg, problem.N * out)
