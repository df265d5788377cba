"""The hipDNN engine plugin (``ckspace emit --hipdnn-plugin``), with the tests playing hipDNN.

No hipDNN runtime, ROCm or AMD GPU runs here. ``tests/hipdnn/harness.c`` loads the plugin as
hipDNN's loader does (``dlopen`` with local symbols, every required symbol, the API major version,
engine ids that are the FNV-1a hash of their names) and calls it in hipDNN's order; the graphs are
serialized by flatc from JSON written here, in hipDNN's field names. The plugin is the one
``ckspace build`` makes, linked over the stand-in ``ckspace_run`` of the bench tests (a naive
convolution on host memory), so that execution can be compared with the CPU reference
(``tests/naive_conv.py``). The real link of the plugin with HIP kernels is in
tests/test_build.py::test_compile_sample_for_gfx942.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
from conftest import c_compiler
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from naive_conv import NAIVE, out_size
from standin_library import build_standin_plugin
from strided_tensors import (
    ACTIVATIONS,
    MEMORY_FORMATS,
    channels_last,
    from_naive,
    gathered,
    padded,
    placed,
    row_major,
    span,
    to_naive,
    width_outermost,
)
from test_build import use_fake_toolchain

from ckspace import __version__
from ckspace.cli import main
from ckspace.compiling import plugin_build
from ckspace.core.errors import NoKernelError
from ckspace.core.vocab import Dtype, Variant
from ckspace.emit import hipdnn_plugin, pytorch_graphs
from ckspace.emit.manifest import Manifest
from ckspace.select.selector import Selector
from ckspace.workloads.problem import ConvProblem

HARNESS = Path(__file__).parent / "hipdnn" / "harness.c"
ALIGNMENT = 256
"""Bytes each staged tensor is aligned to in the workspace: the most a plugin may ask beyond what
it uses."""
NUMPY = {"fp16": np.float16, "bf16": ml_dtypes.bfloat16, "fp32": np.float32}
WIRE = {"fp16": "HALF", "bf16": "BFLOAT16", "fp32": "FLOAT"}
UIDS = {
    "forward": {"input": 1, "weight": 2, "output": 3},
    "bwd_data": {"output": 1, "weight": 2, "input": 3},
    "bwd_weight": {"output": 1, "input": 2, "weight": 3},
}
"""PyTorch's uids (``Conv_hipdnn.cpp``'s ``HipdnnConvUid``) of each direction's tensors by role:
fprop x 1, w 2, y 3; dgrad dy 1, w 2, dx 3; wgrad dy 1, x 2, dw 3."""
BIAS_UID = 4
"""PyTorch's uid of the bias of a convolution with bias (``UID_BIAS``)."""
CONV_RESULT_UID = 5
"""The uid of the convolution's virtual result when a pointwise node follows: PyTorch sets none and
hipDNN's frontend numbers it; the least uid PyTorch leaves free, as the census sends it."""
WRITTEN = {"forward": "output", "bwd_data": "input", "bwd_weight": "weight"}
ATTRIBUTES = {
    "forward": (
        "ConvolutionFwdAttributes",
        {"x_tensor_uid": "input", "w_tensor_uid": "weight", "y_tensor_uid": "output"},
    ),
    "bwd_data": (
        "ConvolutionBwdAttributes",
        {"dy_tensor_uid": "output", "w_tensor_uid": "weight", "dx_tensor_uid": "input"},
    ),
    "bwd_weight": (
        "ConvolutionWrwAttributes",
        {"x_tensor_uid": "input", "dy_tensor_uid": "output", "dw_tensor_uid": "weight"},
    ),
}
"""Per direction, hipDNN's node attributes and the role of the tensor each names."""
NAIVE_ROLE = {"input": "In", "weight": "Wei", "output": "Out"}
READS = {"forward": ("input", "weight"), "bwd_data": ("output", "weight"), "bwd_weight": ("output", "input")}
"""Per direction, the tensors the convolution reads, in tests/naive_conv.py's argument order."""
IMAGE, FILTER = ("Di", "Hi", "Wi"), ("Z", "Y", "X")
DIMS = ("d", "h", "w")


@dataclass(frozen=True)
class Plugin:
    tree: Path
    manifest: Manifest
    library: Path
    harness: Path
    work: Path


@pytest.fixture(scope="module")
def plugin(tmp_path_factory: pytest.TempPathFactory) -> Plugin:
    """A gfx950 tree of every direction, 1-3D and dtype (the CK headers of the test extras: the
    default rule set has no 1D or fp32 bwd_weight kernels there), its plugin over the stand-in, and
    the harness."""
    base = tmp_path_factory.mktemp("hipdnn")
    tree = base / "tree"
    argv = ["emit", "--arch", "gfx950", "--rule-set", "default", "--variant", "forward", "bwd_data", "bwd_weight"]
    argv += ["--ndim", "1", "2", "3", "--dtype", "fp16", "bf16", "fp32", "--hipdnn-plugin", "--out", str(tree)]
    assert main(argv) == 0
    manifest = Manifest.model_validate_json((tree / "manifest.json").read_bytes())
    harness = base / "harness"
    subprocess.run([c_compiler(), "-O2", str(HARNESS), "-o", str(harness), "-ldl", "-lpthread"], check=True)
    return Plugin(tree, manifest, build_standin_plugin(tree), harness, base)


# -- hipDNN's side: graphs in its JSON, serialized by flatc --------------------------------------
def spatial(p: dict) -> list[str]:
    return list(DIMS[3 - p["ndim"] :])


def logical_dims(p: dict) -> dict[str, list[int]]:
    """Each role's logical dims, as PyTorch states them: the input (N, C, image), the weight (K, C/G,
    filter), the output (N, K, out)."""
    ds = spatial(p)
    return {
        "input": [p["N"], p["C"], *(p.get(IMAGE[DIMS.index(d)], 1) for d in ds)],
        "weight": [p["K"], p["C"] // p["G"], *(p.get(FILTER[DIMS.index(d)], 1) for d in ds)],
        "output": [p["N"], p["K"], *(out_size(p, d) for d in ds)],
    }


def graph(
    p: dict,
    variant: str,
    dtype: str,
    *,
    memory_format: str = "contiguous",
    strides=None,
    bias: bool = False,
    bias_strides=None,
    activation: tuple[str, dict] | None = None,
    post_padding: list[int] | None = None,
    mode: str = "CROSS_CORRELATION",
    compute: str = "FLOAT",
) -> dict:
    """hipDNN's Graph of one convolution ``p`` (tests/naive_conv.py's problem dict) as PyTorch's
    ``Conv_hipdnn.cpp`` builds it: the uids of :data:`UIDS`, logical dims with the memory format's
    strides (``strides``: a function of the dims instead), FLOAT compute (and intermediate type but
    for wgrad), groups left to the channel counts; ``bias`` adds the pointwise ADD of a ``[1, C, 1...]``
    bias (uid 4, a reshaped contiguous vector; ``bias_strides``: a function of its dims instead) to
    the convolution's virtual result, writing the output uid; ``activation`` (a hipDNN pointwise
    mode and its attributes) follows, as hipDNN's other users build fused graphs."""
    ds = spatial(p)
    pads = [p.get(f"pad_{d}", 0) for d in ds]
    layout = strides or MEMORY_FORMATS[memory_format]
    uids = UIDS[variant]
    dims = logical_dims(p)
    written = WRITTEN[variant]
    tensors = {
        role: {
            "uid": uids[role],
            "name": role,
            "data_type": WIRE[dtype],
            "dims": dims[role],
            "strides": layout(dims[role]),
        }
        for role in ("input", "weight", "output")
    }
    kind, names = ATTRIBUTES[variant]
    attributes = {
        **{field: uids[role] for field, role in names.items()},
        "pre_padding": pads,
        "post_padding": post_padding if post_padding is not None else pads,
        "stride": [p.get(f"stride_{d}", 1) for d in ds],
        "dilation": [p.get(f"dil_{d}", 1) for d in ds],
        "conv_mode": mode,
    }
    nodes = [{"name": "conv", "compute_data_type": compute, "attributes_type": kind, "attributes": attributes}]
    extra = []
    steps = ([("ADD", {})] if bias else []) + ([activation] if activation else [])
    if steps:  # the convolution's result becomes virtual, the last node writes the output uid
        result = tensors[written]
        result_uid = CONV_RESULT_UID
        attributes[next(f for f, r in names.items() if r == written)] = result_uid
        extra.append({**result, "uid": result_uid, "name": "conv_result", "data_type": "FLOAT", "virtual": True})
        for i, (pointwise, options) in enumerate(steps):
            last = i == len(steps) - 1
            out_uid = uids[written] if last else result_uid + 1 + i
            node = {"operation": pointwise, "in_0_tensor_uid": result_uid, "out_0_tensor_uid": out_uid, **options}
            if pointwise == "ADD":
                bias_dims = [1, dims[written][1], *[1] * len(ds)]
                extra.append(
                    {
                        "uid": BIAS_UID,
                        "name": "bias",
                        "data_type": WIRE[dtype],
                        "dims": bias_dims,
                        "strides": (bias_strides or row_major)(bias_dims),
                    }
                )
                node["in_1_tensor_uid"] = BIAS_UID
            if not last:
                extra.append({**result, "uid": out_uid, "name": f"between{i}", "data_type": "FLOAT", "virtual": True})
            nodes.append(
                {
                    "name": pointwise.lower(),
                    "compute_data_type": WIRE[dtype] if pointwise == "ADD" else "FLOAT",
                    "attributes_type": "PointwiseAttributes",
                    "attributes": node,
                }
            )
            result_uid = out_uid
    document = {
        "name": "conv",
        "compute_data_type": "FLOAT",
        "io_data_type": WIRE[dtype],
        "tensors": [*tensors.values(), *extra],
        "nodes": nodes,
    }
    if variant != "bwd_weight":
        document["intermediate_data_type"] = "FLOAT"
    return document


def flatc(plugin: Plugin, name: str, document: dict, root: str | None = None) -> Path:
    """``document`` serialized by flatc with the tree's schema (``root``: a table other than Graph)."""
    folder = plugin.work / "wire"
    folder.mkdir(exist_ok=True)
    source = folder / f"{name}.json"
    source.write_text(json.dumps(document))
    tools = plugin_build.flatbuffers()
    command = [tools.flatc, "-b", "-o", str(folder)]
    if root:
        command += ["--root-type", f"{hipdnn_plugin.WIRE_NAMESPACE}.{root}"]
    subprocess.run([*command, str(plugin.tree / hipdnn_plugin.SCHEMA), str(source)], check=True, capture_output=True)
    return folder / f"{name}.bin"


def decoded(plugin: Plugin, binary: Path, root: str) -> dict:
    tools = plugin_build.flatbuffers()
    folder = binary.parent
    command = [
        tools.flatc,
        "--json",
        "--strict-json",
        "--raw-binary",
        "--root-type",
        f"{hipdnn_plugin.WIRE_NAMESPACE}.{root}",
    ]
    subprocess.run(
        [*command, "-o", str(folder), str(plugin.tree / hipdnn_plugin.SCHEMA), "--", str(binary)],
        check=True,
        capture_output=True,
    )
    return json.loads(binary.with_suffix(".json").read_text())


def harness(plugin: Plugin, *arguments: str, device: str | None = None) -> list[str]:
    """The harness's lines; ``device``: the gcnArchName of the stand-in's current device."""
    environment = {**os.environ, "CKSPACE_STANDIN_DEVICE_ARCH": device} if device is not None else None
    done = subprocess.run(
        [str(plugin.harness), str(plugin.library), *arguments],
        capture_output=True,
        text=True,
        timeout=600,
        env=environment,
    )
    assert done.returncode == 0 and "FAIL" not in done.stdout, (done.stdout[-2000:], done.stderr[-2000:])
    return done.stdout.splitlines()


def applicability(plugin: Plugin, graphs: list[Path], device: str | None = None) -> list[str]:
    """Per graph what the plugin answers (``none: REASON`` or the engine ids), the log lines aside."""
    lines = [
        line for line in harness(plugin, "applicable", *map(str, graphs), device=device) if not line.startswith("log ")
    ]
    return [line.split(": ", 1)[1] for line in lines]


def engine_id(plugin: Plugin, variant: str) -> int:
    assert plugin.manifest.hipdnn is not None
    direction = {"forward": "FWD", "bwd_data": "BWD_DATA", "bwd_weight": "BWD_WEIGHT"}[variant]
    return plugin.manifest.hipdnn.engines[f"CKSPACE_GFX950_CONV_{direction}"]


# -- the plugin as hipDNN loads it ---------------------------------------------------------------
def fnv1a_reference(text: str) -> int:
    """FNV-1a 64 from its definition (offset basis, prime), as a signed int64."""
    value = 14695981039346656037
    for byte in text.encode():
        value = (value ^ byte) * 1099511628211 % 2**64
    return value - 2**64 if value >= 2**63 else value


def test_engine_ids_are_fnv1a_hashes() -> None:
    """The published FNV-1a 64 test vectors, and the hash hipDNN requires of each engine's name."""
    assert hipdnn_plugin.fnv1a64("") == 0xCBF29CE484222325 - 2**64
    assert hipdnn_plugin.fnv1a64("a") == 0xAF63DC4C8601EC8C - 2**64
    assert hipdnn_plugin.fnv1a64("foobar") == 0x85944171F73967E8 - 2**64
    for name in ("CKSPACE_GFX942_CONV_FWD", "CKSPACE_GFX950_CONV_BWD_WEIGHT", "MIOPEN_PLUGIN"):
        assert hipdnn_plugin.fnv1a64(name) == fnv1a_reference(name)
    # two archs' plugins in one process: six engines, six ids (hipDNN drops an engine of a known id)
    both = [*hipdnn_plugin.engines("gfx942", list(Variant)), *hipdnn_plugin.engines("gfx950", list(Variant))]
    assert len(set(both)) == len({e.id for e in both}) == 6


@pytest.mark.slow
def test_the_harness_loads_the_plugin_as_hipdnn_does(plugin: Plugin) -> None:
    """Every required symbol resolves under RTLD_LOCAL, the API is 1.x, each engine id is its name's
    hash (checked by the harness's own FNV-1a), one engine per direction with stable names."""
    lines = harness(plugin, "check")
    (identity,) = [line for line in lines if line.startswith("plugin ")]
    assert identity == f"plugin ckspace_hipdnn_gfx950 {__version__} 1.0.0"
    engines = {int(line.split()[1]): line.split()[2] for line in lines if line.startswith("engine ")}
    assert plugin.manifest.hipdnn is not None
    assert engines == {v: k for k, v in plugin.manifest.hipdnn.engines.items()}
    assert sorted(engines.values()) == [
        "CKSPACE_GFX950_CONV_BWD_DATA",
        "CKSPACE_GFX950_CONV_BWD_WEIGHT",
        "CKSPACE_GFX950_CONV_FWD",
    ]
    assert any("3 engines over 223 kernels" in line for line in lines if line.startswith("log "))


def declared_functions(header: Path) -> set[str]:
    return set(re.findall(r"^(?:hipdnnPluginStatus_t|void) (hipdnn\w+)\(", header.read_text(), flags=re.M))


@pytest.mark.slow
def test_the_plugin_exports_exactly_hipdnns_plugin_api(plugin: Plugin) -> None:
    """Its dynamic symbol table: the plugin API the ABI header declares, not the dispatcher's C API,
    not the stand-in's, FlatBuffers' or the C++ runtime's."""
    listed = subprocess.run(
        ["nm", "-D", "--defined-only", str(plugin.library)], capture_output=True, text=True, check=True
    ).stdout
    exported = {line.split()[-1] for line in listed.splitlines() if line.strip()}
    declared = declared_functions(plugin.tree / hipdnn_plugin.API_HEADER)
    assert len(declared) == 20 and exported == declared


# -- applicability -------------------------------------------------------------------------------
P2 = {"ndim": 2, "N": 2, "G": 2, "C": 16, "K": 32, "Hi": 6, "Wi": 5, "Y": 3, "X": 3, "pad_h": 1, "pad_w": 1}


@pytest.mark.parametrize(
    ("case", "reason"),
    [
        ({"strides": lambda dims: [*row_major(dims)[:-1], -1]}, "the input tensor (uid 1) has strides [480,30,5,-1]"),
        (
            {"strides": lambda dims: [*row_major(dims)[:-1], 0]},  # read tensors may repeat elements, not the written
            "the output tensor (uid 3) has strides [960,30,5,0]; ckspace serves any strides >= 0",
        ),
        ({"dtype": "fp32", "variant": "bwd_weight"}, "no kernel of the library can run this convolution"),
        ({"activation": ("SUB", {})}, "pointwise node 'sub' is SUB; after a convolution ckspace fuses ADD"),
        (
            {"activation": ("RELU_FWD", {"relu_lower_clip": 0.5})},
            "(RELU_FWD) clips below at 0.5; ckspace's ReLU clips at 0",
        ),
        ({"bias": True, "variant": "bwd_weight"}, "follows a weight gradient; ckspace fuses pointwise nodes after"),
        (  # checked by the dispatcher's ckspace_check_layout alone, which names the bias (its culprit 4)
            {"bias": True, "bias_strides": lambda dims: [dims[1], -1, *[1] * (len(dims) - 2)]},
            "the bias (uid 4) has strides [32,-1,1,1]; ckspace serves a bias whose channel stride is >= 0",
        ),
        ({"post_padding": [1, 2]}, "padding of spatial dimension 1 is 1 before and 2 after"),
        ({"mode": "CONVOLUTION"}, "conv_mode is CONVOLUTION; the kernels compute CROSS_CORRELATION"),
        ({"compute": "HALF"}, "the compute data type is HALF; the kernels accumulate in FLOAT"),
    ],
)
def test_graphs_the_kernels_cannot_serve_are_declined_with_the_reason(plugin: Plugin, case: dict, reason: str) -> None:
    """Not applicable, zero engines, and the reason in the last-error string and in the log, so that
    hipDNN falls back to another engine; the same graph without the defect is applicable."""
    options = dict(case)
    variant, dtype = options.pop("variant", "forward"), options.pop("dtype", "bf16")
    bad = flatc(plugin, "bad", graph(P2, variant, dtype, **options))
    good = flatc(plugin, "good", graph(P2, variant, "bf16"))
    lines = harness(plugin, "applicable", str(bad), str(good))
    answers = [line for line in lines if not line.startswith("log ")]
    assert answers[0].startswith(f"{bad}: none: ") and reason in answers[0], answers[0]
    assert answers[1] == f"{good}: {engine_id(plugin, variant)}"
    assert any(line.startswith("log 0: ") and reason in line for line in lines)


def test_a_double_graph_and_bytes_that_are_no_graph_are_declined(plugin: Plugin, tmp_path: Path) -> None:
    data = {**graph(P2, "forward", "bf16"), "io_data_type": "DOUBLE"}
    for tensor in data["tensors"]:
        tensor["data_type"] = "DOUBLE"
    double = flatc(plugin, "double", data)
    garbage = tmp_path / "garbage.bin"
    garbage.write_bytes(b"\x10\x00\x00\x00not a graph at all")
    empty = tmp_path / "empty.bin"
    empty.write_bytes(b"")
    answers = applicability(plugin, [double, garbage, empty])
    assert "the input tensor is DOUBLE; the library's kernels are HALF, BFLOAT16, FLOAT" in answers[0]
    assert "not a serialized hipDNN Graph" in answers[1]
    assert "no graph" in answers[2]


def test_wrong_output_dims_a_missing_tensor_and_a_pointwise_graph_are_declined(plugin: Plugin) -> None:
    wrong = graph(P2, "forward", "bf16")
    wrong["tensors"][2]["dims"][3] += 1
    wrong["tensors"][2]["strides"] = channels_last(wrong["tensors"][2]["dims"])
    missing = graph(P2, "forward", "bf16")
    missing["tensors"] = missing["tensors"][:2]
    pointwise = graph(P2, "forward", "bf16")
    pointwise["nodes"] = [{"name": "add", "attributes_type": "PointwiseAttributes", "attributes": {}}]
    bare = graph(P2, "forward", "bf16")
    del bare["nodes"][0]["attributes"]  # a convolution node without its attributes table
    answers = applicability(
        plugin,
        [
            flatc(plugin, name, g)
            for name, g in (("wrong", wrong), ("missing", missing), ("pw", pointwise), ("bare", bare))
        ],
    )
    assert "the output's spatial dimension 1 is 6; the convolution makes 5" in answers[0]
    assert "the graph has no output tensor of uid 3" in answers[1]
    assert "node 'add' is not a convolution" in answers[2]
    assert "the convolution node has no attributes" in answers[3]


def test_on_a_device_of_another_arch_every_graph_is_declined(plugin: Plugin) -> None:
    """A plugin for gfx950 loaded beside others on a gfx942 machine (or with no device) offers no
    engine, so that hipDNN picks another plugin's instead of one whose launches would fail."""
    graphs = [
        flatc(plugin, "dev_fwd", graph(P2, "forward", "bf16")),
        flatc(plugin, "dev_wrw", graph(P2, "bwd_weight", "fp16")),
    ]
    assert applicability(plugin, graphs) == [str(engine_id(plugin, "forward")), str(engine_id(plugin, "bwd_weight"))]
    mismatch = "not applicable: the device is gfx942:sramecc+:xnack-; this plugin's kernels are for gfx950"
    assert applicability(plugin, graphs, device="gfx942:sramecc+:xnack-") == [f"none: {mismatch}"] * 2
    assert applicability(plugin, graphs, device="gfx950:xnack+") == applicability(plugin, graphs)
    assert applicability(plugin, graphs, device="") == ["none: not applicable: HIP reports no current device"] * 2


def test_size_one_dimensions_may_have_any_stride(plugin: Plugin) -> None:
    """PyTorch leaves the strides of extent-1 dimensions arbitrary (N=1 here): they never move."""
    p = {**P2, "N": 1}
    document = graph(p, "forward", "bf16")
    for tensor in document["tensors"]:
        if tensor["dims"][0] == 1:  # the input's and output's N
            tensor["strides"][0] = 12345
    assert sum(t["strides"][0] == 12345 for t in document["tensors"]) == 2
    assert applicability(plugin, [flatc(plugin, "n1", document)]) == [str(engine_id(plugin, "forward"))]


@cache
def library_configs(plugin_tree: Path) -> tuple:
    manifest = Manifest.model_validate_json((plugin_tree / "manifest.json").read_bytes())
    return tuple(k.gemm_config() for k in manifest.kernels)


@cache
def python_selector(variant: Variant, dtype: Dtype) -> Selector:
    """Rules only, as the generated C: with the library as its pool, the fallbacks are the library's."""
    return Selector.load("gfx950", variant, dtype, engine="lightgbm", ck=None)


def python_applicable(plugin: Plugin, p: dict, variant: str, dtype: str) -> bool:
    """The Python problem rules: some kernel of the library, or a vector-width fallback of one in
    the library, can run the problem."""
    problem = ConvProblem(**{k: v for k, v in p.items() if k != "ndim"}, ndim=p["ndim"])
    configs = library_configs(plugin.tree)
    cell = [c for c in configs if (c.variant.value, c.dtype.value) == (variant, dtype)]
    if not cell:
        return False
    try:
        python_selector(Variant(variant), Dtype(dtype)).select(problem, cell, k=1, pool=list(configs))
    except NoKernelError:
        return False
    return True


@st.composite
def problems(draw) -> tuple[dict, str, str]:
    ndim = draw(st.sampled_from([1, 2, 3]))
    g = draw(st.sampled_from([1, 2, 3, 4]))
    p = {"ndim": ndim, "N": draw(st.integers(1, 3)), "G": g}
    # mostly the channel counts the kernels' vector widths divide; some that only narrow ones do
    p["C"] = g * draw(st.sampled_from([8, 16, 32, 64, 24, 1, 2, 3, 4]))
    p["K"] = g * draw(st.sampled_from([8, 16, 32, 64, 40, 1, 2, 4]))
    for d in DIMS[3 - ndim :]:
        i = DIMS.index(d)
        p[FILTER[i]] = draw(st.integers(1, 3))
        p[f"dil_{d}"] = draw(st.integers(1, 2))
        p[IMAGE[i]] = (p[FILTER[i]] - 1) * p[f"dil_{d}"] + 1 + draw(st.integers(0, 6))  # a non-empty output
        p[f"stride_{d}"] = draw(st.integers(1, 2))
        p[f"pad_{d}"] = draw(st.integers(0, 1))
    return p, draw(st.sampled_from(list(ATTRIBUTES))), draw(st.sampled_from(list(WIRE)))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(drawn=st.lists(problems(), min_size=6, max_size=6))
@pytest.mark.slow
def test_applicability_equals_the_python_problem_rules(plugin: Plugin, drawn: list) -> None:
    """On drawn problems of every direction, dtype and 1-3D, with groups, strides, dilations and
    padding: the plugin offers its engine exactly when the Python selector finds a kernel, whatever
    the memory format PyTorch sends (layout never changes what is served), and a convolution with a
    bias (forward and data gradient: a transposed convolution's forward) wherever one without."""
    forms = [{"memory_format": "contiguous"}, {"memory_format": "channels_last"}, {"bias": True}]
    cases = [(p, v, d, form) for p, v, d in drawn for form in forms if v != "bwd_weight" or "bias" not in form]
    graphs = [flatc(plugin, f"drawn{i}", graph(p, v, d, **form)) for i, (p, v, d, form) in enumerate(cases)]
    for (p, variant, dtype, form), answer in zip(cases, applicability(plugin, graphs), strict=True):
        expected = python_applicable(plugin, p, variant, dtype)
        event("applicable" if expected else "declined")
        assert (answer == str(engine_id(plugin, variant))) == expected, (p, variant, dtype, form, answer)
        if not expected:
            assert answer.startswith("none: ")


def normalized(document: dict) -> dict:
    """A graph as hipDNN reads it: tensors by uid, nodes in order, names left out."""
    tensors = {
        t["uid"]: (t["dims"], t["strides"], t["data_type"], bool(t.get("virtual", False))) for t in document["tensors"]
    }
    nodes = [(n["attributes_type"], n["compute_data_type"], n["attributes"]) for n in document["nodes"]]
    types = {k: document.get(k) for k in ("compute_data_type", "intermediate_data_type", "io_data_type")}
    return {"tensors": tensors, "nodes": nodes, **types}


@settings(max_examples=150, deadline=None)
@given(drawn=problems(), memory_format=st.sampled_from(list(MEMORY_FORMATS)), bias=st.booleans())
def test_the_harness_sends_the_graphs_the_census_sends(drawn: tuple, memory_format: str, bias: bool) -> None:
    """The graphs these tests play hipDNN with and the ones ``hipdnn census`` builds as PyTorch's
    Conv_hipdnn.cpp does (ckspace/emit/pytorch_graphs.py) are the same graphs: uids, dims, strides
    of each memory format (PyTorch runs 1D convolutions contiguous), types, the bias node and its
    tensor -- two statements of PyTorch's rules, each checking the other."""
    p, variant, dtype = drawn
    bias = bias and variant == "forward"  # PyTorch sends a bias with forward graphs only
    fmt = pytorch_graphs.memory_format_used(pytorch_graphs.MemoryFormat(memory_format), p["ndim"])
    layer = pytorch_graphs.Layer(ConvProblem(**{k: v for k, v in p.items() if k != "ndim"}, ndim=p["ndim"]), bias)
    theirs = pytorch_graphs.graph(layer, Variant(variant), Dtype(dtype), fmt)
    assert normalized(graph(p, variant, dtype, memory_format=fmt.value, bias=bias)) == normalized(theirs)


# -- execution -----------------------------------------------------------------------------------
def run_case(
    plugin: Plugin,
    p: dict,
    variant: str,
    dtype: str,
    kernel: str = "auto",
    tag: str = "run",
    knobs: tuple = (),
    **graph_options,
) -> list[str]:
    """Run ``p`` through the harness (the whole call order) with random inputs, the tensors laid out
    as ``graph_options`` (:func:`graph`'s) say; assert the output equals the CPU reference (with the
    bias and activation applied) and that the workspace the plugin asked is the workspace it used;
    returns the harness's lines. ``knobs``: more knob settings of the engine config."""
    rng = np.random.default_rng(7)
    document = graph(p, variant, dtype, **graph_options)
    by_uid = {t["uid"]: t for t in document["tensors"]}
    uids, written = UIDS[variant], WRITTEN[variant]
    logical = {
        role: (rng.integers(-4, 5, size=logical_dims(p)[role]) / 4).astype(NUMPY[dtype]) for role in READS[variant]
    }
    files = []
    for role, array in logical.items():
        path = plugin.work / f"{tag}_{uids[role]}.bin"
        path.write_bytes(placed(array, by_uid[uids[role]]["strides"]).tobytes())
        files.append(f"{uids[role]}={path}")
    bias = None
    if BIAS_UID in by_uid:
        bias_tensor = by_uid[BIAS_UID]
        bias = (rng.integers(-4, 5, size=bias_tensor["dims"][1]) / 8).astype(NUMPY[dtype])
        path = plugin.work / f"{tag}_bias.bin"
        path.write_bytes(placed(bias.reshape(bias_tensor["dims"]), bias_tensor["strides"]).tobytes())
        files.append(f"{BIAS_UID}={path}")
    out_tensor = by_uid[uids[written]]
    out_bytes = span(out_tensor["dims"], out_tensor["strides"]) * np.dtype(NUMPY[dtype]).itemsize
    config = {
        "engine_id": engine_id(plugin, variant),
        "knobs": [{"knob_id": hipdnn_plugin.KNOB, "value_type": "StringValue", "value": {"value": kernel}}, *knobs],
    }
    out = plugin.work / f"{tag}_out.bin"
    lines = harness(
        plugin,
        "run",
        str(flatc(plugin, f"{tag}_graph", document)),
        str(flatc(plugin, f"{tag}_config", config, root="EngineConfig")),
        str(plugin.work / f"{tag}_details.bin"),
        str(uids[written]),
        str(out),
        str(out_bytes),
        *files,
    )
    if "executed" in lines:
        got = gathered(np.frombuffer(out.read_bytes(), dtype=NUMPY[dtype]), out_tensor["dims"], out_tensor["strides"])
        a, b = (to_naive(p, role, logical[role]) for role in READS[variant])
        expected = from_naive(p, written, NAIVE[variant](p, a, b))
        if bias is not None:
            rounded = expected.astype(NUMPY[dtype]).astype(np.float64)  # the kernel stores its result first
            expected = rounded + bias.astype(np.float64).reshape(1, -1, *[1] * p["ndim"])
        activation = graph_options.get("activation")
        if activation is not None:
            expected = ACTIVATIONS[activation[0]](expected, activation[1])
        tolerance = {"fp32": 1e-5, "fp16": 2e-3, "bf16": 1e-2}[dtype]
        np.testing.assert_allclose(got.astype(np.float64), expected, rtol=tolerance, atol=tolerance)
        (asked,) = [int(line.split()[1]) for line in lines if line.startswith("workspace ") and "used" not in line]
        (used,) = [int(line.split()[2]) for line in lines if line.startswith("workspace used ")]
        assert used <= asked and (asked == 0 or used > asked - ALIGNMENT), (asked, used)
    return lines


RUNS = [
    ("forward", "bf16", {**P2}),
    ("forward", "fp16", {"ndim": 1, "N": 2, "G": 2, "C": 16, "K": 16, "Wi": 9, "X": 3, "stride_w": 2, "pad_w": 1}),
    ("forward", "fp32", {"ndim": 3, "N": 1, "G": 1, "C": 8, "K": 8, "Di": 3, "Hi": 4, "Wi": 4, "Z": 2, "Y": 2, "X": 2}),
    ("bwd_data", "bf16", {**P2, "dil_h": 2, "Hi": 7}),
    (
        "bwd_data",
        "fp16",
        {
            "ndim": 3,
            "N": 1,
            "G": 2,
            "C": 16,
            "K": 16,
            "Di": 3,
            "Hi": 3,
            "Wi": 4,
            "Y": 3,
            "X": 3,
            "pad_h": 1,
            "pad_w": 1,
        },
    ),
    ("bwd_data", "fp32", {"ndim": 1, "N": 2, "G": 1, "C": 8, "K": 8, "Wi": 7, "X": 3}),
    ("bwd_weight", "bf16", {**P2, "stride_h": 2, "stride_w": 2}),
    (
        "bwd_weight",
        "fp16",
        {
            "ndim": 3,
            "N": 2,
            "G": 2,
            "C": 16,
            "K": 16,
            "Di": 3,
            "Hi": 3,
            "Wi": 3,
            "Z": 1,
            "Y": 3,
            "X": 3,
            "pad_h": 1,
            "pad_w": 1,
        },
    ),
]


LAYOUTS = [
    *[(v, d, p, {"memory_format": "contiguous"}) for v, d, p in RUNS],
    *[(v, d, p, {"memory_format": "channels_last"}) for v, d, p in RUNS],
    ("forward", "bf16", P2, {"bias": True}),
    ("forward", "fp32", RUNS[2][2], {"bias": True, "memory_format": "channels_last"}),
    (
        "forward",
        "fp16",
        RUNS[1][2],
        {"bias": True, "activation": ("RELU_FWD", {"relu_upper_clip": 0.75, "relu_lower_clip_slope": 0.125})},
    ),
    (
        "forward",
        "bf16",
        {**P2, "Hi": 7, "Wi": 9},
        {"strides": padded, "bias": True, "activation": ("ELU_FWD", {"elu_alpha": 0.5})},
    ),
    ("forward", "fp32", {**P2, "Hi": 5, "Wi": 7}, {"strides": width_outermost, "activation": ("SIGMOID_FWD", {})}),
    ("bwd_data", "bf16", RUNS[3][2], {"bias": True}),  # a transposed convolution with bias
    ("bwd_data", "fp16", RUNS[4][2], {"bias": True, "memory_format": "channels_last", "activation": ("TANH_FWD", {})}),
    ("bwd_weight", "bf16", {**P2, "Hi": 7, "Wi": 9, "stride_h": 2}, {"strides": padded}),
]
"""Every direction and dtype in both of PyTorch's memory formats; biases and activations; strides of
views and permutations."""


def layout_id(case: tuple) -> str:
    variant, dtype, p, options = case
    layout = options["strides"].__name__ if "strides" in options else options.get("memory_format", "contiguous")
    parts = [variant, dtype, f"{p['ndim']}d", layout]
    parts += ["bias"] * bool(options.get("bias"))
    parts += [options["activation"][0]] if "activation" in options else []
    return "-".join(parts)


@pytest.mark.parametrize(("variant", "dtype", "p", "options"), LAYOUTS, ids=map(layout_id, LAYOUTS))
def test_execution_through_the_plugin_equals_the_cpu_reference(
    plugin: Plugin, variant: str, dtype: str, p: dict, options: dict
) -> None:
    """hipDNN's whole call order, the dispatcher's pick, the caller's workspace (holding the layout
    conversions, all of it used): the output, bias and activation applied, equals the naive
    convolution; the log says what the pointwise nodes fused (a bias alone is "bias fused"); the
    details list the pick beside the other kernels that can run it."""
    lines = run_case(plugin, p, variant, dtype, **options)
    assert "applicable 1" in lines and "executed" in lines, lines
    (said,) = [line for line in lines if line.startswith("log 0: ") and ": kernel " in line]
    fused = {(False, False): "no pointwise nodes", (True, False): "bias fused", (False, True): "activation fused"}
    fused[True, True] = "bias and activation fused"
    assert f", {fused[bool(options.get('bias')), 'activation' in options]}, " in said, said  # what was fused
    details = decoded(plugin, plugin.work / "run_details.bin", "EngineDetails")
    knob, *split_k = details["knobs"]
    assert knob["knob_id"] == hipdnn_plugin.KNOB and knob["default_value"]["value"] == hipdnn_plugin.KNOB_AUTO
    names = knob["constraint"]["valid_values"]
    assert names[0] == hipdnn_plugin.KNOB_AUTO and len(names) > 1
    assert details["engine_id"] == engine_id(plugin, variant)
    if variant != "bwd_weight":
        assert split_k == []  # no split-K outside weight gradients
        return
    (split_k,) = split_k
    assert split_k["knob_id"] == hipdnn_plugin.KNOB_K_BATCH and split_k["default_value"]["value"] == 1
    assert split_k["constraint"]["valid_values"] == [
        k for k in hipdnn_plugin.SPLIT_K_CHOICES if python_applicable(plugin, {**p, "k_batch": k}, variant, dtype)
    ]


IN_DOMAIN = {"ndim": 2, "N": 1, "G": 1, "C": 64, "K": 256, "Hi": 14, "Wi": 14, "Y": 1, "X": 1}
"""A problem inside the shipped model's training problems whose pick is a kernel the model saw."""


@pytest.mark.parametrize(
    ("variant", "p", "source"),
    [("forward", P2, "extrapolated"), ("forward", IN_DOMAIN, "model"), ("bwd_data", P2, "analytical")],
)
def test_the_pick_its_predicted_tflops_and_where_they_come_from_are_said(
    plugin: Plugin, variant: str, p: dict, source: str
) -> None:
    """The log at context creation and the kernel knob's description state the pick, its predicted
    TFLOPS and their source, equal to the Python selector's: gfx950 forward bf16 has a shipped model
    (P2 has two groups, beyond the model's training problems: extrapolated; a 1x1 convolution of
    one group whose pick the model has seen: the model's own), bwd_data ranks by the analytical
    model."""
    lines = run_case(plugin, p, variant, "bf16", tag=f"estimate_{variant}", memory_format="channels_last")
    (said,) = [line for line in lines if line.startswith("log 0: ") and ": kernel " in line]
    found = re.search(r"kernel (\w+), predicted ([\d.e+-]+) TFLOPS \(an estimate: (\w+)\)", said)
    assert found is not None, said
    problem = ConvProblem(**{k: v for k, v in p.items() if k != "ndim"}, ndim=p["ndim"])
    configs = library_configs(plugin.tree)
    cell = [c for c in configs if (c.variant.value, c.dtype.value) == (variant, "bf16")]
    pick = python_selector(Variant(variant), Dtype.BF16).select(problem, cell, k=1, pool=list(configs)).top[0]
    assert (found[1], found[3]) == (pick.name, source)
    assert source == ("extrapolated" if pick.source.startswith("model, extrapolated") else pick.source)
    assert float(found[2]) == pytest.approx(pick.predicted_tflops, rel=1e-3)
    knob = decoded(plugin, plugin.work / f"estimate_{variant}_details.bin", "EngineDetails")["knobs"][0]
    assert f"predicted {found[2]} TFLOPS (an estimate: {found[3]})" in knob["description"]


def test_the_knob_pins_a_kernel_and_refuses_one_that_cannot_run(plugin: Plugin) -> None:
    """Each kernel the details offer runs the graph to the reference; a kernel of another direction
    is declined at context creation, a name the library lacks is a bad parameter."""
    run_case(plugin, P2, "forward", "bf16", tag="pin")
    details = decoded(plugin, plugin.work / "pin_details.bin", "EngineDetails")
    offered = details["knobs"][0]["constraint"]["valid_values"][1:]
    for name in offered[:3]:
        lines = run_case(plugin, P2, "forward", "bf16", kernel=name, tag="pinned")
        assert "executed" in lines and any(f"kernel {name}," in line for line in lines), lines
    other = next(k.name for k in plugin.manifest.kernels if k.variant == "bwd_weight")
    lines = run_case(plugin, P2, "forward", "bf16", kernel=other, tag="other")
    assert any(
        line.startswith("refused workspace size 5: ") and "cannot run this convolution" in line for line in lines
    )
    lines = run_case(plugin, P2, "forward", "bf16", kernel="no_such_kernel", tag="unknown")
    assert any("refused workspace size 1: " in line and "no kernel named 'no_such_kernel'" in line for line in lines)


def int_knob(knob_id: str, value: int) -> dict:
    return {"knob_id": knob_id, "value_type": "IntValue", "value": {"value": value}}


@pytest.fixture(scope="module")
def two_stage(tmp_path_factory: pytest.TempPathFactory, plugin: Plugin) -> Plugin:
    """A plugin over two-stage bwd_weight kernels alone (their fp32 result goes to the caller's
    workspace), with the harness of ``plugin``."""
    tree = tmp_path_factory.mktemp("two_stage") / "tree"
    argv = ["emit", "--arch", "gfx950", "--rule-set", "full", "--variant", "bwd_weight", "--ndim", "2"]
    assert main([*argv, "--dtype", "bf16", "--where", "two_stage", "--hipdnn-plugin", "--out", str(tree)]) == 0
    manifest = Manifest.model_validate_json((tree / "manifest.json").read_bytes())
    assert manifest.kernels and all(k.config["two_stage"] for k in manifest.kernels)
    return Plugin(tree, manifest, build_standin_plugin(tree), plugin.harness, tree.parent)


@pytest.mark.slow
def test_hipdnns_global_knobs_are_honoured_or_ignored(two_stage: Plugin) -> None:
    """hipDNN's own knobs may come with any engine config: a workspace limit below what the pick
    needs declines the engine at context creation, one at it runs; the deterministic knob and knobs
    of hipDNN's the plugin does not know run as without them; a knob of neither is refused."""
    plugin, p, variant, dtype, kernel = two_stage, {**P2, "stride_h": 2, "stride_w": 2}, "bwd_weight", "bf16", "auto"
    cl = {"memory_format": "channels_last"}  # no conversion: the workspace is the kernel's alone
    lines = run_case(plugin, p, variant, dtype, tag="global", **cl)
    (needed,) = [int(line.split()[1]) for line in lines if re.fullmatch(r"workspace \d+", line)]
    assert needed == p["K"] * p["C"] // p["G"] * p["Y"] * p["X"] * 4  # the fp32 weight gradient
    limit = hipdnn_plugin.KNOB_WORKSPACE_LIMIT
    lines = run_case(plugin, p, variant, dtype, kernel, tag="below", knobs=(int_knob(limit, needed - 1),), **cl)
    assert any(
        line.startswith("refused workspace size 5: ")
        and f"needs {needed} bytes of workspace, more than {limit} {needed - 1}" in line
        for line in lines
    ), lines
    for tag, knobs in {
        "at": (int_knob(limit, needed),),
        "deterministic": (int_knob(hipdnn_plugin.KNOB_DETERMINISTIC, 1),),
        "future": (int_knob("global.some_later_knob", 3), int_knob("global.benchmarking", 1)),
    }.items():
        lines = run_case(plugin, p, variant, dtype, kernel, tag=tag, knobs=knobs, **cl)
        assert "executed" in lines, (tag, lines)
    for knobs, status, said in [
        ((int_knob(limit, -1),), 2, f"knob {limit} is -1: a number of bytes, at least 0"),
        (({"knob_id": limit, "value_type": "StringValue", "value": {"value": "1 GiB"}},), 1, "an integer"),
        ((int_knob("miopen.solver", 3),), 1, "sets knob 'miopen.solver'; this plugin's knobs are"),
    ]:
        lines = run_case(plugin, p, variant, dtype, tag="bad", knobs=knobs)
        assert any(line.startswith(f"refused workspace size {status}: ") and said in line for line in lines), lines


@pytest.mark.slow
def test_split_k_runs_a_weight_gradient_through_the_reduction_split_k_ways(plugin: Plugin) -> None:
    """Every split the details offer runs to the reference (the stand-in adds each split's partial
    sums as the kernels do); a split of another direction, of 0, or asked with deterministic runs
    is declined at context creation with its reason."""
    p, variant, dtype = {**P2, "N": 3, "Hi": 9, "Wi": 8}, "bwd_weight", "fp16"
    run_case(plugin, p, variant, dtype, tag="split")
    offered = decoded(plugin, plugin.work / "split_details.bin", "EngineDetails")["knobs"][1]["constraint"]
    assert offered["valid_values"] == list(hipdnn_plugin.SPLIT_K_CHOICES)  # CK pads K: a split may be all padding
    for k in offered["valid_values"][1:3]:
        lines = run_case(plugin, p, variant, dtype, tag=f"split{k}", knobs=(int_knob(hipdnn_plugin.KNOB_K_BATCH, k),))
        assert "executed" in lines and any(f", k_batch {k}, " in line for line in lines), lines
    knob = hipdnn_plugin.KNOB_K_BATCH
    for case, knobs, status, said in [
        ("forward", (int_knob(knob, 2),), 1, f"knob {knob} splits weight gradients; CKSPACE_GFX950_CONV_FWD runs"),
        (variant, (int_knob(knob, 0),), 2, f"knob {knob} is 0: a split-K factor, at least 1"),
        (variant, ({"knob_id": knob, "value_type": "StringValue", "value": {"value": "2"}},), 1, "(an integer)"),
        (
            variant,
            (int_knob(knob, 2), int_knob(hipdnn_plugin.KNOB_DETERMINISTIC, 1)),
            5,
            f"{hipdnn_plugin.KNOB_DETERMINISTIC} asks for deterministic runs; {knob} 2 adds partial sums atomically",
        ),
        (variant, (int_knob(knob, 2**40),), 5, "the convolution lies beyond what the kernels index"),
    ]:
        lines = run_case(plugin, p, case, dtype if case == variant else "bf16", tag="badsplit", knobs=knobs)
        assert any(line.startswith(f"refused workspace size {status}: ") and said in line for line in lines), lines
    # asked for deterministic runs, an unsplit one still runs
    lines = run_case(plugin, p, variant, dtype, tag="det", knobs=(int_knob(hipdnn_plugin.KNOB_DETERMINISTIC, 1),))
    assert "executed" in lines


def test_two_handles_on_two_threads_give_the_same_answers(plugin: Plugin) -> None:
    graphs = [
        flatc(plugin, "t_fwd", graph(P2, "forward", "bf16")),
        flatc(plugin, "t_bwd", graph(P2, "bwd_data", "fp16")),
        flatc(plugin, "t_nchw", graph(P2, "forward", "bf16", strides=row_major)),
        flatc(plugin, "t_bias", graph(P2, "forward", "bf16", bias=True)),
        flatc(plugin, "t_wrw", graph(P2, "bwd_weight", "fp32")),
    ]
    lines = harness(plugin, "threads", "40", *map(str, graphs))
    assert "threads agree 400" in lines


# -- the schema's wire facts -----------------------------------------------------------------------
HIPDNN_ORDER = {
    "Graph": ["name", "compute_data_type", "intermediate_data_type", "io_data_type", "tensors", "nodes"],
    "Node": ["name", "compute_data_type", "attributes"],
    "TensorAttributes": ["uid", "name", "data_type", "strides", "dims", "virtual"],
    "ConvolutionFwdAttributes": [
        "x_tensor_uid",
        "w_tensor_uid",
        "y_tensor_uid",
        "pre_padding",
        "post_padding",
        "stride",
        "dilation",
        "conv_mode",
    ],
    "ConvolutionBwdAttributes": [
        "dy_tensor_uid",
        "w_tensor_uid",
        "dx_tensor_uid",
        "pre_padding",
        "post_padding",
        "stride",
        "dilation",
        "conv_mode",
    ],
    "ConvolutionWrwAttributes": [
        "x_tensor_uid",
        "dy_tensor_uid",
        "dw_tensor_uid",
        "pre_padding",
        "post_padding",
        "stride",
        "dilation",
        "conv_mode",
    ],
    "EngineConfig": ["engine_id", "knobs"],
    "KnobSetting": ["knob_id", "value"],
    "EngineDetails": ["engine_id", "knobs", "behavior_notes", "name"],
    "Knob": ["knob_id", "description", "default_value", "constraint", "deprecated"],
}
"""hipDNN's field order (flatbuffers_sdk/schemas, read by hand), up to the last field the plugin
uses: a table's fields are numbered by their position on the wire."""
HIPDNN_UNIONS = {
    "NodeAttributes": [
        "BatchnormInferenceAttributes",
        "PointwiseAttributes",
        "BatchnormBackwardAttributes",
        "BatchnormAttributes",
        "ConvolutionFwdAttributes",
        "ConvolutionBwdAttributes",
        "ConvolutionWrwAttributes",
    ],
    "KnobValue": ["IntValue", "FloatValue", "StringValue"],
    "KnobConstraint": ["IntConstraint", "FloatConstraint", "StringConstraint"],
}


def test_the_schema_states_hipdnns_field_and_member_order(plugin: Plugin) -> None:
    """Names are not on the wire, positions are: each table's fields and each union's members in
    hipDNN's order, and the enum values hipDNN gives them."""
    text = (plugin.tree / hipdnn_plugin.SCHEMA).read_text()
    tables = {
        name: re.findall(r"^\s*(\w+)\s*:", body, flags=re.M)
        for name, body in re.findall(r"table (\w+) \{([^}]*)\}", text)
    }
    unions = {name: [m.strip() for m in body.split(",")] for name, body in re.findall(r"union (\w+) \{([^}]*)\}", text)}
    for table, fields in HIPDNN_ORDER.items():
        assert tables[table] == fields, table
    assert unions == HIPDNN_UNIONS
    assert "FLOAT = 1, HALF = 2, BFLOAT16 = 3, DOUBLE = 4" in text
    assert "enum ConvMode : byte { UNSET = 0, CONVOLUTION = 1, CROSS_CORRELATION = 2 }" in text


# -- the commands ----------------------------------------------------------------------------------
def test_emit_names_the_plugin_and_a_host_only_build_says_it_is_not_built(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tree = tmp_path / "tree"
    assert main(["emit", "--arch", "gfx950", "--variant", "bwd_weight", "--ndim", "2", "--dtype", "bf16",
                 "--hipdnn-plugin", "--out", str(tree)]) == 0  # fmt: skip
    out = capsys.readouterr().out
    assert "hipDNN plugin ckspace_hipdnn_gfx950: engines CKSPACE_GFX950_CONV_BWD_WEIGHT" in out
    assert "dispatcher:" in out  # --hipdnn-plugin implies --with-selector
    assert main(["build", str(tree), "--host-only"]) == 0
    assert "hipDNN plugin: not built (it runs the kernels): build with --arch to link it" in capsys.readouterr().out


def _plugin_tree(base: Path) -> Path:
    tree = base / "tree"
    assert main(["emit", "--arch", "gfx942", "--variant", "forward", "--ndim", "2", "--dtype", "bf16",
                 "--hipdnn-plugin", "--out", str(tree)]) == 0  # fmt: skip
    return tree


@pytest.mark.slow
def test_build_links_the_plugin_with_the_kernels(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``ckspace build`` (here with tests/test_build.py's stand-in HIP compiler, whose link writes a
    placeholder) compiles the plugin with flatc's reader and links it from the kernels' and the
    dispatcher's objects with hipDNN's exports alone; the command names it."""
    use_fake_toolchain(tmp_path, monkeypatch, tmp_path / "fakeclang")
    tree = _plugin_tree(tmp_path)
    capsys.readouterr()
    assert main(["build", str(tree), "--arch", "gfx942", "--jobs", "1"]) == 0
    out = capsys.readouterr().out
    plugin = tree / "build" / "gfx942" / "libckspace_hipdnn_gfx942.so"
    assert f"hipDNN plugin: {plugin} (self-contained: copy it into the directory HIPDNN_PLUGIN_DIR names)" in out
    assert plugin.is_file() and (tree / "build" / "gfx942" / "hipdnn" / hipdnn_plugin.READER_HEADER).is_file()
    report = json.loads((tree / "build" / "gfx942" / "report.json").read_text())
    assert report["plugin"] == str(plugin) and report["plugin_error"] is None
    assert (tree / "build" / "gfx942" / "hipdnn_exports.map").read_text() == plugin_build.EXPORTS


def refused_build(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, path: Path) -> tuple[Path, int]:
    """Build a plugin tree with the fake toolchain, no flatc package and only ``path`` on PATH;
    returns the tree and build's exit status."""
    use_fake_toolchain(tmp_path, monkeypatch, tmp_path / "fakeclang")
    tree = _plugin_tree(tmp_path)

    def no_package(name: str) -> None:
        raise plugin_build.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(plugin_build.metadata, "files", no_package)
    monkeypatch.setenv("PATH", str(path))
    plugin_build.flatbuffers.cache_clear()
    try:
        return tree, main(["build", str(tree), "--arch", "gfx942", "--jobs", "1"])
    finally:
        plugin_build.flatbuffers.cache_clear()


def test_a_build_without_flatc_is_refused_before_it_compiles(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    tree, status = refused_build(tmp_path, monkeypatch, tmp_path / "empty")
    assert status == 2
    err = capsys.readouterr().err
    assert "the hipDNN plugin needs flatc and FlatBuffers headers of its version; none found" in err
    assert "pip install 'ckspace[hipdnn]'" in err and not (tree / "build" / "gfx942" / "logs").exists()


@pytest.mark.parametrize(
    ("script", "said"),
    [
        (f"exec {shutil.which('sleep')} 600", "no answer to --version within 0.5 s"),
        ("echo broken >&2; exit 3", "does not run: --version exited with status 3"),
    ],
    ids=["hangs", "fails"],
)
def test_a_flatc_that_hangs_or_fails_is_named_not_waited_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], script: str, said: str
) -> None:
    flatc = tmp_path / "bin" / "flatc"
    flatc.parent.mkdir()
    flatc.write_text(f"#!/bin/sh\n{script}\n")
    flatc.chmod(0o755)
    monkeypatch.setattr(plugin_build, "VERSION_SECONDS", 0.5)
    started = time.monotonic()
    assert refused_build(tmp_path, monkeypatch, flatc.parent)[1] == 2
    assert time.monotonic() - started < 60
    err = capsys.readouterr().err
    assert f"found {flatc} ({said}; headers missing in {tmp_path / 'include'})" in err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_damaged_and_huge_graphs_are_declined_never_crash(plugin: Plugin) -> None:
    """hipDNN hands the plugin whatever bytes it holds: 300 graphs with random bytes of a valid one
    changed, and graphs of 64-bit extremes (verified, then judged, never overflowing) are each
    answered, in one process that keeps running."""
    valid = flatc(plugin, "valid", graph(P2, "forward", "bf16")).read_bytes()
    rng = np.random.default_rng(29)
    damaged = []
    for i in range(300):
        data = bytearray(valid)
        for position in rng.integers(0, len(data), size=int(rng.integers(1, 6))):
            data[position] = int(rng.integers(0, 256))
        path = plugin.work / "wire" / f"damaged{i}.bin"
        path.write_bytes(bytes(data))
        damaged.append(path)
    huge = graph(P2, "forward", "bf16")
    huge["tensors"][0]["dims"] = [2**62, 2**62, 2**62, 2**62]
    beyond = graph({**P2, "N": 2**31}, "forward", "bf16")  # N beyond CK Tile's 32-bit index
    negative = graph(P2, "forward", "bf16")
    negative["nodes"][0]["attributes"]["stride"] = [-(2**63), 1]
    extremes = [flatc(plugin, name, g) for name, g in (("huge", huge), ("beyond", beyond), ("negative", negative))]
    answers = applicability(plugin, [*damaged, *extremes])
    forward = str(engine_id(plugin, "forward"))
    assert all(a == forward or a.startswith("none: ") for a in answers)
    assert any(a.startswith("none: ") for a in answers[:300]) and any(a == forward for a in answers[:300])
    assert "the input and weight make 4611686018427387904 x 32" in answers[300], answers[300]
    assert "beyond what the kernels index" in answers[301], answers[301]
    assert "spatial dimension 0 has stride -9223372036854775808" in answers[302], answers[302]
