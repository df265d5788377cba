"""Verifying big problems at sampled output elements: which elements, their exact values, and when.

The full reference (:func:`ckspace.verify.reference.reference`) of the largest shipped
problems does not fit a bench worker: the biggest forward problem of ``forward_bench300`` (13
TFLOP) would take 13 minutes of CPU at ``bench/reference.py``'s quiet-machine forward rate (26-110
at the rates measured here under load) and float32 copies of its 7.3e8-element tensors (~12 GB),
and it is recomputed per batch. Above :data:`SAMPLING_MACS` (or :data:`SAMPLING_ELEMENTS`) a
worker instead computes the reference at :data:`SAMPLES` output elements (:func:`sample_positions`,
:func:`reference_at`) and holds the kernel's output to them with
:func:`~ckspace.verify.comparison.verify_at`, which still fails NaN or inf anywhere.

:func:`reference_at` states every sampled element's sum as a (position, reduction index) grid: the
flat offsets it reads in a and b are a per-position part plus a per-reduction-index part, and an
image coordinate (the same sum of parts per spatial axis) decides whether the term exists (inside
the unpadded image; for bwd_data, also on the stride's lattice). The reduction index splits into
an outer part that decides that (filter taps; bwd_weight's output pixels) and an inner part that
never does (channels; bwd_weight's images). Chunks of the grid are gathered (contiguous channel
runs as rows, the rest with ``take``) and reduced by one einsum each, in float32 like the full
reference.
"""

from __future__ import annotations

import logging
import math
from itertools import product
from typing import NamedTuple

import numpy as np

from ckspace.core.errors import InvalidInputError
from ckspace.core.vocab import Variant
from ckspace.verify.reference import check_operands, operand_shapes, spatial_letters
from ckspace.workloads.operands import OPERANDS, TENSOR_LAYOUTS
from ckspace.workloads.problem import ConvProblem

log = logging.getLogger(__name__)

SAMPLES = 4096
"""Elements a sampled check compares: a fault that corrupts a fraction f of the output escapes it
with probability (1 - f)^4096 (f = 0.1 %: 1.7 %; f = 1 %: 1e-18), while the sampled reference of
the largest forward problem costs 0.2 s and of the largest bwd_weight one 3 s (``bench/reference.py``)."""

SAMPLING_MACS = 5 * 10**9
"""Multiply-adds above which the full reference is not computed. Measured here (2 shared cores,
load ~5, bf16, N=4-8, C=K=128-256, 28x28, 3x3, G=1 and 4): the full reference runs at 1.0-4.2
G MAC/s forward, 1.8-7.6 bwd_data and 0.5-1.6 bwd_weight, so 5e9 MACs is 1-10 s per problem, paid
again in every batch that runs the problem. 44-46 problems of each shipped forward list of 300 are
above it (up to 6.6e12 MACs: tens of minutes to hours), and 200-240 of each synthetic backward list."""

SAMPLING_ELEMENTS = 1 << 27
"""Output elements above which the full check is not made, however few the MACs: the full check
holds about three float32 copies of the output (the reference's accumulator, its layout copy and
verify's error array), 1.5 GB at 2^27 elements. A 1x1 forward of forward_bench300 (C=12, K=72,
1024x1024, N=4: 3e8 output elements, only 3.6e9 MACs) would need 3.6 GB."""

CHUNK = 1 << 20
"""Terms (position x reduction index) gathered at once: ~30 MB of temporaries per chunk."""


def use_sampling(problem: ConvProblem, variant: Variant | str) -> bool:
    """Whether a worker checks the problem at :data:`SAMPLES` elements instead of all: above
    :data:`SAMPLING_MACS` or :data:`SAMPLING_ELEMENTS`, when the output has more elements than that."""
    elements = math.prod(operand_shapes(problem, variant).c)
    return elements > SAMPLES and (problem.flops // 2 > SAMPLING_MACS or elements > SAMPLING_ELEMENTS)


def _c_layout(problem: ConvProblem, variant: Variant | str) -> tuple[str, tuple[int, ...]]:
    tensor = OPERANDS[Variant.parse(variant)].c.tensor
    return TENSOR_LAYOUTS[problem.ndim][tensor], operand_shapes(problem, variant).c


def _quotas(total: int, capacity: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """``total`` draws split as evenly as the capacities allow (a full group's share goes to the
    others); the remainder that cannot be split evenly goes to groups chosen at random."""
    quota = np.zeros(len(capacity), dtype=np.int64)
    left = total
    while left:
        open_ = np.flatnonzero(capacity > quota)
        share = np.minimum(capacity[open_] - quota[open_], left // len(open_))
        if not share.any():
            quota[rng.choice(open_, left, replace=False)] += 1
            break
        quota[open_] += share
        left -= int(share.sum())
    return quota


def sample_positions(problem: ConvProblem, variant: Variant | str, count: int, seed: int) -> np.ndarray:
    """Flat indices (sorted, int64) of ``count`` distinct elements of operand c in its memory
    layout, all of them when c has no more.

    Every corner of the tensor is included (the first or last index on each axis: the first and
    last element, the first and last channel of the first and last pixel, the image's corner
    pixels), since padding, tile-boundary and group-boundary bugs live there; the rest are drawn
    uniformly without replacement from ``seed``, split evenly over the groups (each group's share
    drawn inside it), so a fault confined to one group is sampled as often as any other. With
    fewer draws than groups, the groups that get one are chosen at random.
    """
    if count < 1 or seed < 0:
        raise InvalidInputError(f"count={count}, seed={seed}; valid: count >= 1, seed >= 0")
    layout, shape = _c_layout(problem, variant)
    size = math.prod(shape)
    if count >= size:
        return np.arange(size, dtype=np.int64)
    corners = np.unique(np.ravel_multi_index(np.array(list(product(*[(0, s - 1) for s in shape]))).T, shape))
    if count < corners.size:
        raise InvalidInputError(
            f"count={count} is below the {corners.size} corners of c {shape}; valid: >= {corners.size}"
        )
    axis = layout.index("G")
    groups = shape[axis]
    local_shape = shape[:axis] + shape[axis + 1 :]
    corner_index = np.unravel_index(corners, shape)
    corner_group = corner_index[axis]
    corner_local = np.ravel_multi_index(corner_index[:axis] + corner_index[axis + 1 :], local_shape)
    per_group = size // groups
    rng = np.random.default_rng(seed)
    capacity = per_group - np.bincount(corner_group, minlength=groups)
    quotas = _quotas(count - corners.size, capacity, rng)
    drawn_local, drawn_group = [], []
    for g in np.flatnonzero(quotas):
        taken = corner_local[corner_group == g]
        draw = rng.choice(per_group, int(quotas[g]) + taken.size, replace=False)
        draw = draw[~np.isin(draw, taken)][: quotas[g]]
        drawn_local.append(draw)
        drawn_group.append(np.full(draw.size, g))
    local = np.unravel_index(np.concatenate([np.zeros(0, np.int64), *drawn_local]), local_shape)
    index = (*local[:axis], np.concatenate([np.zeros(0, np.int64), *drawn_group]), *local[axis:])
    drawn = np.ravel_multi_index(index, shape)
    return np.sort(np.concatenate([corners, drawn])).astype(np.int64)


class _Axis(NamedTuple):
    """One spatial axis of the image a term reads: coordinate ``pos[p] + outer[r]`` must lie in
    [0, limit), and where the residues are given they must be equal (bwd_data's stride lattice)."""

    pos: np.ndarray
    outer: np.ndarray
    limit: int
    pos_residue: np.ndarray | None = None
    outer_residue: np.ndarray | None = None


class _Plan(NamedTuple):
    """Sampled element p's sum runs over an outer reduction index r (filter taps, or for bwd_weight
    output pixels: it decides whether a term exists) and an inner one i (channels, or images: it
    never does). Term (p, r, i) is a[a_pos[p] + a_outer[r] + a_inner[i]] * b[same with b] (flat
    offsets) when every axis admits (p, r). The split keeps the existence test off the inner
    index and lets contiguous inner runs be copied as rows."""

    a_pos: np.ndarray
    a_outer: np.ndarray
    a_inner: np.ndarray
    b_pos: np.ndarray
    b_outer: np.ndarray
    b_inner: np.ndarray
    axes: list[_Axis]


def _strides(problem: ConvProblem, tensor: str, shape: tuple[int, ...]) -> dict[str, int]:
    """Element strides of a contiguous tensor by layout letter."""
    layout = TENSOR_LAYOUTS[problem.ndim][tensor]
    strides = np.cumprod((1, *shape[:0:-1]))[::-1]
    return {letter: int(s) for letter, s in zip(layout, strides, strict=True)}


def _params(problem: ConvProblem, d: str) -> tuple[int, int, int]:
    return tuple(getattr(problem, f"{name}_{d}") for name in ("stride", "pad", "dil"))  # type: ignore[return-value]


def _taps(problem: ConvProblem) -> list[np.ndarray]:
    """Per spatial axis, the filter index of every tap (taps in the weight's memory order)."""
    sizes = [problem.filter_size(d) for d in problem.dims]
    return list(np.unravel_index(np.arange(problem.filter_volume), sizes))


def _forward_plan(problem: ConvProblem, at: dict[str, np.ndarray]) -> _Plan:
    """out[n, o, g, k] = sum over taps t and channels c of x[n, o*s - pad + t*dil, g, c] * w[g, k, t, c]."""
    shapes = operand_shapes(problem, "forward")
    xs, ws = _strides(problem, "In", shapes.a), _strides(problem, "Wei", shapes.b)
    image, filt = spatial_letters(problem, "In"), spatial_letters(problem, "Wei")
    channels = np.arange(problem.Cg)
    a_pos, b_pos = at["N"] * xs["N"] + at["G"] * xs["G"], at["G"] * ws["G"] + at["K"] * ws["K"]
    a_outer = b_outer = np.zeros(problem.filter_volume, dtype=np.int64)
    axes = []
    for j, (d, t) in enumerate(zip(problem.dims, _taps(problem), strict=True)):
        stride, pad, dil = _params(problem, d)
        pos, outer = at[image[j]] * stride - pad, t * dil
        a_pos, a_outer = a_pos + pos * xs[image[j]], a_outer + outer * xs[image[j]]
        b_outer = b_outer + t * ws[filt[j]]
        axes.append(_Axis(pos, outer, problem.input_size(d)))
    return _Plan(a_pos, a_outer, channels * xs["C"], b_pos, b_outer, channels * ws["C"], axes)


def _bwd_data_plan(problem: ConvProblem, at: dict[str, np.ndarray]) -> _Plan:
    """dx[n, i, g, c] = sum over taps t and output channels k of dy[n, o, g, k] * w[g, k, t, c] over
    the o with o*s - pad + t*dil = i. Writing i + pad = qi*s + ri and t*dil = qt*s + rt, such an o
    exists exactly when ri = rt, and is qi - qt (it must lie in [0, output size))."""
    shapes = operand_shapes(problem, "bwd_data")
    ys, ws = _strides(problem, "Out", shapes.a), _strides(problem, "Wei", shapes.b)
    image, filt = spatial_letters(problem, "Out"), spatial_letters(problem, "Wei")
    channels = np.arange(problem.Kg)
    a_pos, b_pos = at["N"] * ys["N"] + at["G"] * ys["G"], at["G"] * ws["G"] + at["C"] * ws["C"]
    a_outer = b_outer = np.zeros(problem.filter_volume, dtype=np.int64)
    axes = []
    for j, (d, t) in enumerate(zip(problem.dims, _taps(problem), strict=True)):
        stride, pad, dil = _params(problem, d)
        qi, ri = np.divmod(at[image[j]] + pad, stride)
        qt, rt = np.divmod(t * dil, stride)
        a_pos, a_outer = a_pos + qi * ys[image[j]], a_outer - qt * ys[image[j]]
        b_outer = b_outer + t * ws[filt[j]]
        axes.append(_Axis(qi, -qt, problem.output_size(d), *((ri, rt) if stride > 1 else ())))
    return _Plan(a_pos, a_outer, channels * ys["K"], b_pos, b_outer, channels * ws["K"], axes)


def _bwd_weight_plan(problem: ConvProblem, at: dict[str, np.ndarray]) -> _Plan:
    """dw[g, k, t, c] = sum over images n and output pixels o of dy[n, o, g, k] * x[n, o*s - pad + t*dil, g, c]."""
    shapes = operand_shapes(problem, "bwd_weight")
    ys, xs = _strides(problem, "Out", shapes.a), _strides(problem, "In", shapes.b)
    image, filt = spatial_letters(problem, "In"), spatial_letters(problem, "Wei")
    images = np.arange(problem.N)
    pixels = np.unravel_index(np.arange(problem.output_volume), [problem.output_size(d) for d in problem.dims])
    a_pos, b_pos = at["G"] * ys["G"] + at["K"] * ys["K"], at["G"] * xs["G"] + at["C"] * xs["C"]
    a_outer = b_outer = np.zeros(problem.output_volume, dtype=np.int64)
    axes = []
    for j, (d, o) in enumerate(zip(problem.dims, pixels, strict=True)):
        stride, pad, dil = _params(problem, d)
        pos, outer = at[filt[j]] * dil - pad, o * stride
        a_outer = a_outer + o * ys[image[j]]
        b_pos, b_outer = b_pos + pos * xs[image[j]], b_outer + outer * xs[image[j]]
        axes.append(_Axis(pos, outer, problem.input_size(d)))
    return _Plan(a_pos, a_outer, images * ys["N"], b_pos, b_outer, images * xs["N"], axes)


_PLANS = {"Out": _forward_plan, "In": _bwd_data_plan, "Wei": _bwd_weight_plan}


def _gather(flat: np.ndarray, base: np.ndarray, inner: np.ndarray) -> tuple[np.ndarray, str]:
    """The terms ``flat[base + inner]`` for a (outer, position) grid of bases, as float32, with
    their einsum axes. When the inner offsets are a contiguous run and every base starts one
    (channels innermost), whole rows are copied (axes ``rpi``); otherwise elements are taken with
    the positions innermost (axes ``rip``): positions sharing an outer index (an output pixel of
    bwd_weight) read nearby memory, so the gather stays in cache."""
    width = inner.size
    if (
        inner[0] == 0
        and (width == 1 or (np.diff(inner) == 1).all())
        and flat.size % width == 0
        and not (base % width).any()
    ):
        return flat.reshape(-1, width)[base // width].astype(np.float32), "rpi"
    return flat.take(base[:, None, :] + inner[None, :, None]).astype(np.float32), "rip"


def _sums(plan: _Plan, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Every sampled element's sum, over chunks of at most CHUNK terms (as many positions as fit
    with their whole inner reduction, then as many outer indices as fit), each gathered and
    reduced by one einsum, accumulated in float32."""
    count, outer, inner = plan.a_pos.size, plan.a_outer.size, plan.a_inner.size
    sums = np.zeros(count, dtype=np.float32)
    pos_step = max(1, min(count, CHUNK // inner))
    outer_step = max(1, min(outer, CHUNK // (pos_step * inner)))
    for p0 in range(0, count, pos_step):
        ps = slice(p0, p0 + pos_step)
        for r0 in range(0, outer, outer_step):
            rs = slice(r0, r0 + outer_step)
            valid = np.ones((min(outer, r0 + outer_step) - r0, min(count, p0 + pos_step) - p0), dtype=bool)
            for axis in plan.axes:
                coord = axis.outer[rs, None] + axis.pos[None, ps]
                valid &= (coord >= 0) & (coord < axis.limit)
                if axis.pos_residue is not None and axis.outer_residue is not None:
                    valid &= axis.outer_residue[rs, None] == axis.pos_residue[None, ps]
            a_terms, a_axes = _gather(
                a, np.where(valid, plan.a_outer[rs, None] + plan.a_pos[None, ps], 0), plan.a_inner
            )
            b_terms, b_axes = _gather(
                b, np.where(valid, plan.b_outer[rs, None] + plan.b_pos[None, ps], 0), plan.b_inner
            )
            np.multiply(a_terms, valid[:, :, None] if a_axes == "rpi" else valid[:, None, :], out=a_terms)
            sums[ps] += np.einsum(f"{a_axes},{b_axes}->p", a_terms, b_terms)
    return sums


def reference_at(
    problem: ConvProblem, variant: Variant | str, a: np.ndarray, b: np.ndarray, positions: np.ndarray
) -> np.ndarray:
    """The reference values (float32) of operand c at flat ``positions`` of its memory layout: the
    same sums as :func:`~ckspace.verify.reference.reference`, in float32 accumulation, without
    computing or holding the rest of c. Costs (positions x reduction length) multiply-adds."""
    check_operands(problem, variant, a, b)
    layout, shape = _c_layout(problem, variant)
    positions = np.asarray(positions)
    if positions.ndim != 1 or (positions.size and not np.issubdtype(positions.dtype, np.integer)):
        raise InvalidInputError(f"positions must be a 1-D array of integers; got {positions.dtype} {positions.shape}")
    size = math.prod(shape)
    if positions.size and (positions.min() < 0 or positions.max() >= size):
        raise InvalidInputError(
            f"positions run from {positions.min()} to {positions.max()}; c {shape} has {size} elements"
        )
    at = dict(zip(layout, (np.asarray(i, dtype=np.int64) for i in np.unravel_index(positions, shape)), strict=True))
    tensor = OPERANDS[Variant.parse(variant)].c.tensor
    plan = _PLANS[tensor](problem, at)
    return _sums(plan, np.ravel(a), np.ravel(b))
