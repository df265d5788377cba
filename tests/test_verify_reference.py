"""CPU references and result verification (``ckspace.verify.reference`` / ``verification``).

The references are checked against ``tests/naive_conv.py`` (the definition of convolution as
element loops) on drawn tiny problems of every variant, ndim, grouping, stride, pad, dilation and
dtype; against hand-computed cases; and against each other through the adjoint identities. The
tolerance is checked from both sides: results a correct kernel can produce (another summation
order, a truncating accumulator, truncation to bf16, split-K partials added in the output dtype)
pass, and the faults a wrong kernel shows are caught.
"""

from __future__ import annotations

import math
import re
import sys
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from naive_conv import NAIVE
from naive_conv import shapes as naive_shapes

from ckspace.core.errors import InvalidInputError
from ckspace.core.vocab import Dtype, Variant
from ckspace.verify.comparison import Tolerance, tolerance, verify
from ckspace.verify.reference import (
    numpy_dtype,
    operand_bytes,
    operand_from_buffer,
    operand_shapes,
    random_operands,
    reference,
)
from ckspace.workloads.problem import ConvProblem

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "verification.md"
VARIANTS = [v.value for v in Variant]
DTYPES = [d.value for d in Dtype]
ROLES = {"forward": ("In", "Wei", "Out"), "bwd_data": ("Out", "Wei", "In"), "bwd_weight": ("Out", "In", "Wei")}
"""The GEMM operands a, b, c per variant, stated independently of ckspace.workloads.operands."""
SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def tiny_problems(draw) -> dict:
    """A grouped convolution small enough for the naive loops, with a non-empty output: per
    dimension the input is at least as large as the dilated filter less both pads."""
    ndim = draw(st.sampled_from([1, 2, 3]))
    g = draw(st.integers(1, 3))
    p = {
        "ndim": ndim,
        "N": draw(st.integers(1, 2)),
        "G": g,
        "C": g * draw(st.integers(1, 3)),
        "K": g * draw(st.integers(1, 3)),
    }
    extent = {1: 7, 2: 5, 3: 3}[ndim]
    for d, image, filt in zip(
        "dhw"[3 - ndim :], ("Di", "Hi", "Wi")[3 - ndim :], ("Z", "Y", "X")[3 - ndim :], strict=True
    ):
        p[filt] = draw(st.integers(1, 3))
        p[f"stride_{d}"] = draw(st.integers(1, 3))
        p[f"dil_{d}"] = draw(st.integers(1, 3))
        p[f"pad_{d}"] = draw(st.integers(0, 2))
        reach = p[f"dil_{d}"] * (p[filt] - 1) + 1
        p[image] = draw(st.integers(max(1, reach - 2 * p[f"pad_{d}"]), max(1, reach - 2 * p[f"pad_{d}"]) + extent))
    return p


def _problem(p: dict) -> ConvProblem:
    return ConvProblem(**p)


def _work(p: dict) -> int:
    shapes = naive_shapes(p)
    return math.prod(shapes["Out"]) * math.prod(shapes["Wei"][2:])


# -- shapes, sizes, inputs --------------------------------------------------------------------------


@SETTINGS
@given(tiny_problems(), st.sampled_from(VARIANTS), st.sampled_from(DTYPES))
def test_operand_shapes_and_bytes_follow_the_layouts(p: dict, variant: str, dtype: str) -> None:
    shapes = naive_shapes(p)
    expected = tuple(shapes[t] for t in ROLES[variant])
    assert operand_shapes(_problem(p), variant) == expected
    itemsize = {"fp16": 2, "bf16": 2, "fp32": 4}[dtype]
    assert operand_bytes(_problem(p), variant, dtype) == tuple(math.prod(s) * itemsize for s in expected)


def test_random_operands_are_in_the_kernels_dtype_deterministic_and_spread_over_the_range() -> None:
    problem = ConvProblem.parse("N=2,G=2,C=32,K=16,Hi=9,Wi=9,Y=3,X=3,pad=1")
    for dtype, np_dtype in (("bf16", ml_dtypes.bfloat16), ("fp16", np.float16), ("fp32", np.float32)):
        a, b = random_operands(problem, "forward", dtype, seed=7)
        assert a.dtype == np.dtype(np_dtype) and b.dtype == np.dtype(np_dtype)
        again = random_operands(problem, "forward", dtype, seed=7)
        assert a.tobytes() == again[0].tobytes() and b.tobytes() == again[1].tobytes()
        other = random_operands(problem, "forward", dtype, seed=8)
        assert a.tobytes() != other[0].tobytes()
        values = a.astype(np.float64)
        assert -1 <= values.min() < -0.95 and 0.95 < values.max() <= 1 and abs(values.mean()) < 0.05
        assert abs(values.var() - 1 / 3) < 0.02
    bf16 = random_operands(problem, "forward", "bf16", seed=7)[0]
    # bf16 values carry 8 significant bits: the low 16 bits of their float32 form are zero
    assert not (bf16.astype(np.float32).view(np.uint32) & 0xFFFF).any()
    fp32 = random_operands(problem, "forward", "fp32", seed=7)[0]
    assert (fp32.view(np.uint32) & 0xFFFF).any()
    # a depends on the seed and its own shape only, not on b's
    wider = problem.model_copy(update={"K": 64})
    assert random_operands(wider, "forward", "bf16", seed=7)[0].tobytes() == bf16.tobytes()


def test_a_raw_buffer_reads_back_as_the_operand_and_a_wrong_size_is_refused() -> None:
    problem = ConvProblem.parse("N=1,G=2,C=4,K=6,Hi=4,Wi=5,Y=3,X=3,pad=1")
    a, b = random_operands(problem, "bwd_weight", "bf16", seed=1)
    c = reference(problem, "bwd_weight", a, b).astype(numpy_dtype("bf16"))
    back = operand_from_buffer(bytearray(c.tobytes()), problem, "bwd_weight", "bf16")
    assert back.shape == c.shape and back.dtype == c.dtype and back.tobytes() == c.tobytes()
    assert operand_from_buffer(a.tobytes(), problem, "bwd_weight", "bf16", operand="a").shape == a.shape
    with pytest.raises(InvalidInputError, match="needs"):
        operand_from_buffer(c.tobytes()[:-2], problem, "bwd_weight", "bf16")
    with pytest.raises(InvalidInputError, match="valid: a, b, c"):
        operand_from_buffer(c.tobytes(), problem, "bwd_weight", "bf16", operand="d")
    with pytest.raises(InvalidInputError, match="shape"):
        reference(problem, "bwd_weight", b, a)


# -- the references against the definition -----------------------------------------------------------


@pytest.mark.slow
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tiny_problems(), st.sampled_from(VARIANTS), st.sampled_from(DTYPES), st.integers(0, 2**32 - 1))
def test_reference_equals_the_naive_loops(p: dict, variant: str, dtype: str, seed: int) -> None:
    assume(_work(p) * p["C"] // p["G"] <= 6000)
    problem = _problem(p)
    a, b = random_operands(problem, variant, dtype, seed)
    got = reference(problem, variant, a, b)
    want = NAIVE[variant](p, a, b)
    assert got.dtype == np.float32 and got.shape == want.shape
    k = problem.gemm_mnk(variant)[2]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6 * k)


def _hand(p: dict, variant: str, a: list, b: list) -> np.ndarray:
    problem = ConvProblem.from_values(p)
    shapes = operand_shapes(problem, variant)
    return reference(
        problem, variant, np.array(a, np.float32).reshape(shapes.a), np.array(b, np.float32).reshape(shapes.b)
    ).reshape(-1)


def test_hand_computed_forward_cases() -> None:
    one = {"N": 1, "G": 1, "C": 1, "K": 1}
    # out[o] = x[o] w0 + x[o+1] w1
    assert _hand({**one, "Wi": 4, "X": 2}, "forward", [1, 2, 3, 4], [1, -1]).tolist() == [-1, -1, -1]
    # padded [0 1 2 3 4 0], stride 2: [0-1, 2-3, 4-0]
    assert _hand({**one, "Wi": 4, "X": 2, "pad": 1, "stride": 2}, "forward", [1, 2, 3, 4], [1, -1]).tolist() == [
        -1,
        -1,
        4,
    ]
    # dilation 2: out[o] = x[o] w0 + x[o+2] w1
    assert _hand({**one, "Wi": 4, "X": 2, "dil": 2}, "forward", [1, 2, 3, 4], [1, -1]).tolist() == [-2, -2]
    # 2D, dilation 2 on a 3x3 image: the corners times the 2x2 filter, 1*1 + 3*2 + 7*3 + 9*4
    assert _hand(
        {**one, "Hi": 3, "Wi": 3, "Y": 2, "X": 2, "dil": 2}, "forward", range(1, 10), [1, 2, 3, 4]
    ).tolist() == [64]
    # 3D: depth 2 filter on depth 2: 2*3 + 5*(-1)
    assert _hand({**one, "Di": 2, "Hi": 1, "Wi": 1, "Z": 2, "Y": 1, "X": 1}, "forward", [2, 5], [3, -1]).tolist() == [1]
    # two output channels: weight rows are (k, c): out = [1*1 + 2*0, 1*1 + 2*1]
    assert _hand({"N": 1, "G": 1, "C": 2, "K": 2, "Wi": 1, "X": 1}, "forward", [1, 2], [1, 0, 1, 1]).tolist() == [1, 3]
    # two groups of two channels: group 0 sums 1+2, group 1 takes 3-4
    assert _hand(
        {"N": 1, "G": 2, "C": 4, "K": 2, "Wi": 1, "X": 1}, "forward", [1, 2, 3, 4], [1, 1, 1, -1]
    ).tolist() == [3, -1]


def test_hand_computed_backward_cases() -> None:
    one = {"N": 1, "G": 1, "C": 1, "K": 1}
    # dx[i] = sum over o + t = i of dy[o] w[t]: [1*1, 1*2 + 10*1, 10*2]
    assert _hand({**one, "Wi": 3, "X": 2}, "bwd_data", [1, 10], [1, 2]).tolist() == [1, 12, 20]
    # stride 2 overlaps at i = 2 only: [1, 2, 3 + 10, 20, 30]
    assert _hand({**one, "Wi": 5, "X": 3, "stride": 2}, "bwd_data", [1, 10], [1, 2, 3]).tolist() == [1, 2, 13, 20, 30]
    # stride 3 > filter 2 leaves input 2 untouched: [1*1, 1*2, 0, 10*1, 10*2]
    assert _hand({**one, "Wi": 5, "X": 2, "stride": 3}, "bwd_data", [1, 10], [1, 2]).tolist() == [1, 2, 0, 10, 20]
    # dw[t] = sum_o dy[o] x[o + t]: [1*1 + 10*2, 1*2 + 10*3]
    assert _hand({**one, "Wi": 3, "X": 2}, "bwd_weight", [1, 10], [1, 2, 3]).tolist() == [21, 32]
    # pad 1: x padded [0 1 2 3 0], dy = [1 2 3 4]: [2*1 + 3*2 + 4*3, 1*1 + 2*2 + 3*3]
    assert _hand({**one, "Wi": 3, "X": 2, "pad": 1}, "bwd_weight", [1, 2, 3, 4], [1, 2, 3]).tolist() == [20, 14]
    # two groups: each group's weight gradient sees only its own channels: [1*5, 2*7]
    assert _hand({"N": 1, "G": 2, "C": 2, "K": 2, "Wi": 1, "X": 1}, "bwd_weight", [1, 2], [5, 7]).tolist() == [5, 14]


@SETTINGS
@given(tiny_problems(), st.integers(0, 2**32 - 1))
def test_the_three_references_are_adjoint(p: dict, seed: int) -> None:
    """<fwd(x, w), y> = <x, bwd_data(y, w)> = <w, bwd_weight(y, x)>: all three are the same sum."""
    problem = _problem(p)
    x, w = random_operands(problem, "forward", "fp32", seed)
    y = random_operands(problem, "bwd_data", "fp32", seed + 1)[0]
    sums = [
        np.vdot(reference(problem, "forward", x, w).astype(np.float64), y.astype(np.float64)),
        np.vdot(x.astype(np.float64), reference(problem, "bwd_data", y, w).astype(np.float64)),
        np.vdot(w.astype(np.float64), reference(problem, "bwd_weight", y, x).astype(np.float64)),
    ]
    scale = problem.N * problem.output_volume * problem.K * problem.Cg * problem.filter_volume
    assert max(sums) - min(sums) <= 1e-6 * scale, sums


# -- the tolerance ------------------------------------------------------------------------------------

MID = {
    "forward": ConvProblem.parse("N=2,G=2,C=64,K=32,Hi=12,Wi=12,Y=3,X=3,pad=1"),
    "bwd_data": ConvProblem.parse("N=2,G=2,C=32,K=64,Hi=12,Wi=12,Y=3,X=3,pad=1,stride=2"),
    "bwd_weight": ConvProblem.parse("N=8,G=2,C=16,K=16,Hi=12,Wi=12,Y=3,X=3,pad=1"),
}
"""Problems of real reduction lengths (K = 288, 288 and 1152) that still compute fast."""


def _truncate(values: np.ndarray, dtype: str) -> np.ndarray:
    """Float32 values converted to the dtype by truncation (CK Tile's default float-to-bf16
    conversion), the conversion that errs most: rounded, then stepped toward zero where rounding
    went away from it."""
    np_dtype = numpy_dtype(dtype)
    rounded = values.astype(np_dtype)
    away = np.abs(rounded.astype(np.float64)) > np.abs(values.astype(np.float64))
    toward = np.nextafter(rounded, np.zeros_like(rounded))
    return np.where(away, toward, rounded)


def test_rtol_is_one_ulp_of_the_output_dtype_and_the_bounds_grow_with_k_and_split_k() -> None:
    assert {d: tolerance(MID["forward"], "forward", d).rtol for d in DTYPES} == {
        "fp16": 2.0**-10,
        "bf16": 2.0**-7,
        "fp32": 2.0**-23,
    }
    short, long = (ConvProblem.parse(f"N=1,C={c},K=1,Wi=1,X=1") for c in (64, 4096))
    assert tolerance(short, "forward", "bf16").atol < tolerance(long, "forward", "bf16").atol
    split = [
        tolerance(ConvProblem.parse(f"N=4096,C=1,K=1,Wi=1,X=1,k_batch={kb}"), "bwd_weight", "bf16").atol
        for kb in (1, 2, 8)
    ]
    assert split == sorted(split) and len(set(split)) == 3
    assert Tolerance(rtol=2.0**-7, atol=0.5).text == "0.0078125/0.5"
    with pytest.raises(InvalidInputError, match="only bwd_weight splits K"):
        tolerance(ConvProblem.parse("N=1,C=8,K=8,Wi=4,X=1,k_batch=2"), "forward", "bf16")


def _reordered(variant: str, a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The operands with the reduced axis reversed in both: the same convolution summed in another
    order (forward reduces channels, innermost in input and weight; bwd_data output channels, the
    last axis of the output gradient and the second of the weight; bwd_weight images, the first)."""
    if variant == "forward":
        return a[..., ::-1], b[..., ::-1]
    if variant == "bwd_data":
        return a[..., ::-1], b[:, ::-1]
    return a[::-1], b[::-1]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("variant", VARIANTS)
def test_a_correct_low_precision_result_passes(variant: str, dtype: str) -> None:
    """A kernel that sums in another order and truncates to the output dtype passes; so does the
    reference rounded to the dtype."""
    problem = MID[variant]
    a, b = random_operands(problem, variant, dtype, seed=3)
    c_ref = reference(problem, variant, a, b)
    tol = tolerance(problem, variant, dtype)
    assert verify(c_ref.astype(numpy_dtype(dtype)), c_ref, tol).ok
    other_order = reference(problem, variant, *_reordered(variant, a, b))
    assert not np.array_equal(other_order, c_ref) or dtype != "fp32"
    result = verify(_truncate(other_order, dtype), c_ref, tol)
    assert result.ok and result.exceeded == 0 and result.nonfinite == 0, result
    assert result.elements == c_ref.size and result.tolerance == tol.text


@pytest.mark.parametrize("dtype", ["bf16", "fp16"])
def test_split_k_partials_added_in_the_output_dtype_pass(dtype: str) -> None:
    """bwd_weight with k_batch=4: each quarter of the images' sum truncated to the dtype, then the
    partials added in the dtype (as the atomic adds do), truncating after each addition."""
    base = ConvProblem.parse("N=16,G=1,C=8,K=8,Hi=10,Wi=10,Y=3,X=3,pad=1")
    problem = base.model_copy(update={"k_batch": 4})
    a, b = random_operands(base, "bwd_weight", dtype, seed=5)
    c_ref = reference(base, "bwd_weight", a, b)
    quarter = base.model_copy(update={"N": 4})
    total = np.zeros(c_ref.shape, dtype=numpy_dtype(dtype))
    for i in range(4):
        part = _truncate(reference(quarter, "bwd_weight", a[4 * i : 4 * i + 4], b[4 * i : 4 * i + 4]), dtype)
        total = _truncate(total.astype(np.float32) + part.astype(np.float32), dtype)
    assert verify(total, c_ref, tolerance(problem, "bwd_weight", dtype)).ok
    assert not verify(total, c_ref, tolerance(base, "bwd_weight", dtype)).ok or dtype == "fp16"


def test_a_truncating_float32_accumulator_in_the_worst_order_passes_and_needs_the_atol() -> None:
    """fp32, K = 16384 summed one product at a time (recursive summation, the order with the
    largest error) with every addition truncated: within the tolerance, but not within rtol alone."""
    problem = ConvProblem.parse("N=1,G=1,C=16384,K=1,Hi=8,Wi=8,Y=1,X=1")
    a, b = random_operands(problem, "forward", "fp32", seed=11)
    c_ref = reference(problem, "forward", a, b)
    products = (a.reshape(64, -1).astype(np.float64) * b.reshape(1, -1).astype(np.float64)).astype(np.float32)
    acc = np.zeros(64, dtype=np.float32)
    for j in range(products.shape[1]):
        acc = _truncate(acc + products[:, j], "fp32")
    tol = tolerance(problem, "forward", "fp32")
    assert verify(acc, c_ref, tol).ok
    assert not verify(acc, c_ref, Tolerance(rtol=tol.rtol, atol=0.0)).ok


def _wrong(variant: str, problem: ConvProblem, a: np.ndarray, b: np.ndarray, fault: str) -> np.ndarray:
    """What a kernel with a given fault computes."""
    if fault == "swapped_groups":  # a's group g meets b's group G-1-g (a's groups are its axis -2)
        return reference(problem, variant, np.ascontiguousarray(a[..., ::-1, :]), b)
    if fault == "transposed_filter":  # the weight's Y and X axes exchanged
        if variant != "bwd_weight":
            return reference(problem, variant, a, np.ascontiguousarray(b.swapaxes(2, 3)))
        return reference(problem, variant, a, b).swapaxes(2, 3)
    if fault == "off_by_one_pad":  # the image read one row lower: one more pad above, one less below
        image = b if variant == "bwd_weight" else a
        shifted = np.zeros_like(image)
        shifted[:, 1:] = image[:, :-1]
        if variant == "forward":
            return reference(problem, variant, shifted, b)
        if variant == "bwd_weight":
            return reference(problem, variant, a, shifted)
        c = reference(problem, variant, a, b)
        out = np.zeros_like(c)
        out[:, 1:] = c[:, :-1]
        return out
    raise AssertionError(fault)


@pytest.mark.parametrize("fault", ["swapped_groups", "transposed_filter", "off_by_one_pad"])
@pytest.mark.parametrize("variant", VARIANTS)
def test_a_wrong_kernel_is_caught(variant: str, fault: str) -> None:
    problem = MID[variant]
    a, b = random_operands(problem, variant, "bf16", seed=9)
    c_ref = reference(problem, variant, a, b)
    c_bad = _wrong(variant, problem, a, b, fault).astype(numpy_dtype("bf16"))
    result = verify(c_bad, c_ref, tolerance(problem, variant, "bf16"))
    assert not result.ok and result.exceeded > c_ref.size // 4, result
    assert result.max_rel_error > 1


@pytest.mark.parametrize("variant", VARIANTS)
def test_one_wrong_element_is_caught_and_the_bound_is_where_it_says(variant: str) -> None:
    problem = MID[variant]
    a, b = random_operands(problem, variant, "bf16", seed=2)
    c_ref = reference(problem, variant, a, b)
    tol = tolerance(problem, variant, "bf16")
    flat = c_ref.reshape(-1)
    index = int(np.argmax(np.abs(flat)))
    bound = tol.atol + tol.rtol * abs(float(flat[index]))
    for factor, ok in ((0.5, True), (1.5, False)):
        kernel = flat.copy()
        kernel[index] += np.float32(factor * bound)
        result = verify(kernel, c_ref, tol)
        assert result.ok is ok and result.exceeded == (0 if ok else 1), (factor, result)
    zeroed = flat.astype(numpy_dtype("bf16"))
    zeroed[index] = 0
    assert verify(zeroed, c_ref, tol).exceeded == 1


def test_nan_inf_and_misread_bits_are_caught() -> None:
    problem = MID["forward"]
    a, b = random_operands(problem, "forward", "bf16", seed=4)
    c_ref = reference(problem, "forward", a, b)
    tol = tolerance(problem, "forward", "bf16")
    good = c_ref.astype(numpy_dtype("bf16")).reshape(-1)
    for bad_value in (np.nan, np.inf, -np.inf):
        kernel = good.copy()
        kernel[17] = bad_value
        result = verify(kernel, c_ref, tol)
        assert not result.ok and result.nonfinite == 1 and result.exceeded == 1
        assert result.max_abs_error == math.inf and result.max_rel_error == math.inf
    as_fp16 = good.view(np.float16)  # bf16 bits read as fp16, upstream's harness's mix-up the other way round
    assert not verify(as_fp16, c_ref, tol).ok
    with pytest.raises(InvalidInputError, match="elements"):
        verify(good[:-1], c_ref, tol)


# -- the documented table -------------------------------------------------------------------------------

TABLE_CASES = ((576, 1), (4608, 1), (65536, 1), (1048576, 1), (65536, 4), (1048576, 16))
"""(K, k_batch): a 3x3 filter over 64 and 512 channels, and long bwd_weight reductions, split or not."""


def doc_table() -> str:
    """The table of docs/verification.md, from the code (``python3 tests/test_verify_reference.py`` prints it)."""
    lines = [
        "| K | k_batch | spread sqrt(K)/3 | fp32 rtol / atol | fp16 rtol / atol | bf16 rtol / atol |",
        "|---|---|---|---|---|---|",
    ]
    for k, k_batch in TABLE_CASES:
        problem = ConvProblem(ndim=1, N=k, C=1, K=1, Wi=1, X=1, k_batch=k_batch)
        cells = [tolerance(problem, "bwd_weight", d) for d in ("fp32", "fp16", "bf16")]
        lines.append(
            f"| {k} | {k_batch} | {math.sqrt(k) / 3:.3g} | "
            + " | ".join(f"{t.rtol:.3g} / {t.atol:.3g}" for t in cells)
            + " |"
        )
    return "\n".join(lines) + "\n"


def test_the_docs_table_is_what_the_code_gives() -> None:
    assert doc_table() in DOC.read_text(), (
        "docs/verification.md is stale: python3 tests/test_verify_reference.py prints the table"
    )


if __name__ == "__main__":
    sys.stdout.write(doc_table())


@pytest.mark.parametrize("dtype", ["bf16", "fp16", "fp32"])
def test_operands_drawn_in_chunks_are_the_one_draw_of_the_whole(dtype: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Chunked generation (to keep temporaries small) changes no value: against one draw of the whole."""
    from ckspace.verify import reference as ref

    monkeypatch.setattr(ref, "GENERATION_CHUNK", 6)
    problem = ConvProblem.parse("N=1,C=8,K=4,Hi=3,Wi=5,Y=3,X=3,pad=1")
    a, b = ref.random_operands(problem, "bwd_data", dtype, 11)
    np_dtype = ref.numpy_dtype(dtype)
    draw = np.float64 if np_dtype == np.float32 else np.float32
    for array, shape, stream in zip(
        (a, b), ref.operand_shapes(problem, "bwd_data")[:2], np.random.SeedSequence(11).spawn(2), strict=True
    ):
        whole = np.random.default_rng(stream).random(math.prod(shape), dtype=draw)
        expected = ((2 * ref.INPUT_BOUND) * whole - ref.INPUT_BOUND).astype(np_dtype).reshape(shape)
        assert array.size > 6 and np.array_equal(array.view(np.uint8), expected.view(np.uint8))


def test_the_verification_doc_snippet_runs_as_written() -> None:
    text = (ROOT / "docs" / "verification.md").read_text()
    code = re.search(r"```python\n(.*?)```", text, re.S).group(1)
    namespace: dict = {}
    exec(compile(code, "docs/verification.md", "exec"), namespace)  # our own doc, not user text
    assert namespace["result"].checked > 0
