"""The graphs ``hipdnn census`` sends are the ones PyTorch sends (ckspace/emit/pytorch_graphs.py).

The independent statement here is a transcription, written apart from the product's, of the two
sources that decide a graph, read statement by statement:

* PyTorch's ``aten/src/ATen/native/hipdnn/Conv_hipdnn.cpp`` (ROCm/pytorch): ``buildConvFpropGraph``,
  ``buildConvDgradGraph`` and ``buildConvWgradGraph`` as the entry points call them (forward with
  the module's bias, backward with none), the ``HipdnnConvUid`` enum, ``createTensorAttributes``
  (a tensor's own sizes and strides), ``reshape_bias`` and the memory format;
* hipDNN's frontend, which sets what PyTorch leaves unset: the convolution nodes'
  ``infer_properties_node`` (y from x's stride order, dx from dy's, dw from x's) through
  ``extractStrideOrder``/``generateStrides``, and ``PointwiseNode`` (y's strides from its input of
  equal dims).

PyTorch's strides are computed here with numpy (an array in the memory format, its byte strides over
the item size), not with the product's formulas.
"""

from __future__ import annotations

import json
import logging

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ckspace.core.vocab import Dtype, Variant
from ckspace.emit import pytorch_graphs as pg
from ckspace.workloads.problem import ConvProblem

WIRE = {Dtype.FP16: "HALF", Dtype.BF16: "BFLOAT16", Dtype.FP32: "FLOAT"}


def numpy_strides(dims: list[int], channels_last: bool) -> list[int]:
    """PyTorch's strides of a fresh tensor of ``dims`` (N, C, spatial...) in a memory format: a
    C-ordered numpy array of the dims in memory order, viewed back in logical order."""
    if not channels_last:
        array = np.empty(dims, dtype=np.int8)
        return list(array.strides)
    memory = [dims[0], *dims[2:], dims[1]]  # N, spatial..., C
    array = np.empty(memory, dtype=np.int8)
    logical = np.moveaxis(array, -1, 1)
    return [int(s) for s in logical.strides]


def stride_order(strides: list[int]) -> list[int]:
    """hipDNN's extractStrideOrder, transcribed: the position of each dimension when the dimensions
    are listed from the largest stride down (stable), N...C layouts keeping C last among ties."""
    n = len(strides)
    dims = list(range(n))
    biggest = max(range(n), key=lambda i: (strides[i], -i))
    smallest = min(range(n), key=lambda i: (strides[i], i))
    if biggest == 0 and smallest == 1 and any(strides[i] > strides[1] for i in range(2, n)):
        dims = [0, *range(2, n), 1]
    ranked = sorted(dims, key=lambda i: strides[i], reverse=True)  # sorted() is stable
    return [n - 1 - ranked.index(i) for i in range(n)]


def packed(dims: list[int], order: list[int]) -> list[int]:
    """hipDNN's generateStrides: the dimension of order 0 innermost."""
    out = [0] * len(dims)
    step = 1
    for rank in range(len(dims)):
        i = order.index(rank)
        out[i] = step
        step *= dims[i]
    return out


def expected_graph(p: ConvProblem, variant: Variant, dtype: Dtype, channels_last: bool, bias: bool) -> dict:
    """Conv_hipdnn.cpp's graph for a layer of problem ``p``, then the frontend's inference."""
    nd = p.ndim
    channels_last = channels_last and nd in (2, 3)  # *_suggest_memory_format: 4-/5-dim weights only
    spatial = list(p.dims)
    x = [p.N, p.C, *[p.input_size(d) for d in spatial]]
    w = [p.K, p.C // p.G, *[p.filter_size(d) for d in spatial]]
    y = [p.N, p.K, *[p.output_size(d) for d in spatial]]
    s = {name: numpy_strides(dims, channels_last) for name, dims in (("x", x), ("w", w), ("y", y))}
    io = WIRE[dtype]
    geometry = {
        "pre_padding": [getattr(p, f"pad_{d}") for d in spatial],
        "post_padding": [getattr(p, f"pad_{d}") for d in spatial],
        "stride": [getattr(p, f"stride_{d}") for d in spatial],
        "dilation": [getattr(p, f"dil_{d}") for d in spatial],
        "conv_mode": "CROSS_CORRELATION",
    }

    def tensor(uid, name, dims, strides, data=io, virtual=False):
        t = {"uid": uid, "name": name, "data_type": data, "dims": dims, "strides": strides}
        return {**t, "virtual": True} if virtual else t

    nodes = []
    if variant is Variant.FORWARD:
        # UID_INPUT 1, UID_WEIGHT 2, UID_OUTPUT 3, UID_BIAS 4
        tensors = [tensor(1, "x", x, s["x"]), tensor(2, "w", w, s["w"])]
        out_uid = 3
        if bias:  # conv_out->set_dim(output.sizes()); set_stride(output.strides()); virtual
            out_uid = 5
            tensors.append(tensor(5, "conv_out", y, s["y"], "FLOAT", virtual=True))
        else:  # output set, nothing else: ConvolutionFpropNode infers y's strides from x's order
            tensors.append(tensor(3, "y", y, packed(y, stride_order(s["x"]))))
        nodes.append(("ConvolutionFwdAttributes", {"x_tensor_uid": 1, "w_tensor_uid": 2, "y_tensor_uid": out_uid}))
    elif variant is Variant.BWD_DATA:
        # UID_DGRAD_GRAD_OUTPUT = 1, UID_DGRAD_WEIGHT = 2, UID_DGRAD_GRAD_INPUT = 3; dx->set_dim(input size)
        tensors = [
            tensor(1, "dy", y, s["y"]),
            tensor(2, "w", w, s["w"]),
            tensor(3, "dx", x, packed(x, stride_order(s["y"]))),
        ]
        nodes.append(("ConvolutionBwdAttributes", {"dy_tensor_uid": 1, "w_tensor_uid": 2, "dx_tensor_uid": 3}))
    else:
        # UID_WGRAD_GRAD_OUTPUT = 1, UID_WGRAD_INPUT = 2, UID_WGRAD_GRAD_WEIGHT = 3; dw->set_dim(weight size)
        tensors = [
            tensor(1, "dy", y, s["y"]),
            tensor(2, "x", x, s["x"]),
            tensor(3, "dw", w, packed(w, stride_order(s["x"]))),
        ]
        nodes.append(("ConvolutionWrwAttributes", {"x_tensor_uid": 2, "dy_tensor_uid": 1, "dw_tensor_uid": 3}))
    document = {
        "name": "conv",
        "compute_data_type": "FLOAT",
        "io_data_type": io,
        "tensors": tensors,
        "nodes": [
            {"name": "conv", "compute_data_type": "FLOAT", "attributes_type": kind, "attributes": {**uids, **geometry}}
            for kind, uids in nodes
        ],
    }
    if variant is Variant.FORWARD and bias:
        shape = [1, p.K, *[1] * nd]  # reshape_bias(dim, bias) of a contiguous [K] tensor
        tensors.append(tensor(4, "bias", shape, [int(v) for v in np.empty(p.K, np.int8).reshape(shape).strides]))
        tensors.append(tensor(3, "y", y, s["y"]))  # PointwiseNode: the strides of conv_out (equal dims)
        document["nodes"].append(
            {
                "name": "bias",
                "compute_data_type": io,  # add_attrs.set_compute_data_type(inputType)
                "attributes_type": "PointwiseAttributes",
                "attributes": {"operation": "ADD", "in_0_tensor_uid": 5, "in_1_tensor_uid": 4, "out_0_tensor_uid": 3},
            }
        )
    if variant is not Variant.BWD_WEIGHT:  # wgrad: "No set_intermediate_data_type needed"
        document["intermediate_data_type"] = "FLOAT"
    return document


@st.composite
def problems(draw) -> ConvProblem:
    ndim = draw(st.sampled_from([1, 2, 3]))
    g = draw(st.sampled_from([1, 1, 2, 4]))
    keys = {"ndim": ndim, "N": draw(st.integers(1, 8)), "G": g}
    keys["C"] = g * draw(st.integers(1, 16))
    keys["K"] = g * draw(st.integers(1, 16))
    for d, image, kernel in zip("dhw", ("Di", "Hi", "Wi"), ("Z", "Y", "X"), strict=True):
        if "dhw".index(d) < 3 - ndim:
            continue
        k = draw(st.integers(1, 3))
        dil = draw(st.integers(1, 2))
        keys[kernel], keys[f"dil_{d}"] = k, dil
        keys[f"pad_{d}"] = draw(st.integers(0, 2))
        keys[f"stride_{d}"] = draw(st.integers(1, 3))
        keys[image] = dil * (k - 1) + 1 + draw(st.integers(0, 9))  # output extent may be 1: ties in strides
    return ConvProblem.from_values(keys)


@settings(max_examples=400, deadline=None)
@given(
    problem=problems(),
    variant=st.sampled_from(list(Variant)),
    dtype=st.sampled_from(list(Dtype)),
    channels_last=st.booleans(),
    bias=st.booleans(),
)
def test_issue_37_item_4_the_graphs_are_pytorchs(problem, variant, dtype, channels_last, bias) -> None:
    fmt = pg.MemoryFormat.CHANNELS_LAST if channels_last else pg.MemoryFormat.CONTIGUOUS
    built = pg.graph(pg.Layer(problem, bias), variant, dtype, fmt)
    assert built == expected_graph(problem, variant, dtype, channels_last, bias)


def test_issue_37_item_4_hipdnns_own_examples_of_its_stride_helpers() -> None:
    """The examples ShapeUtilities.hpp's comments give, and the tie rule on degenerate dims."""
    assert pg.extract_stride_order([8, 1, 4]) == [2, 0, 1] == stride_order([8, 1, 4])
    assert pg.extract_stride_order([1, 1, 1, 1]) == [3, 2, 1, 0] == stride_order([1, 1, 1, 1])
    assert pg.generate_strides([1, 2, 3, 4], [3, 0, 2, 1]) == [24, 1, 8, 2] == packed([1, 2, 3, 4], [3, 0, 2, 1])
    # channels-last with W = 1: H and W tie at C's step; C stays innermost, the order is N, H, W, C
    assert pg.extract_stride_order([48, 1, 16, 16]) == [3, 0, 2, 1]
    # NCHW with H = W = 1: three ties at 1; stable, so N, C, H, W
    assert pg.extract_stride_order([16, 1, 1, 1]) == [3, 2, 1, 0]


def test_issue_37_item_4_a_bias_rides_on_the_forward_graph_only() -> None:
    """PyTorch's backward passes no bias (its gradient is a sum), so only forward has the ADD; a
    transposed convolution is not modelled: a CSV row is an ordinary convolution."""
    p = ConvProblem.parse("N=2,C=8,K=16,Hi=9,Wi=9,Y=3,X=3,pad=1")
    graphs = pg.training_graphs(pg.Layer(p, bias=True), list(Variant), Dtype.BF16)
    assert [len(g["nodes"]) for g in graphs.values()] == [2, 1, 1]
    pointwise = graphs[Variant.FORWARD]["nodes"][1]
    assert pointwise["attributes"]["operation"] == "ADD" and pointwise["compute_data_type"] == "BFLOAT16"
    uids = {t["uid"] for g in graphs.values() for t in g["tensors"]}
    assert uids == {1, 2, 3, 4, pg.UID_CONV_OUT} and pg.UID_CONV_OUT not in (1, 2, 3, 4)


def test_issue_37_item_4_the_graphs_serialize_with_the_rendered_schema(tmp_path) -> None:
    """flatc writes them with the schema ckspace renders, and reads back the same values."""
    from ckspace.census.hipdnn_wire import decode, rendered_schema, schema_fields, serialize

    p = ConvProblem.parse("N=4,G=2,C=16,K=32,Hi=12,Wi=10,Y=3,X=3,stride=2,pad=1")
    documents = [
        pg.graph(pg.Layer(p, bias), v, Dtype.FP16, fmt)
        for v in Variant
        for bias in (False, True)
        for fmt in pg.MemoryFormat
    ]
    files = serialize(documents, tmp_path / "wire")
    pointwise = schema_fields(rendered_schema()).get("PointwiseAttributes", frozenset())
    for document, file in zip(documents, files, strict=True):
        back = decode(file)
        for sent, read in zip(document["tensors"], back["tensors"], strict=True):
            assert (sent["uid"], sent["dims"], sent["strides"], sent["data_type"]) == (
                read["uid"],
                read["dims"],
                read["strides"],
                read["data_type"],
            )
            assert read["virtual"] == sent.get("virtual", False)
        for sent, read in zip(document["nodes"], back["nodes"], strict=True):
            assert read["attributes_type"] == sent["attributes_type"]
            kept = {
                k: v
                for k, v in sent["attributes"].items()
                if sent["attributes_type"] != "PointwiseAttributes" or k in pointwise
            }
            assert {k: read["attributes"][k] for k in kept} == kept


def test_issue_37_item_4_fields_the_schema_lacks_are_left_out_and_logged(tmp_path, caplog) -> None:
    """Against a schema whose PointwiseAttributes declares nothing (before a plugin reads pointwise
    nodes), the graph is still sent, less those fields, and the log names them."""
    from ckspace.census.hipdnn_wire import decode, rendered_schema, serialize

    schema = rendered_schema()
    start = schema.index("table PointwiseAttributes")
    bare = schema[:start] + "table PointwiseAttributes {}" + schema[schema.index("}", start) + 1 :]
    p = ConvProblem.parse("N=1,C=8,K=8,Hi=5,Wi=5,Y=1,X=1")
    document = pg.graph(pg.Layer(p, True), Variant.FORWARD, Dtype.BF16)
    with caplog.at_level(logging.INFO, logger="ckspace.census.hipdnn_wire"):
        (file,) = serialize([document], tmp_path, schema=bare)
    assert "PointwiseAttributes.operation" in caplog.text and "PointwiseAttributes.in_0_tensor_uid" in caplog.text
    back = decode(file, schema=bare)
    assert back["nodes"][1]["attributes_type"] == "PointwiseAttributes" and len(back["tensors"]) == 5
    assert json.dumps(back).count('"uid"') == 5


@pytest.mark.parametrize("ndim", [1, 2, 3])
def test_issue_37_item_4_channels_last_only_where_pytorch_has_it(ndim: int) -> None:
    text = {1: "N=2,C=8,K=8,Wi=9,X=3", 2: "N=2,C=8,K=8,Hi=9,Wi=9,Y=3,X=3", 3: "N=2,C=8,K=8,Di=5,Hi=9,Wi=9,Z=3,Y=3,X=3"}
    p = ConvProblem.parse(text[ndim])
    x = pg.graph(pg.Layer(p), Variant.FORWARD, Dtype.BF16, pg.MemoryFormat.CHANNELS_LAST)["tensors"][0]
    assert x["strides"][1] == (1 if ndim > 1 else x["dims"][2])
