"""CPU reference convolutions for verifying kernels: operand shapes, inputs and the exact result.

A bench worker verifies every (kernel, problem) pair it measures. Per problem it draws the GEMM
operands a and b once (:func:`random_operands`, in the kernel's dtype), computes the reference c
once (:func:`reference`, float32) and holds every kernel's output to it
(:mod:`ckspace.verify.comparison`). The operand roles per variant and the memory layouts are
read from :data:`ckspace.workloads.operands.OPERANDS` and :data:`~ckspace.workloads.operands.TENSOR_LAYOUTS`;
arrays are numpy arrays in those layouts (``NHWGC``: shape ``(N, Hi, Wi, G, Cg)``), so their bytes
are exactly what the kernel reads and writes.

The references are vectorised: the only Python loop is over filter taps, each tap one batched
matmul (over groups) between a strided view of the padded input and that tap's weights, all in
float32 (float32 accumulation, like the kernels). Backward data is the adjoint of forward (each
tap's product scattered back into a strided view of the padded input gradient), backward weight
the per-tap product of the output gradient with the same strided input views.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterator
from itertools import product
from typing import NamedTuple

import ml_dtypes
import numpy as np

from ckspace.core.errors import InvalidInputError
from ckspace.core.vocab import Dtype, Variant
from ckspace.workloads.operands import OPERANDS, TENSOR_LAYOUTS, Tensor
from ckspace.workloads.problem import ConvProblem

log = logging.getLogger(__name__)

INPUT_BOUND = 1.0
"""Inputs are drawn uniformly from [-INPUT_BOUND, INPUT_BOUND] (see :func:`random_operands`); the
tolerance's error model (:mod:`ckspace.verify.comparison`) reads it."""

_NUMPY_DTYPES: dict[Dtype, np.dtype] = {
    Dtype.FP16: np.dtype(np.float16),
    Dtype.BF16: np.dtype(ml_dtypes.bfloat16),
    Dtype.FP32: np.dtype(np.float32),
}

# Layout letters of the spatial axes, outermost first, per tensor: the image axes of input and
# output, the filter axes of the weight (TENSOR_LAYOUTS spells them this way).
_SPATIAL_LETTERS: dict[Tensor, str] = {"In": "DHW", "Out": "DHW", "Wei": "ZYX"}
_CHANNEL_LETTERS = {"C": "Cg", "K": "Kg"}


def numpy_dtype(dtype: Dtype | str) -> np.dtype:
    """The numpy dtype of a kernel dtype: bf16 is ml_dtypes' ``bfloat16`` (JAX's numpy extension),
    so bf16 buffers are real bf16 bits, converted with round-to-nearest-even."""
    return _NUMPY_DTYPES[Dtype.parse(dtype)]


class OperandShapes(NamedTuple):
    """Shapes of the implicit GEMM's operands in their memory layouts."""

    a: tuple[int, ...]
    b: tuple[int, ...]
    c: tuple[int, ...]


class OperandBytes(NamedTuple):
    """Byte sizes of the operands in the kernel's dtype (the device buffers to allocate)."""

    a: int
    b: int
    c: int


def _spatial_sizes(problem: ConvProblem, tensor: Tensor) -> tuple[int, ...]:
    sizes = {"In": problem.input_size, "Out": problem.output_size, "Wei": problem.filter_size}[tensor]
    return tuple(sizes(d) for d in problem.dims)


def _logical_order(tensor: Tensor, ndim: int) -> str:
    """The axis order the computation below works in: batch (or group and output channel) first,
    the spatial axes, then group and channel (or channel) last."""
    spatial = _SPATIAL_LETTERS[tensor][3 - ndim :]
    return {"In": f"N{spatial}GC", "Out": f"N{spatial}GK", "Wei": f"GK{spatial}C"}[tensor]


def spatial_letters(problem: ConvProblem, tensor: Tensor) -> str:
    """The layout letters of a tensor's spatial axes, outermost first (``HW`` for a 2D image,
    ``YX`` for a 2D filter)."""
    return _SPATIAL_LETTERS[tensor][3 - problem.ndim :]


def tensor_shape(problem: ConvProblem, tensor: Tensor) -> tuple[int, ...]:
    """Shape of a convolution tensor (``In``, ``Wei``, ``Out``) in its memory layout."""
    layout = TENSOR_LAYOUTS[problem.ndim][tensor]
    spatial = dict(zip(_SPATIAL_LETTERS[tensor][3 - problem.ndim :], _spatial_sizes(problem, tensor), strict=True))
    sizes = {"N": problem.N, "G": problem.G, "C": problem.Cg, "K": problem.Kg, **spatial}
    return tuple(sizes[letter] for letter in layout)


def operand_shapes(problem: ConvProblem, variant: Variant | str) -> OperandShapes:
    """Shapes of a, b and c for a variant (forward: input, weight, output; see ``OPERANDS``)."""
    gemm = OPERANDS[Variant.parse(variant)]
    return OperandShapes(*(tensor_shape(problem, op.tensor) for op in (gemm.a, gemm.b, gemm.c)))


def operand_bytes(problem: ConvProblem, variant: Variant | str, dtype: Dtype | str) -> OperandBytes:
    """Byte sizes of a, b and c in the kernel's dtype (c is written in the kernel's dtype too)."""
    itemsize = numpy_dtype(dtype).itemsize
    return OperandBytes(*(math.prod(shape) * itemsize for shape in operand_shapes(problem, variant)))


def operand_from_buffer(
    buffer: bytes | bytearray | memoryview,
    problem: ConvProblem,
    variant: Variant | str,
    dtype: Dtype | str,
    operand: str = "c",
) -> np.ndarray:
    """A raw buffer (e.g. the kernel's output copied to the host) as an array of the operand's
    shape in the kernel's dtype, without copying. A wrong byte count is an error, not a reshape."""
    if operand not in OperandShapes._fields:
        raise InvalidInputError(f"unknown operand {operand!r}; valid: a, b, c")
    shape = getattr(operand_shapes(problem, variant), operand)
    np_dtype = numpy_dtype(dtype)
    size = memoryview(buffer).nbytes
    if size != math.prod(shape) * np_dtype.itemsize:
        raise InvalidInputError(
            f"operand {operand} buffer holds {size} bytes; {Dtype.parse(dtype).value} "
            f"{shape} needs {math.prod(shape) * np_dtype.itemsize}"
        )
    return np.frombuffer(buffer, dtype=np_dtype).reshape(shape)


def random_operands(
    problem: ConvProblem, variant: Variant | str, dtype: Dtype | str, seed: int
) -> tuple[np.ndarray, np.ndarray]:
    """Operands a and b, drawn uniformly from [-1, 1] and rounded to the kernel's dtype.

    Why this range: zero-mean values make the sums cancel as real activations and gradients do, so
    outputs grow like the square root of the reduction length (about ``sqrt(K)/3``), far from fp16's
    overflow at 65504 for any reduction a real problem has, and never flushed to zero in bf16;
    values of order one use every mantissa bit of the dtype, so a kernel that loses precision
    (reads bf16 as fp16, truncates fp32 inputs) shows it; and it is the range CK Tile's own
    convolution examples fill with. Generating in the dtype (not float16 data for a bf16 kernel, as
    upstream's harness does) means the reference computes on exactly the values the kernel reads.

    a and b come from independent streams of ``seed`` (``SeedSequence.spawn``), so each depends
    only on the seed and its own shape.
    """
    np_dtype = numpy_dtype(dtype)
    draw = np.float64 if np_dtype == np.float32 else np.float32
    streams = np.random.SeedSequence(seed).spawn(2)
    arrays = []
    for shape, stream in zip(operand_shapes(problem, variant)[:2], streams, strict=True):
        rng = np.random.default_rng(stream)
        out = np.empty(math.prod(shape), dtype=np_dtype)
        # drawn in chunks (the generator's stream is the same as one draw of the whole), so the
        # temporaries stay small beside operands of gigabytes
        for start in range(0, out.size, GENERATION_CHUNK):
            values = rng.random(min(GENERATION_CHUNK, out.size - start), dtype=draw)
            out[start : start + values.size] = (2 * INPUT_BOUND) * values - INPUT_BOUND
        arrays.append(out.reshape(shape))
    return arrays[0], arrays[1]


GENERATION_CHUNK = 1 << 22
"""Elements drawn at a time by :func:`random_operands` (even, so float32 draws, which the generator
makes in pairs from 64-bit words, continue the same stream across chunks)."""


def _to_logical(array: np.ndarray, problem: ConvProblem, tensor: Tensor) -> np.ndarray:
    """The tensor as float32 in the computation's axis order (a view when the layout already is)."""
    layout = TENSOR_LAYOUTS[problem.ndim][tensor]
    logical = _logical_order(tensor, problem.ndim)
    return np.asarray(array, dtype=np.float32).transpose([layout.index(letter) for letter in logical])


def _from_logical(array: np.ndarray, problem: ConvProblem, tensor: Tensor) -> np.ndarray:
    layout = TENSOR_LAYOUTS[problem.ndim][tensor]
    logical = _logical_order(tensor, problem.ndim)
    return np.ascontiguousarray(array.transpose([logical.index(letter) for letter in layout]))


def _taps(problem: ConvProblem) -> Iterator[tuple[tuple[int, ...], tuple[slice, ...]]]:
    """Each filter tap and the strided slice of the padded input it reads for every output pixel:
    output o reads padded input o * stride + tap * dilation."""
    ranges = [range(problem.filter_size(d)) for d in problem.dims]
    for tap in product(*ranges):
        slices = []
        for t, d in zip(tap, problem.dims, strict=True):
            stride, dil = getattr(problem, f"stride_{d}"), getattr(problem, f"dil_{d}")
            start = t * dil
            slices.append(slice(start, start + (problem.output_size(d) - 1) * stride + 1, stride))
        yield tap, tuple(slices)


def _pad_widths(problem: ConvProblem) -> list[tuple[int, int]]:
    pads = [(getattr(problem, f"pad_{d}"),) * 2 for d in problem.dims]
    return [(0, 0), *pads, (0, 0), (0, 0)]


def _forward(problem: ConvProblem, x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """out[n, o, g, k] = sum over taps t and channels c of x_padded[n, o*s + t*d, g, c] * w[g, k, t, c]."""
    xp = np.pad(x, _pad_widths(problem))
    pixels = problem.N * problem.output_volume
    acc = np.zeros((problem.G, pixels, problem.Kg), dtype=np.float32)
    for tap, slices in _taps(problem):
        rows = xp[(slice(None), *slices)].reshape(pixels, problem.G, problem.Cg).transpose(1, 0, 2)
        acc += np.matmul(rows, w[(slice(None), slice(None), *tap)].transpose(0, 2, 1))
    out_spatial = _spatial_sizes(problem, "Out")
    return acc.transpose(1, 0, 2).reshape(problem.N, *out_spatial, problem.G, problem.Kg)


def _bwd_data(problem: ConvProblem, dy: np.ndarray, w: np.ndarray) -> np.ndarray:
    """The adjoint of :func:`_forward` in x: each tap's dy @ w[tap] added back where forward read it."""
    pad = _pad_widths(problem)
    padded = [
        problem.N,
        *(s + 2 * p[0] for s, p in zip(_spatial_sizes(problem, "In"), pad[1:-2], strict=True)),
        problem.G,
        problem.Cg,
    ]
    dxp = np.zeros(padded, dtype=np.float32)
    pixels = problem.N * problem.output_volume
    rows = np.ascontiguousarray(dy.reshape(pixels, problem.G, problem.Kg).transpose(1, 0, 2))
    out_spatial = _spatial_sizes(problem, "Out")
    for tap, slices in _taps(problem):
        part = np.matmul(rows, w[(slice(None), slice(None), *tap)])  # (G, pixels, Cg)
        dxp[(slice(None), *slices)] += part.transpose(1, 0, 2).reshape(problem.N, *out_spatial, problem.G, problem.Cg)
    crop = tuple(slice(p, p + s) for (p, _), s in zip(pad[1:-2], _spatial_sizes(problem, "In"), strict=True))
    return dxp[(slice(None), *crop)]


def _bwd_weight(problem: ConvProblem, dy: np.ndarray, x: np.ndarray) -> np.ndarray:
    """dw[g, k, t, c] = sum over images and output pixels o of dy[n, o, g, k] * x_padded[n, o*s + t*d, g, c]."""
    xp = np.pad(x, _pad_widths(problem))
    pixels = problem.N * problem.output_volume
    cols = np.ascontiguousarray(dy.reshape(pixels, problem.G, problem.Kg).transpose(1, 2, 0))  # (G, Kg, pixels)
    dw = np.empty((problem.G, problem.Kg, *_spatial_sizes(problem, "Wei"), problem.Cg), dtype=np.float32)
    for tap, slices in _taps(problem):
        rows = xp[(slice(None), *slices)].reshape(pixels, problem.G, problem.Cg).transpose(1, 0, 2)
        dw[(slice(None), slice(None), *tap)] = np.matmul(cols, rows)
    return dw


def check_operands(problem: ConvProblem, variant: Variant | str, a: np.ndarray, b: np.ndarray) -> None:
    """Refuse operands whose shapes are not the problem's a and b (e.g. a and b exchanged)."""
    gemm = OPERANDS[Variant.parse(variant)]
    shapes = operand_shapes(problem, variant)
    for name, array, shape in (("a", a, shapes.a), ("b", b, shapes.b)):
        if tuple(np.shape(array)) != shape:
            raise InvalidInputError(
                f"operand {name} ({gemm.operand('vec_' + name).description}) has shape "
                f"{tuple(np.shape(array))}; the problem needs {shape}"
            )


def reference(problem: ConvProblem, variant: Variant | str, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The exact convolution result c (float32, c's memory layout) of operands a and b, computed
    with float32 accumulation. Split-K (``problem.k_batch``) does not change it: it changes how a
    kernel accumulates, which the tolerance accounts for."""
    gemm = OPERANDS[Variant.parse(variant)]
    check_operands(problem, variant, a, b)
    operands = {
        gemm.a.tensor: _to_logical(a, problem, gemm.a.tensor),
        gemm.b.tensor: _to_logical(b, problem, gemm.b.tensor),
    }
    if gemm.c.tensor == "Out":
        c = _forward(problem, operands["In"], operands["Wei"])
    elif gemm.c.tensor == "In":
        c = _bwd_data(problem, operands["Out"], operands["Wei"])
    else:
        c = _bwd_weight(problem, operands["Out"], operands["In"])
    return _from_logical(c, problem, gemm.c.tensor)
