"""The hipDNN graphs PyTorch sends for a convolution layer, as hipDNN's wire format states them.

``hipdnn census`` asks a plugin about exactly the graphs PyTorch on ROCm would send it, so this
module transcribes what those graphs are. Two sources decide them:

* PyTorch's builder, ``aten/src/ATen/native/hipdnn/Conv_hipdnn.cpp`` (ROCm/pytorch): the uids
  (``HipdnnConvUid``: forward x 1, w 2, y 3, bias 4; backward-data dy 1, w 2, dx 3;
  backward-weight dy 1, x 2, dw 3), the graph's io data type (the input's), compute FLOAT and
  intermediate FLOAT (forward and backward-data; backward-weight sets no intermediate type), the
  tensors it states (``createTensorAttributes``: the tensor's own dims and strides), the memory
  format (channels-last when the input or the weight is, for 4- and 5-dimensional weights;
  contiguous NCHW otherwise), and a bias as a second node: the convolution writes a virtual tensor
  of the output's dims and strides, and a pointwise ADD (compute type the io type) adds
  ``reshape_bias``'s ``[1, K, 1, 1(, 1)]`` view of the contiguous ``[K]`` bias (strides
  ``[K, 1, 1, 1(, 1)]``) into y. PyTorch's backward passes no bias (its gradient is a sum, not a
  convolution), so only forward graphs carry one.
* hipDNN's frontend (ROCm/rocm-libraries ``projects/hipdnn/frontend``), which fills in what
  PyTorch leaves unset: the output tensor's dims and strides. ``ConvolutionFpropNode`` gives y the
  stride order of x, ``ConvolutionDgradNode`` gives dx the stride order of dy,
  ``ConvolutionWgradNode`` gives dw the stride order of x (``extractStrideOrder`` and
  ``generateStrides`` of ``hipdnn_data_sdk/utilities/ShapeUtilities.hpp``, transcribed below with
  their tie rule), and ``PointwiseNode`` gives y the dims and strides of its input of equal dims.
  Padding is symmetric (``set_padding`` sets pre and post), the mode cross-correlation.

The frontend also gives the virtual convolution output a uid of its own, which PyTorch does not
set; ckspace gives it :data:`UID_CONV_OUT` (5), the least uid PyTorch's enum leaves free, so it
cannot collide with a tensor PyTorch names. Tensor and node names are ckspace's (hipDNN derives
its own; no plugin reads them).

A transposed convolution's forward is a backward-data graph in PyTorch (and its backward-data a
forward graph); a problems CSV does not say a layer is transposed, so the census sends each row's
convolution as an ordinary one. Graphs are returned in hipDNN's field names as flatc's JSON reads
them (:mod:`ckspace.census.hipdnn_wire` serializes them with the schema ckspace renders).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from ckspace.core.vocab import Dtype, Variant
from ckspace.emit.hipdnn_plugin import WIRE_DTYPES
from ckspace.workloads.problem import ConvProblem

SOURCE = "ROCm/pytorch aten/src/ATen/native/hipdnn/Conv_hipdnn.cpp"
UID_INPUT, UID_WEIGHT, UID_OUTPUT, UID_BIAS = 1, 2, 3, 4
"""PyTorch's ``HipdnnConvUid``; the backward directions alias them (dy is 1, dx and dw are 3)."""
UID_CONV_OUT = 5
"""The virtual convolution output of a graph with bias: ckspace's choice (see the module docstring)."""
POINTWISE_ADD = "ADD"
"""hipDNN's ``PointwiseMode`` of the bias node."""
ATTRIBUTES = {
    Variant.FORWARD: "ConvolutionFwdAttributes",
    Variant.BWD_DATA: "ConvolutionBwdAttributes",
    Variant.BWD_WEIGHT: "ConvolutionWrwAttributes",
}


class MemoryFormat(StrEnum):
    """The memory format of a layer's tensors in PyTorch (``torch.contiguous_format`` is the default)."""

    CONTIGUOUS = "contiguous"
    CHANNELS_LAST = "channels_last"


@dataclass(frozen=True)
class Layer:
    """A convolution layer of a workload: its convolution and whether it adds a bias."""

    problem: ConvProblem
    bias: bool = False


def contiguous_strides(dims: Sequence[int]) -> list[int]:
    """PyTorch's contiguous (row-major) strides of ``dims``."""
    strides, step = [0] * len(dims), 1
    for d in reversed(range(len(dims))):
        strides[d] = step
        step *= max(dims[d], 1)
    return strides


def channels_last_strides(dims: Sequence[int]) -> list[int]:
    """PyTorch's ``channels_last`` (4 dims) / ``channels_last_3d`` (5 dims) strides: dimension 1
    innermost, then the spatial ones from the last, dimension 0 outermost."""
    order = [1, *range(len(dims) - 1, 1, -1), 0]
    strides, step = [0] * len(dims), 1
    for d in order:
        strides[d] = step
        step *= max(dims[d], 1)
    return strides


def extract_stride_order(strides: Sequence[int]) -> list[int]:
    """hipDNN's ``extractStrideOrder``: each dimension's rank from the innermost (0). Dimensions
    are sorted by decreasing stride, stably; when dimension 0 has the first largest stride, 1 the
    first smallest and some later dimension a larger stride than 1's, dimension 1 is moved last
    before the sort (an N...C layout, so that C stays innermost among equal strides)."""
    n = len(strides)
    if n == 0:
        return []
    indices = list(range(n))
    first_max = strides.index(max(strides))
    first_min = strides.index(min(strides))
    if first_max == 0 and first_min == 1 and any(strides[i] > strides[first_min] for i in range(2, n)):
        indices.remove(1)
        indices.append(1)
    indices.sort(key=lambda i: -strides[i])  # stable, as std::stable_sort
    order = [0] * n
    for position, index in enumerate(indices):
        order[index] = n - position - 1
    return order


def generate_strides(dims: Sequence[int], order: Sequence[int]) -> list[int]:
    """hipDNN's ``generateStrides(dim, strideOrder)``: packed strides, the dimension of order 0
    innermost (ties broken by position, as ``std::sort`` of distinct orders never meets)."""
    strides, step = [1] * len(dims), 1
    for index in sorted(range(len(dims)), key=lambda i: order[i]):
        strides[index] = step
        step *= dims[index]
    return strides


def memory_format_used(requested: MemoryFormat, ndim: int) -> MemoryFormat:
    """The format PyTorch's hipDNN path runs a convolution in: channels-last only for a 4- or
    5-dimensional weight (a 2D or 3D convolution), as ``*_conv_suggest_memory_format`` decide."""
    return requested if ndim in (2, 3) else MemoryFormat.CONTIGUOUS


def _spatial(problem: ConvProblem, prefix: str) -> list[int]:
    return [getattr(problem, f"{prefix}_{d}") for d in problem.dims]


def tensor_dims(problem: ConvProblem) -> tuple[list[int], list[int], list[int]]:
    """Logical dims of the input (N, C, spatial), the weight (K, C/G, filter) and the output."""
    x = [problem.N, problem.C, *(problem.input_size(d) for d in problem.dims)]
    w = [problem.K, problem.C // problem.G, *(problem.filter_size(d) for d in problem.dims)]
    y = [problem.N, problem.K, *(problem.output_size(d) for d in problem.dims)]
    return x, w, y


def _tensor(uid: int, name: str, dtype: str, dims: list[int], strides: list[int], virtual: bool = False) -> dict:
    tensor = {"uid": uid, "name": name, "data_type": dtype, "dims": dims, "strides": strides}
    if virtual:
        tensor["virtual"] = True
    return tensor


def graph(layer: Layer, variant: Variant, dtype: Dtype, memory_format: MemoryFormat = MemoryFormat.CONTIGUOUS) -> dict:
    """The hipDNN Graph PyTorch sends for ``layer`` in direction ``variant`` (see the module
    docstring); a bias is sent with the forward graph only."""
    p = layer.problem
    io = WIRE_DTYPES[dtype]
    fmt = memory_format_used(memory_format, p.ndim)
    packed = channels_last_strides if fmt is MemoryFormat.CHANNELS_LAST else contiguous_strides
    x_dims, w_dims, y_dims = tensor_dims(p)
    x_strides, w_strides, y_strides = packed(x_dims), packed(w_dims), packed(y_dims)
    pads = _spatial(p, "pad")
    geometry = {
        "pre_padding": pads,
        "post_padding": pads,
        "stride": _spatial(p, "stride"),
        "dilation": _spatial(p, "dil"),
        "conv_mode": "CROSS_CORRELATION",
    }
    tensors: list[dict]
    if variant is Variant.FORWARD:
        # y: PyTorch sets no dims or strides; the frontend gives y x's stride order
        y_inferred = generate_strides(y_dims, extract_stride_order(x_strides))
        tensors = [_tensor(UID_INPUT, "x", io, x_dims, x_strides), _tensor(UID_WEIGHT, "w", io, w_dims, w_strides)]
        uids = {"x_tensor_uid": UID_INPUT, "w_tensor_uid": UID_WEIGHT, "y_tensor_uid": UID_OUTPUT}
        if layer.bias:
            uids["y_tensor_uid"] = UID_CONV_OUT
            tensors.append(_tensor(UID_CONV_OUT, "conv_out", "FLOAT", y_dims, y_strides, virtual=True))
        else:
            tensors.append(_tensor(UID_OUTPUT, "y", io, y_dims, y_inferred))
    elif variant is Variant.BWD_DATA:
        # dx: PyTorch sets its dims (the input's), the frontend gives it dy's stride order
        dx_strides = generate_strides(x_dims, extract_stride_order(y_strides))
        tensors = [
            _tensor(UID_INPUT, "dy", io, y_dims, y_strides),
            _tensor(UID_WEIGHT, "w", io, w_dims, w_strides),
            _tensor(UID_OUTPUT, "dx", io, x_dims, dx_strides),
        ]
        uids = {"dy_tensor_uid": UID_INPUT, "w_tensor_uid": UID_WEIGHT, "dx_tensor_uid": UID_OUTPUT}
    else:
        # dw: PyTorch sets its dims (the weight's), the frontend gives it x's stride order
        dw_strides = generate_strides(w_dims, extract_stride_order(x_strides))
        tensors = [
            _tensor(UID_INPUT, "dy", io, y_dims, y_strides),
            _tensor(UID_WEIGHT, "x", io, x_dims, x_strides),
            _tensor(UID_OUTPUT, "dw", io, w_dims, dw_strides),
        ]
        uids = {"x_tensor_uid": UID_WEIGHT, "dy_tensor_uid": UID_INPUT, "dw_tensor_uid": UID_OUTPUT}
    nodes = [
        {
            "name": "conv",
            "compute_data_type": "FLOAT",
            "attributes_type": ATTRIBUTES[variant],
            "attributes": {**uids, **geometry},
        }
    ]
    if variant is Variant.FORWARD and layer.bias:
        bias_dims = [1, p.K, *([1] * p.ndim)]
        tensors.append(_tensor(UID_BIAS, "bias", io, bias_dims, contiguous_strides(bias_dims)))
        tensors.append(_tensor(UID_OUTPUT, "y", io, y_dims, y_strides))  # the ADD's input of equal dims
        nodes.append(
            {
                "name": "bias",
                "compute_data_type": io,
                "attributes_type": "PointwiseAttributes",
                "attributes": {
                    "operation": POINTWISE_ADD,
                    "in_0_tensor_uid": UID_CONV_OUT,
                    "in_1_tensor_uid": UID_BIAS,
                    "out_0_tensor_uid": UID_OUTPUT,
                },
            }
        )
    document = {"name": "conv", "compute_data_type": "FLOAT", "io_data_type": io, "tensors": tensors, "nodes": nodes}
    if variant is not Variant.BWD_WEIGHT:
        document["intermediate_data_type"] = "FLOAT"
    return document


def training_graphs(
    layer: Layer, variants: Sequence[Variant], dtype: Dtype, memory_format: MemoryFormat = MemoryFormat.CONTIGUOUS
) -> dict[Variant, dict]:
    """The graphs one training step sends for ``layer``, by direction (in Variant order)."""
    return {v: graph(layer, v, dtype, memory_format) for v in Variant if v in variants}
