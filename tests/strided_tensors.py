"""Tensors as frameworks lay them out: strides of PyTorch's memory formats and of views, arrays
placed at strides and read back, PyTorch's logical dims in and out of tests/naive_conv.py's layout,
and hipDNN's activations from their definitions. Shared by the hipDNN plugin's tests and the C API's
strided-run tests."""

from __future__ import annotations

import numpy as np


def channels_last(dims: list[int]) -> list[int]:
    """Packed strides of logical (d0, d1, spatial...) dims with d1 innermost, then the spatial
    dimensions, d0 outermost: PyTorch's channels_last / channels_last_3d."""
    order = [1, *range(len(dims) - 1, 1, -1), 0]
    strides, step = [0] * len(dims), 1
    for d in order:
        strides[d] = step
        step *= dims[d]
    return strides


def row_major(dims: list[int]) -> list[int]:
    """Packed NCHW strides."""
    strides, step = [0] * len(dims), 1
    for d in reversed(range(len(dims))):
        strides[d] = step
        step *= dims[d]
    return strides


MEMORY_FORMATS = {"contiguous": row_major, "channels_last": channels_last}
"""PyTorch's memory formats a hipDNN graph's strides come in (``hipdnn_conv_suggest_memory_format``:
channels-last when the input or weight is, else contiguous NCHW, PyTorch's default)."""
ACTIVATIONS = {
    "RELU_FWD": lambda x, a: np.where(
        x > 0, np.minimum(x, a.get("relu_upper_clip", np.inf)), a.get("relu_lower_clip_slope", 0.0) * x
    ),
    "SIGMOID_FWD": lambda x, a: 1 / (1 + np.exp(-x)),
    "TANH_FWD": lambda x, a: np.tanh(x),
    "ELU_FWD": lambda x, a: np.where(x > 0, x, a.get("elu_alpha", 1.0) * (np.exp(x) - 1)),
}
"""hipDNN's activations the plugin fuses, from their definitions (numpy, float64)."""


def to_naive(p: dict, role: str, logical: np.ndarray) -> np.ndarray:
    """A role's logical array (PyTorch's dims) in tests/naive_conv.py's layout."""
    g = p["G"]
    if role == "weight":  # (K, C/G, filter) -> (G, K/G, filter, C/G)
        k, cg, *f = logical.shape
        return np.moveaxis(logical.reshape(g, k // g, cg, *f), 2, -1)
    n, c, *sp = logical.shape  # (N, C, image) -> (N, image, G, C/G)
    return np.moveaxis(np.moveaxis(logical.reshape(n, g, c // g, *sp), 1, -1), 1, -1)


def from_naive(p: dict, role: str, naive: np.ndarray) -> np.ndarray:
    """:func:`to_naive` undone."""
    if role == "weight":
        g, kg, *f, cg = naive.shape
        return np.moveaxis(naive, -1, 2).reshape(g * kg, cg, *f)
    n, *sp, g, cg = naive.shape
    return np.moveaxis(np.moveaxis(naive, -2, 1), -1, 2).reshape(n, g * cg, *sp)


def span(dims: list[int], strides: list[int]) -> int:
    """Elements a tensor of these dims and strides reaches."""
    return sum((d - 1) * s for d, s in zip(dims, strides, strict=True)) + 1


def placed(array: np.ndarray, strides: list[int]) -> np.ndarray:
    """``array`` laid out in memory at ``strides`` (elements), in a buffer of its span."""
    buffer = np.zeros(span(list(array.shape), strides), dtype=array.dtype)
    view = np.lib.stride_tricks.as_strided(buffer, array.shape, [s * array.itemsize for s in strides])
    view[...] = array
    return buffer


def gathered(buffer: np.ndarray, dims: list[int], strides: list[int]) -> np.ndarray:
    return np.lib.stride_tricks.as_strided(buffer, dims, [s * buffer.itemsize for s in strides]).copy()


def padded(dims: list[int]) -> list[int]:
    """NCHW with every row 3 elements longer than its width (a view into a wider tensor): strides
    no packed layout has, where a conversion's tails matter."""
    strides, step = [0] * len(dims), 1
    for d in reversed(range(len(dims))):
        strides[d] = step
        step *= dims[d] + (3 if d == len(dims) - 1 else 0)
    return strides


def width_outermost(dims: list[int]) -> list[int]:
    """Packed, the innermost spatial dimension outermost: a permutation neither format has."""
    order = [0, 1, *range(2, len(dims) - 1)][::-1]  # innermost first, then the width outermost
    strides, step = [0] * len(dims), 1
    for d in [*order, len(dims) - 1]:
        strides[d] = step
        step *= dims[d]
    return strides
