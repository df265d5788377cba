"""Verification at sampled output elements (``ckspace.verify.sampled``, ``verify_at``).

``reference_at`` is held to the full reference and to the naive element loops of
``tests/naive_conv.py`` at drawn positions of drawn problems of every variant, ndim, grouping,
stride, pad, dilation and dtype. The sampled check is held to the full one: on every position it
gives the same result, and on samples it catches the faults of ``test_verify_reference`` (swapped groups,
a transposed filter, an off-by-one pad, one wrong corner element, NaN anywhere) and passes correct
low-precision results. Positions are checked against an independent statement of the corners.
The worker's sampled path runs with a host device and a stand-in library.
"""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st
from naive_conv import NAIVE
from test_verify_reference import (
    DTYPES,
    MID,
    SETTINGS,
    VARIANTS,
    _problem,
    _reordered,
    _truncate,
    _work,
    _wrong,
    tiny_problems,
)

from ckspace.core.errors import InvalidInputError
from ckspace.verify import sampled
from ckspace.verify.comparison import Tolerance, count_nonfinite, tolerance, verify, verify_at
from ckspace.verify.reference import numpy_dtype, operand_shapes, random_operands, reference
from ckspace.verify.sampled import reference_at, sample_positions, use_sampling
from ckspace.workloads.problem import ConvProblem

GROUP_AXIS = {"forward": -2, "bwd_data": -2, "bwd_weight": 0}
"""Where the group axis of c sits (output and input gradient: beside the channels; weight gradient: first)."""


def _corners(shape: tuple[int, ...]) -> set[int]:
    """Flat indices of the elements whose every index is the first or the last of its axis, by
    scanning every element."""
    return {
        i
        for i, index in enumerate(np.ndindex(*shape))
        if all(x in (0, s - 1) for x, s in zip(index, shape, strict=True))
    }


# -- reference_at --------------------------------------------------------------------------------------------


@SETTINGS
@given(tiny_problems(), st.sampled_from(VARIANTS), st.sampled_from(DTYPES), st.integers(0, 2**32 - 1), st.data())
def test_reference_at_equals_the_full_reference_and_the_naive_loops(
    p: dict, variant: str, dtype: str, seed: int, data: st.DataObject
) -> None:
    assume(_work(p) * p["C"] // p["G"] <= 6000)
    problem = _problem(p)
    a, b = random_operands(problem, variant, dtype, seed)
    full = reference(problem, variant, a, b).reshape(-1)
    positions = np.array(data.draw(st.lists(st.integers(0, full.size - 1), min_size=1, max_size=40)), dtype=np.int64)
    got = reference_at(problem, variant, a, b, positions)
    assert got.dtype == np.float32 and got.shape == positions.shape
    k = problem.gemm_mnk(variant)[2]
    np.testing.assert_allclose(got, full[positions], rtol=1e-5, atol=1e-6 * k)
    np.testing.assert_allclose(got, NAIVE[variant](p, a, b).reshape(-1)[positions], rtol=1e-5, atol=1e-6 * k)


@pytest.mark.parametrize("chunk", [100, 5])
@pytest.mark.parametrize("variant", VARIANTS)
def test_reference_at_is_the_same_in_small_chunks(variant: str, chunk: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Chunks of a few outer indices (100) and chunks smaller than one inner run (5: one position
    and one outer index at a time) give the values of the default chunking."""
    problem = MID[variant]
    a, b = random_operands(problem, variant, "fp32", seed=1)
    positions = sample_positions(problem, variant, 64, seed=2)
    whole = reference_at(problem, variant, a, b, positions)
    np.testing.assert_allclose(whole, reference(problem, variant, a, b).reshape(-1)[positions], rtol=1e-5, atol=1e-4)
    monkeypatch.setattr(sampled, "CHUNK", chunk)
    np.testing.assert_allclose(reference_at(problem, variant, a, b, positions), whole, rtol=1e-5, atol=1e-4)


def test_reference_at_refuses_bad_positions_and_operands() -> None:
    problem = MID["forward"]
    a, b = random_operands(problem, "forward", "bf16", seed=0)
    size = math.prod(operand_shapes(problem, "forward").c)
    for bad in (np.array([size]), np.array([-1]), np.array([[0, 1]]), np.array([0.5])):
        with pytest.raises(InvalidInputError, match="positions"):
            reference_at(problem, "forward", a, b, bad)
    with pytest.raises(InvalidInputError, match="shape"):
        reference_at(problem, "forward", b, a, np.array([0]))


# -- sample_positions ----------------------------------------------------------------------------------------


@SETTINGS
@given(tiny_problems(), st.sampled_from(VARIANTS), st.integers(0, 300), st.integers(0, 2**32 - 1))
def test_positions_are_distinct_in_range_deterministic_include_the_corners_and_spread_over_groups(
    p: dict, variant: str, extra: int, seed: int
) -> None:
    problem = _problem(p)
    shape = operand_shapes(problem, variant).c
    size = math.prod(shape)
    corners = _corners(shape)
    count = len(corners) + extra
    positions = sample_positions(problem, variant, count, seed)
    assert positions.dtype == np.int64 and positions.ndim == 1
    assert positions.size == min(count, size) == np.unique(positions).size
    assert positions.min() >= 0 and positions.max() < size and (np.diff(positions) > 0).all()
    assert corners <= set(positions.tolist())
    assert np.array_equal(positions, sample_positions(problem, variant, count, seed))
    groups = np.unravel_index(positions, shape)[GROUP_AXIS[variant] % len(shape)]
    drawn = np.bincount(groups, minlength=p["G"])
    if count < size and extra >= p["G"]:
        assert (drawn > 0).all()
    if size >= 40 * len(corners) and extra >= 4:  # room to spare in every group: shares differ by one at most
        corner_groups = np.bincount(
            np.unravel_index(sorted(corners), shape)[GROUP_AXIS[variant] % len(shape)], minlength=p["G"]
        )
        shares = drawn - corner_groups
        assert shares.max() - shares.min() <= 1, shares
        assert not np.array_equal(positions, sample_positions(problem, variant, count, seed + 1))


def test_a_count_below_the_corners_and_bad_seeds_are_refused() -> None:
    problem = MID["forward"]
    with pytest.raises(InvalidInputError, match="corners"):
        sample_positions(problem, "forward", 31, 0)  # NHWGK: 2^5 corners
    assert sample_positions(problem, "forward", 32, 0).size == 32
    with pytest.raises(InvalidInputError, match="seed"):
        sample_positions(problem, "forward", 100, -1)


# -- verify_at ------------------------------------------------------------------------------------------------


@SETTINGS
@given(
    st.sampled_from(VARIANTS),
    st.sampled_from(DTYPES),
    st.integers(0, 2**32 - 1),
    st.lists(
        st.tuples(st.integers(0, 10**6), st.sampled_from([0.0, 0.001, 0.05, 1.0, 100.0, math.nan, math.inf])),
        max_size=6,
    ),
)
def test_verify_at_every_position_is_verify(variant: str, dtype: str, seed: int, changes: list) -> None:
    problem = ConvProblem.parse("N=2,G=2,C=8,K=4,Hi=5,Wi=6,Y=3,X=2,pad=1,stride=2")
    a, b = random_operands(problem, variant, dtype, seed)
    c_ref = reference(problem, variant, a, b)
    kernel = c_ref.astype(numpy_dtype(dtype)).reshape(-1)
    for index, delta in changes:
        kernel[index % kernel.size] += delta
    tol = tolerance(problem, variant, dtype)
    whole = verify(kernel, c_ref, tol)
    at = verify_at(kernel, np.arange(kernel.size), c_ref.reshape(-1), tol)
    assert at == whole and not at.sampled and at.checked == at.elements == kernel.size


SAMPLED = 512
"""Samples in the fault tests: a fraction of the MID problems' outputs (1152-9216 elements)."""


def _sampled_check(variant: str, dtype: str, c_kernel: np.ndarray, seed: int = 9):
    problem = MID[variant]
    a, b = random_operands(problem, variant, dtype, seed)
    positions = sample_positions(problem, variant, SAMPLED, seed=5)
    return verify_at(
        c_kernel, positions, reference_at(problem, variant, a, b, positions), tolerance(problem, variant, dtype)
    )


@pytest.mark.parametrize("fault", ["swapped_groups", "transposed_filter", "off_by_one_pad"])
@pytest.mark.parametrize("variant", VARIANTS)
def test_the_sampled_check_catches_the_faults_the_full_one_does(variant: str, fault: str) -> None:
    problem = MID[variant]
    a, b = random_operands(problem, variant, "bf16", seed=9)
    c_bad = _wrong(variant, problem, a, b, fault).astype(numpy_dtype("bf16"))
    assert not verify(c_bad, reference(problem, variant, a, b), tolerance(problem, variant, "bf16")).ok
    result = _sampled_check(variant, "bf16", c_bad)
    assert result.sampled and result.checked == SAMPLED and result.elements == c_bad.size
    assert not result.ok and result.exceeded > SAMPLED // 4 and result.max_rel_error > 1, result
    assert result.summary.startswith(f"{result.exceeded} of {SAMPLED} sampled elements (of {c_bad.size}")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("variant", VARIANTS)
def test_a_correct_result_passes_the_sampled_check(variant: str, dtype: str) -> None:
    """Summed in another order and truncated to the dtype, as in test_verify_reference."""
    problem = MID[variant]
    a, b = random_operands(problem, variant, dtype, seed=9)
    c_kernel = _truncate(reference(problem, variant, *_reordered(variant, a, b)), dtype)
    result = _sampled_check(variant, dtype, c_kernel)
    assert result.ok and result.exceeded == result.nonfinite == 0 and result.sampled, result
    assert result.summary == f"verified at {SAMPLED} sampled elements (of {c_kernel.size}; non-finite sought in all)"


@pytest.mark.parametrize("variant", VARIANTS)
def test_a_wrong_corner_and_nan_anywhere_are_caught_and_a_fault_between_samples_is_not(variant: str) -> None:
    problem = MID[variant]
    a, b = random_operands(problem, variant, "bf16", seed=9)
    good = reference(problem, variant, a, b).astype(numpy_dtype("bf16")).reshape(-1)
    assert _sampled_check(variant, "bf16", good).ok
    positions = set(sample_positions(problem, variant, SAMPLED, seed=5).tolist())
    unsampled = next(i for i in range(good.size // 2, good.size) if i not in positions)
    for index in (0, good.size - 1):  # the first and the last element: corners, always sampled
        kernel = good.copy()
        kernel[index] += 1
        result = _sampled_check(variant, "bf16", kernel)
        assert not result.ok and result.exceeded == 1 and result.nonfinite == 0
    for bad in (np.nan, np.inf, -np.inf):
        kernel = good.copy()
        kernel[unsampled] = bad
        result = _sampled_check(variant, "bf16", kernel)
        assert not result.ok and result.exceeded == result.nonfinite == 1
        assert result.max_abs_error == result.max_rel_error == math.inf
    kernel = good.copy()
    kernel[sorted(positions)[1]] = np.nan  # sampled and non-finite: counted once
    assert _sampled_check(variant, "bf16", kernel).exceeded == 1
    kernel = good.copy()
    kernel[unsampled] += 100  # the documented limit: a fault confined to unsampled elements passes
    assert _sampled_check(variant, "bf16", kernel).ok
    assert not verify(kernel, reference(problem, variant, a, b), tolerance(problem, variant, "bf16")).ok


def test_verify_at_refuses_mismatched_positions_and_counts_nonfinite_in_every_dtype() -> None:
    tol = Tolerance(rtol=0.01, atol=0.01)
    with pytest.raises(InvalidInputError, match="equal length"):
        verify_at(np.zeros(10), np.arange(3), np.zeros(4), tol)
    with pytest.raises(InvalidInputError, match="10 elements"):
        verify_at(np.zeros(10), np.array([10]), np.zeros(1), tol)
    for dtype in DTYPES:
        values = np.array([1, -2, np.nan, np.inf, -np.inf, 0, -0.0, 3e-8], dtype=np.float32).astype(numpy_dtype(dtype))
        assert count_nonfinite(values) == 3
        largest = ml_dtypes.finfo(numpy_dtype(dtype)).max  # exponent bits just below all ones
        assert count_nonfinite(np.array([largest, -largest], dtype=numpy_dtype(dtype))) == 0


# -- when to sample ---------------------------------------------------------------------------------------------


def test_sampling_is_used_above_the_macs_or_elements_threshold_and_never_for_small_outputs() -> None:
    largest = ConvProblem.parse("N=4,G=11,C=11110,K=11110,Hi=128,Wi=128,Y=3,X=3,pad=1")
    assert (
        use_sampling(largest, "forward") and use_sampling(largest, "bwd_data") and use_sampling(largest, "bwd_weight")
    )
    assert not any(use_sampling(MID[v], v) for v in VARIANTS)
    wide = ConvProblem.parse("N=4,C=12,K=72,Hi=1024,Wi=1024,Y=1,X=1")  # 3e8 outputs, 3.6e9 MACs
    assert wide.flops // 2 < sampled.SAMPLING_MACS and use_sampling(wide, "forward")
    assert not use_sampling(wide, "bwd_weight")  # dw has 864 elements: the full check is as cheap
    for c in (1000, 2000):  # 1000 * 1000 * 64 * 64 = 4.1e9 MACs, 2000: 8.2e9
        problem = ConvProblem.parse(f"N=1,C={c},K=1000,Hi=64,Wi=64,Y=1,X=1")
        assert use_sampling(problem, "forward") is (problem.flops // 2 > sampled.SAMPLING_MACS) is (c == 2000)


# -- the worker's sampled path --------------------------------------------------------------------------------


class _Library:
    """A stand-in kernel library whose ``run`` writes a fixed output into the output buffer."""

    def __init__(self, device, output: np.ndarray) -> None:
        self.device, self.output = device, output

    def workspace_size(self, kernel, problem, variant, dtype) -> int:
        return 0

    def run_status(self, kernel, problem, a, b, c, workspace, size, stream) -> int:
        self.device.upload(c, self.output)
        return 0


@pytest.mark.parametrize("variant", VARIANTS)
def test_the_worker_checks_big_problems_at_samples(variant: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from ckspace.run.device import HostDevice
    from ckspace.run.worker import BatchJob, PairSpec, _Prepared, run_pair

    monkeypatch.setattr(sampled, "SAMPLING_MACS", 10**5)  # MID's problems (2.6e6-1.6e7 MACs) count as big
    monkeypatch.setattr(sampled, "SAMPLES", 256)
    problem = MID[variant]
    spec = PairSpec(kernel=0, name="k", variant=variant, dtype="bf16", problem_idx=3, problem=problem)
    job = BatchJob(library="-", backend="host", device=0, pairs=[spec], warmup=0, repeat=1, verify=True, seed=10)
    device = HostDevice(0)
    prepared = _Prepared(device, spec, job.seed, job.verify)
    a, b = random_operands(problem, variant, "bf16", 13)
    good = reference(problem, variant, a, b).astype(numpy_dtype("bf16"))
    result = run_pair(_Library(device, good), device, prepared, spec, job)
    assert result.status == "ok" and result.detail.startswith(f"verified at 256 sampled elements (of {good.size}")
    bad = good.copy().reshape(-1)
    bad[-1] += 1
    result = run_pair(_Library(device, bad), device, prepared, spec, job)
    assert result.status == "wrong" and result.detail.startswith("1 of 256 sampled elements"), result
    prepared.release()
    monkeypatch.setattr(sampled, "SAMPLING_MACS", 10**9)
    prepared = _Prepared(device, spec, job.seed, job.verify)
    result = run_pair(_Library(device, bad), device, prepared, spec, job)
    assert result.status == "wrong" and result.detail == f"1 of {good.size} elements beyond tolerance"
    assert run_pair(_Library(device, good), device, prepared, spec, job).detail == ""
    prepared.release()
