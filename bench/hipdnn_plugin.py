"""What a hipDNN applicability question costs the plugin (``ckspace emit --hipdnn-plugin``).

hipDNN asks every engine of every plugin whether it serves a graph, each time a framework builds
one (PyTorch caches its graphs per shape, so once per new convolution shape). The plugin verifies
the FlatBuffer, reads the convolution and, when the graph passes its checks, asks the dispatcher
(``ckspace_select``: the problem rules of every kernel of the cell and the ranker). Printed per
graph, in one run: a graph declined before the dispatcher is asked (true convolution mode: the
baseline, the cost of verifying and reading) and graphs the dispatcher answers — channels-last,
PyTorch's default NCHW (the layout check of the strided run added) and a convolution with a bias
(a second, pointwise node read) — over a stand-in library of the default rule set's gfx950 kernels
of every direction, 1-3D and dtype (tests/test_hipdnn.py's).

    python3 bench/hipdnn_plugin.py [--rounds 20000]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # the stand-in libraries live there
from standin_library import build_standin_plugin

from ckspace.cli import main as ckspace
from ckspace.compiling.plugin_build import flatbuffers
from ckspace.emit.hipdnn_plugin import SCHEMA

HARNESS = Path(__file__).resolve().parents[1] / "tests" / "hipdnn" / "harness.c"


def _graph(
    variant_kind: str, uids: dict, nchw: bool, dims: dict, mode: str = "CROSS_CORRELATION", bias: bool = False
) -> dict:
    def strides(d: list[int]) -> list[int]:
        order = list(reversed(range(len(d)))) if nchw else [1, *range(len(d) - 1, 1, -1), 0]
        out, step = [0] * len(d), 1
        for i in order:
            out[i] = step
            step *= d[i]
        return out

    tensors = [
        {"uid": uid, "data_type": "BFLOAT16", "dims": d, "strides": strides(d)} for uid, d in sorted(dims.items())
    ]
    attributes = {**uids, "pre_padding": [1, 1], "post_padding": [1, 1], "stride": [1, 1], "dilation": [1, 1]}
    attributes["conv_mode"] = mode
    nodes = [{"name": "conv", "compute_data_type": "FLOAT", "attributes_type": variant_kind, "attributes": attributes}]
    if bias:  # as PyTorch sends it: the convolution's result virtual, an ADD of a [1, K, 1, 1] bias into y
        out = next(t for t in tensors if t["uid"] == 3)
        tensors.append({**out, "uid": 5, "virtual": True, "data_type": "FLOAT"})
        tensors.append(
            {"uid": 4, "data_type": "BFLOAT16", "dims": [1, out["dims"][1], 1, 1], "strides": [out["dims"][1], 1, 1, 1]}
        )
        attributes["y_tensor_uid"] = 5
        add = {"operation": "ADD", "in_0_tensor_uid": 5, "in_1_tensor_uid": 4, "out_0_tensor_uid": 3}
        nodes.append(
            {
                "name": "bias",
                "compute_data_type": "BFLOAT16",
                "attributes_type": "PointwiseAttributes",
                "attributes": add,
            }
        )
    return {"io_data_type": "BFLOAT16", "tensors": tensors, "nodes": nodes}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        work = Path(scratch)
        tree = work / "tree"
        argv = ["emit", "--arch", "gfx950", "--rule-set", "default", "--variant", "forward", "bwd_data", "bwd_weight"]
        argv += ["--ndim", "1", "2", "3", "--dtype", "fp16", "bf16", "fp32", "--hipdnn-plugin", "--out", str(tree)]
        assert ckspace(argv) == 0
        plugin = build_standin_plugin(tree)
        harness = work / "harness"
        subprocess.run(["cc", "-O2", str(HARNESS), "-o", str(harness), "-ldl", "-lpthread"], check=True)
        dims = {1: [8, 256, 56, 56], 2: [256, 256, 3, 3], 3: [8, 256, 56, 56]}
        forward = ("ConvolutionFwdAttributes", {"x_tensor_uid": 1, "w_tensor_uid": 2, "y_tensor_uid": 3})
        wrw = ("ConvolutionWrwAttributes", {"x_tensor_uid": 1, "dy_tensor_uid": 3, "dw_tensor_uid": 2})
        cases = {
            "declined (true convolution: verify and read only)": _graph(*forward, False, dims, "CONVOLUTION"),
            "forward bf16 2D channels-last (16 kernels, the shipped ranker)": _graph(*forward, False, dims),
            "forward bf16 2D NCHW (the same, strides checked)": _graph(*forward, True, dims),
            "forward bf16 2D NCHW with bias (conv -> ADD)": _graph(*forward, True, dims, bias=True),
            "bwd_weight bf16 2D channels-last (10 kernels, analytical score)": _graph(*wrw, False, dims),
        }
        paths = []
        for i, document in enumerate(cases.values()):
            source = work / f"g{i}.json"
            source.write_text(json.dumps(document))
            subprocess.run([flatbuffers().flatc, "-b", "-o", str(work), str(tree / SCHEMA), str(source)], check=True)
            paths.append(str(work / f"g{i}.bin"))
        done = subprocess.run(
            [str(harness), str(plugin), "time", str(args.rounds), *paths], capture_output=True, text=True, check=True
        )
        times = [line.rsplit(": ", 1)[1] for line in done.stdout.splitlines() if line.startswith(str(work))]
        print(f"one applicability question, mean of {args.rounds} (stand-in library of 223 kernels):")
        for label, spent in zip(cases, times, strict=True):
            print(f"  {label}: {spent}")


if __name__ == "__main__":
    main()
