"""``ckspace hipdnn census``: a workload's graphs asked of a hipDNN plugin, as hipDNN asks.

What is checked, and against what:

* the census's answer for every graph equals what ``tests/hipdnn/harness.c`` (hipDNN's loader and
  call order, written apart from the census's ctypes probe) gets from the same plugin for the same
  serialized graph, for the plugin over the stand-in ``ckspace_run`` and for the census-only link
  of an emitted tree (no kernels);
* a plugin that crashes on a graph, hangs on one or declines one costs that graph alone, and the
  census says which and why (``tests/census/fake_plugin.c``);
* a plugin linked with HIP answers with no GPU over the stand-in HIP runtime, for the arch in its
  engine names or the one ``--arch`` gives, and a plugin that reports no device is refused in one
  line with its reason;
* bad input is one line and exit 2.
"""

from __future__ import annotations

import csv
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import c_compiler

from ckspace.census.survey import Verdict, read_layers, run_census, totals
from ckspace.cli import main
from ckspace.core.vocab import Dtype, Variant
from ckspace.emit.pytorch_graphs import MemoryFormat
from ckspace.select.compiled import host_c_compiler

HERE = Path(__file__).parent
FAKE = HERE / "census" / "fake_plugin.c"
HARNESS = HERE / "hipdnn" / "harness.c"
COLUMNS = ["layer", "N", "C", "K", "Hi", "Wi", "Y", "X", "stride", "pad", "bias"]


def write_csv(path: Path, rows: list[list]) -> Path:
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(COLUMNS)
        writer.writerows(rows)
    return path


def hip_headers() -> bool:
    compiler = host_c_compiler()
    if compiler is None:
        return False
    probe = subprocess.run(
        [compiler, "-D__HIP_PLATFORM_AMD__", "-fsyntax-only", "-x", "c", "-"],
        input="#include <hip/hip_runtime_api.h>\n",
        capture_output=True,
        text=True,
        check=False,
    )
    return probe.returncode == 0


def fake_plugin(folder: Path, *, hip: bool = False) -> Path:
    """tests/census/fake_plugin.c as a plugin; with ``hip``, linked with a HIP runtime of a soname and
    symbol version no ROCm has (``libamdhip64.so.99``, ``hip_9.9``), left where the loader does not
    look: only the census's stand-in, which takes both from the plugin's file, can meet it."""
    compiler = host_c_compiler()
    assert compiler is not None, "the census tests need a C compiler"
    folder.mkdir(parents=True, exist_ok=True)
    command = [compiler, "-shared", "-fPIC", "-O1", '-DFAKE_ARCH_UPPER="GFX942"', str(FAKE)]
    if hip:
        runtime = folder / "hiplib"
        runtime.mkdir(exist_ok=True)
        (runtime / "hip.map").write_text("hip_9.9 { global: hipGetDevice; hipGetDeviceProperties; local: *; };\n")
        (runtime / "hip.c").write_text(
            "int hipGetDevice(int* d) { return 100; }\nint hipGetDeviceProperties(void* p, int d) { return 100; }\n"
        )
        subprocess.run(
            [
                *(compiler, "-shared", "-fPIC", str(runtime / "hip.c"), "-Wl,-soname,libamdhip64.so.99"),
                *(f"-Wl,--version-script={runtime / 'hip.map'}", "-o", str(runtime / "libamdhip64.so.99")),
            ],
            check=True,
        )
        command += ["-DFAKE_HIP", "-D__HIP_PLATFORM_AMD__", f"-L{runtime}", "-l:libamdhip64.so.99"]
    output = folder / ("libfake_hip.so" if hip else "libfake.so")
    subprocess.run([*command, "-o", str(output)], check=True)
    return output


def test_issue_37_item_4_a_crash_or_a_hang_costs_one_graph_and_is_said(tmp_path: Path) -> None:
    plugin = fake_plugin(tmp_path)
    rows = [
        ["a", 1, 8, 8, 5, 5, 1, 1, 1, 0, 0],
        ["crashes", 1, 777, 8, 5, 5, 1, 1, 1, 0, 0],
        ["b", 1, 16, 8, 5, 5, 1, 1, 1, 0, 0],
        ["hangs", 1, 555, 8, 5, 5, 1, 1, 1, 0, 0],
        ["declined", 1, 333, 8, 5, 5, 1, 1, 1, 0, 0],
        ["c", 1, 24, 8, 5, 5, 1, 1, 1, 0, 1],
    ]
    layers = read_layers(write_csv(tmp_path / "layers.csv", rows))
    census = run_census(plugin, layers, (Variant.FORWARD,), Dtype.BF16, MemoryFormat.CONTIGUOUS, timeout=3)
    answers = [a[Variant.FORWARD] for a in census.answers]
    assert [a.verdict for a in answers] == [
        Verdict.SERVED,
        Verdict.CRASHED,
        Verdict.SERVED,
        Verdict.CRASHED,
        Verdict.DECLINED,
        Verdict.SERVED,
    ]
    assert "SIGSEGV" in answers[1].reason and answers[3].reason == "no answer within 3 s"
    assert answers[4].reason == "not applicable: 333 channels are not served"
    assert answers[0].engines == ("CKSPACE_GFX942_CONV_FWD",)
    counted = totals(census)
    assert counted["directions"] == {"forward": {"served": 3, "declined": 1, "crashed": 2}}
    assert [(e["reason"], e["count"]) for e in counted["declined_by_reason"]] == [
        ("crashed", 2),
        ("not applicable: N channels are not served", 1),
    ]


@pytest.mark.skipif(not hip_headers(), reason="no HIP headers: the stand-in HIP runtime cannot be built")
def test_issue_37_item_4_a_hip_linked_plugin_answers_with_no_gpu_for_its_arch(tmp_path: Path, capsys) -> None:
    """The fake plugin's device check asks HIP; its own HIP runtime (left off the loader's path) is
    never found, so any answer comes through the stand-in, of the arch in the engine names unless
    --arch says otherwise."""
    plugin = fake_plugin(tmp_path, hip=True)
    direct = subprocess.run(
        [sys.executable, "-c", f"import ctypes; ctypes.CDLL({str(plugin)!r})"], capture_output=True, text=True
    )
    assert direct.returncode != 0 and "libamdhip64.so.99" in direct.stderr  # not loadable on its own
    problems = write_csv(tmp_path / "l.csv", [["a", 1, 8, 8, 5, 5, 1, 1, 1, 0, 0]])
    argv = ["hipdnn", "census", str(plugin), "--problems", str(problems), "--variant", "forward", "--format", "json"]
    assert main(argv) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["device"] == {"arch": "gfx942", "stand_in_hip_runtime": True}
    assert report["layers"][0]["graphs"]["forward"]["verdict"] == "served"
    assert main([*argv, "--arch", "gfx90a"]) == 2
    assert capsys.readouterr().err == "ckspace: error: the plugin reports no device: the device is gfx90a\n"


@pytest.mark.parametrize(
    "change, message",
    [
        (["--memory-format", "nchw"], "unknown memory format 'nchw'; valid: contiguous, channels_last"),
        (["--variant", "sideways"], "unknown variant 'sideways'; valid: forward, bwd_data, bwd_weight"),
        (["--dtype", "fp64"], "unknown dtype 'fp64'; valid: fp16, bf16, fp32"),
        (["--arch", "gfx1"], "unknown arch 'gfx1'"),
        (["bias"], "l.csv: line 2: bias='2'; valid: 0 or 1 (whether the layer adds a bias)"),
        (["missing"], "is neither a plugin file"),
    ],
)
def test_issue_37_item_4_bad_input_is_one_line(tmp_path: Path, change: list[str], message: str) -> None:
    plugin = tmp_path / "plugin.so"
    plugin.write_bytes(b"")
    problems = write_csv(tmp_path / "l.csv", [["a", 1, 8, 8, 5, 5, 1, 1, 1, 0, 2 if change == ["bias"] else 0]])
    if change == ["missing"]:
        plugin = tmp_path / "nothing.so"
    argv = ["hipdnn", "census", str(plugin), "--problems", str(problems)]
    argv += [] if change in (["bias"], ["missing"]) else change
    done = subprocess.run([sys.executable, "-m", "ckspace.cli", *argv], capture_output=True, text=True, timeout=600)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.count("\n") == 1 and message in done.stderr, done.stderr


# -- a ckspace plugin, asked by the census and by the harness ------------------------------------
@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from standin_library import build_standin_plugin

    base = tmp_path_factory.mktemp("census")
    tree = base / "tree"
    argv = ["emit", "--arch", "gfx950", "--rule-set", "default", "--variant", "all", "--ndim", "2"]
    assert main([*argv, "--dtype", "bf16", "--hipdnn-plugin", "--out", str(tree)]) == 0
    build_standin_plugin(tree)
    subprocess.run([c_compiler(), "-O2", str(HARNESS), "-o", str(base / "harness"), "-ldl", "-lpthread"], check=True)
    return tree


def harness_answers(tree: Path, plugin: Path, graphs: list[Path]) -> list[str]:
    done = subprocess.run(
        [str(tree.parent / "harness"), str(plugin), "applicable", *map(str, graphs)],
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
    )
    return [line.split(": ", 1)[1] for line in done.stdout.splitlines() if line.startswith(str(graphs[0].parent))]


@pytest.mark.slow
@pytest.mark.parametrize("memory_format", list(MemoryFormat))
@pytest.mark.parametrize("which", ["standin", "census-only"])
def test_issue_37_item_4_the_census_hears_what_hipdnn_would(
    tree: Path, tmp_path: Path, memory_format: MemoryFormat, which: str, capsys
) -> None:
    """Every layer of torchvision's ResNet-50 (no bias) and VGG-16 (bias) in every direction: the
    census's verdict, engine and reason are the harness's for the same bytes."""
    from ckspace.census.hipdnn_wire import serialize
    from ckspace.workloads.datasets import DATASETS

    plugin = tree / "build" / "standin" / "libckspace_hipdnn_gfx950.so" if which == "standin" else tree
    for name in ("torchvision-resnet50", "torchvision-vgg16"):
        argv = ["hipdnn", "census", str(plugin), "--problems", name, "--memory-format", memory_format.value]
        assert main([*argv, "--format", "json"]) == 0
        report = json.loads(capsys.readouterr().out)
        asked = Path(report["plugin"])
        layers = read_layers(DATASETS[name].path)
        from ckspace.emit.pytorch_graphs import graph

        documents = [graph(item.layer, v, Dtype.BF16, memory_format) for item in layers for v in Variant]
        files = serialize(documents, tmp_path / name)
        heard = harness_answers(tree, asked, files)
        said = [layer["graphs"][v.value] for layer in report["layers"] for v in Variant]
        assert len(heard) == len(said) == 3 * len(layers)
        for census, harness in zip(said, heard, strict=True):
            if census["verdict"] == "served":
                assert harness.split() == [str(report["engines"][e]) for e in census["engines"]]
            else:
                assert census["verdict"] == "declined" and harness == f"none: {census['reason']}"
        served = sum(d["served"] for d in report["directions"].values())
        assert 0 < served <= len(said)
        assert main(argv) == 0  # the text report's totals are the JSON's
        text = capsys.readouterr().out
        for variant, counts in report["directions"].items():
            assert f"  {variant:<11} {counts['served']} served, {counts['declined']} declined\n" in text


@pytest.mark.slow
def test_issue_37_item_4_the_census_only_plugin_is_the_trees_plugin_without_kernels(tree: Path) -> None:
    """It exports hipDNN's API alone, as the built plugin does, and links no HIP."""
    from ckspace.census.census_plugin import census_plugin
    from ckspace.census.hip_imports import read_imports

    plugin = census_plugin(tree)
    assert plugin.parent == tree / "build" / "census" and read_imports(plugin).hip_soname is None
    listed = subprocess.run(["nm", "-D", "--defined-only", str(plugin)], capture_output=True, text=True, check=False)
    if shutil.which("nm") and listed.returncode == 0:
        names = {line.split()[-1] for line in listed.stdout.splitlines() if line.strip()}
        assert names and all(n.startswith(("hipdnnPlugin", "hipdnnEnginePlugin")) for n in names)
