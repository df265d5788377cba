"""Holding a kernel's result to the CPU reference: the tolerance and the check.

An element passes when ``|kernel - reference| <= atol + rtol * |reference|`` (CK Tile's
``check_err`` criterion) and the kernel's value is finite; a kernel passes when every element does.
The tolerance depends on the dtype, the reduction length K of the variant's implicit GEMM
(``ConvProblem.gemm_mnk``) and, for backward weight, the split-K factor; it is derived below from
an error model of a correct kernel, so that a correct kernel never fails and a wrong one (a wrong
element, swapped groups, a transposed filter, an off-by-one pad) does. ``docs/verification.md``
states it with a table of the bounds.
"""

from __future__ import annotations

import logging
import math
from typing import NamedTuple

import ml_dtypes
import numpy as np
from pydantic import BaseModel, ConfigDict

from ckspace.core.errors import InvalidInputError
from ckspace.core.vocab import Dtype, Variant
from ckspace.verify.reference import INPUT_BOUND, numpy_dtype
from ckspace.workloads.problem import ConvProblem

log = logging.getLogger(__name__)

CONFIDENCE = 8.0
"""lambda: partial sums are bounded by this many standard deviations (a Gaussian exceeds 8 sigma
with probability ~1e-15, so not once in the ~1e9 elements of a large sweep)."""

ACCUMULATOR_ULP = float(ml_dtypes.finfo(np.float32).eps)
"""One ulp of float32 at 1 (2^-23): kernels and reference accumulate in float32."""


class Tolerance(BaseModel):
    """Relative and absolute bounds of one comparison."""

    model_config = ConfigDict(frozen=True)

    rtol: float
    atol: float

    @property
    def text(self) -> str:
        """``rtol/atol``, the measurement CSV's ``tolerance`` column."""
        return f"{self.rtol:.6g}/{self.atol:.6g}"


class Verification(BaseModel):
    """How a kernel's output compares with the reference.

    ``max_rel_error`` is ``max |kernel - reference| / (|reference| + atol)`` (the measurement CSV's
    definition: relative where the reference is large, scaled by atol where it is near zero). Both
    maxima are ``inf`` when an element is NaN or infinite. ``exceeded`` counts the elements beyond
    the tolerance, non-finite ones included (``nonfinite`` counts those alone).

    ``checked`` is how many of the output's ``elements`` were compared with the reference: all of
    them by :func:`verify`, the sampled ones by :func:`verify_at` (whose maxima are then over those;
    non-finite values are still sought, and counted, in every element)."""

    model_config = ConfigDict(frozen=True)

    ok: bool
    max_abs_error: float
    max_rel_error: float
    tolerance: str
    exceeded: int
    nonfinite: int
    elements: int
    checked: int

    @property
    def sampled(self) -> bool:
        return self.checked < self.elements

    @property
    def summary(self) -> str:
        """One line for the measurement CSV's ``detail``: how many elements failed, of how many
        checked, and whether the check was sampled (empty for a full check that passed)."""
        scope = (
            f"{self.checked} sampled elements (of {self.elements}; non-finite sought in all)"
            if self.sampled
            else f"{self.elements} elements"
        )
        if self.ok:
            return f"verified at {scope}" if self.sampled else ""
        return f"{self.exceeded} of {scope} beyond tolerance"


def _partial_sum_bound(terms: int) -> float:
    """sum_{j=1..terms} sqrt(j): the sum of the partial sums' standard deviations (in units of
    one term's), exactly for small counts, by its integral beyond."""
    if terms <= 4096:
        return float(np.sqrt(np.arange(1, terms + 1, dtype=np.float64)).sum())
    return (2 / 3) * terms**1.5 + 0.5 * terms**0.5 - 0.2078862250607981  # Euler-Maclaurin, zeta(-1/2)


def tolerance(problem: ConvProblem, variant: Variant | str, dtype: Dtype | str) -> Tolerance:
    """The bound a correct kernel's output keeps to, for operands from
    :func:`~ckspace.verify.reference.random_operands`.

    With K the GEMM's reduction length, k_b the split-K factor, n = ceil(K / k_b) the terms of one
    partial sum, eps_out one ulp of the output dtype at 1 and eps_acc that of float32, and
    sigma = INPUT_BOUND^2 / 3 the standard deviation of one product of two inputs (uniform on
    [-1, 1]: variance 1/3 each):

    * ``rtol = eps_out``: the conversion of the float32 result to the output dtype errs by less
      than one ulp of the result, whether it rounds to nearest or truncates (CK Tile's default
      float-to-bf16 conversion truncates).
    * ``atol = lambda * sigma * (eps_acc * (k_b * S(n) + sqrt(K (K + 3) / 2)) + eps_out * sqrt(n) * S(k_b))``
      for k_b > 1, without the last term for k_b = 1, where S(m) = sum_{j<=m} sqrt(j) ~ (2/3) m^1.5:

      - the kernel's float32 accumulation: each of the n additions into the accumulator errs by at
        most one ulp of the partial sum s_j, whose standard deviation is sigma * sqrt(j) (zero-mean
        terms); bounding every s_j by lambda of those and letting every rounding err the same way
        gives ``eps_acc * lambda * sigma * S(n)`` per partial sum, k_b of them. It holds for any
        summation order and for accumulators that truncate, since no cancellation of rounding
        errors is assumed.
      - the reference's float32 accumulation (round-to-nearest on the CPU, independent rounding
        errors: Higham & Mary's probabilistic model; at worst recursive summation): variance at
        most ``eps_acc^2 sigma^2 (K (K + 1) / 2 + K)`` including the products' own rounding.
      - split-K: the k_b partial results are added in the output dtype (atomically, CK's
        bwd_weight with fp16/bf16; fp32 workspaces err less), each addition by at most one output
        ulp of the running sum, whose standard deviation after i partials is sigma * sqrt(i n).

    Against CK Tile's own examples (``rtol = max(u_out, n u_acc)``, ``atol`` that times the
    largest reference value, u = half an ulp), this rtol is twice as large for bf16/fp16 (CK
    Tile's truncating conversion can cost a whole ulp) and the atol much smaller for long fp32
    reductions (it is scaled by the results' spread, sigma sqrt(K), not by n u times their maximum).
    """
    variant = Variant.parse(variant)
    k = problem.gemm_mnk(variant)[2]
    k_batch = problem.k_batch
    if k_batch > 1 and variant is not Variant.BWD_WEIGHT:
        raise InvalidInputError(f"k_batch={k_batch} for {variant.value}: only bwd_weight splits K; valid: 1")
    out_ulp = float(ml_dtypes.finfo(numpy_dtype(dtype)).eps)
    sigma = INPUT_BOUND**2 / 3
    n = -(-k // k_batch)
    accumulation = ACCUMULATOR_ULP * (k_batch * _partial_sum_bound(n) + math.sqrt(k * (k + 3) / 2))
    split = out_ulp * math.sqrt(n) * _partial_sum_bound(k_batch) if k_batch > 1 else 0.0
    return Tolerance(rtol=out_ulp, atol=CONFIDENCE * sigma * (accumulation + split))


class _Errors(NamedTuple):
    exceeded: int
    nonfinite: int
    max_abs: float
    max_rel: float


def _compare(kernel: np.ndarray, reference: np.ndarray, tol: Tolerance) -> _Errors:
    """The errors of flat kernel values against flat float32 reference values of equal length."""
    error = kernel.astype(np.float32)  # a copy, worked on in place: outputs run to 10^7 elements
    np.subtract(error, reference, out=error)
    np.abs(error, out=error)
    largest = float(error.max()) if error.size else 0.0
    nonfinite = 0 if math.isfinite(largest) else int(error.size - np.count_nonzero(np.isfinite(error)))
    denominator = np.abs(reference)
    denominator += tol.atol  # |reference| + atol: max_rel_error's denominator
    if denominator.size and not math.isfinite(float(denominator.max())):
        raise InvalidInputError("the reference holds NaN or inf: it was not computed from finite operands")
    bound = denominator * tol.rtol
    bound += tol.atol * (1 - tol.rtol)  # = atol + rtol * |reference|
    exceeded = int(np.count_nonzero(error > bound)) + (int(np.count_nonzero(np.isnan(error))) if nonfinite else 0)
    if nonfinite:
        return _Errors(exceeded, nonfinite, math.inf, math.inf)
    np.divide(error, denominator, out=error)
    return _Errors(exceeded, 0, largest, float(error.max()) if error.size else 0.0)


def _result(errors: _Errors, tol: Tolerance, elements: int, checked: int) -> Verification:
    result = Verification(
        ok=errors.exceeded == 0,
        max_abs_error=errors.max_abs,
        max_rel_error=errors.max_rel,
        tolerance=tol.text,
        exceeded=errors.exceeded,
        nonfinite=errors.nonfinite,
        elements=elements,
        checked=checked,
    )
    if not result.ok:
        log.debug("verification failed: %s (tolerance %s, max abs %g)", result.summary, tol.text, errors.max_abs)
    return result


def verify(c_kernel: np.ndarray, c_reference: np.ndarray, tol: Tolerance) -> Verification:
    """Compare a kernel's output (its raw buffer as an array in the kernel's dtype, any shape with
    the reference's element count) with the float32 reference. NaN or inf in the output is always
    wrong; a different element count is an error."""
    reference = np.asarray(c_reference, dtype=np.float32).reshape(-1)
    kernel = np.asarray(c_kernel)
    if kernel.size != reference.size:
        raise InvalidInputError(f"the kernel's output has {kernel.size} elements; the reference has {reference.size}")
    return _result(_compare(kernel.reshape(-1), reference, tol), tol, reference.size, reference.size)


NONFINITE_CHUNK = 1 << 24
"""Elements scanned for NaN/inf at once (bounds the temporaries on a 10^9-element output)."""


def count_nonfinite(values: np.ndarray) -> int:
    """NaN and inf values in a floating-point array of any size, from the exponent bits (all ones),
    in chunks: a pass over the raw integers is twice as fast as ``isfinite`` on bf16 and needs no
    float copy."""
    flat = np.ravel(values)
    info = ml_dtypes.finfo(flat.dtype)
    bits = flat.view(np.dtype(f"u{flat.dtype.itemsize}"))
    mask = bits.dtype.type(((1 << info.nexp) - 1) << info.nmant)
    count = 0
    for start in range(0, bits.size, NONFINITE_CHUNK):
        chunk = bits[start : start + NONFINITE_CHUNK] & mask
        count += int(np.count_nonzero(chunk == mask))
    return count


def verify_at(c_kernel: np.ndarray, positions: np.ndarray, values: np.ndarray, tol: Tolerance) -> Verification:
    """:func:`verify` at sampled elements: the kernel's output (any shape, in its dtype) at flat
    ``positions`` against the reference ``values`` there
    (:func:`ckspace.verify.sampled.reference_at`), and NaN or inf anywhere in the output
    (that scan is cheap and covers every element: a fault that writes NaN into one tile must not
    hide between samples). ``checked`` says on how many elements the values were compared."""
    kernel = np.asarray(c_kernel).reshape(-1)
    positions = np.asarray(positions)
    values = np.asarray(values, dtype=np.float32).reshape(-1)
    if positions.shape != values.shape or (positions.size and not np.issubdtype(positions.dtype, np.integer)):
        raise InvalidInputError(
            f"positions ({positions.dtype} {positions.shape}) and values {values.shape} must be "
            f"1-D arrays of equal length, positions integers"
        )
    if positions.size and (positions.min() < 0 or positions.max() >= kernel.size):
        raise InvalidInputError(
            f"positions run from {positions.min()} to {positions.max()}; the kernel's output has {kernel.size} elements"
        )
    sampled = _compare(kernel[positions], values, tol)
    nonfinite = count_nonfinite(kernel)
    errors = sampled._replace(exceeded=sampled.exceeded + nonfinite - sampled.nonfinite, nonfinite=nonfinite)
    if nonfinite:
        errors = errors._replace(max_abs=math.inf, max_rel=math.inf)
    return _result(errors, tol, kernel.size, positions.size)
