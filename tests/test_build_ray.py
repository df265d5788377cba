"""ckspace build --executor ray, on a Ray cluster the tests start (two nodes on this machine, loopback
only, torn down after).

A stand-in compiler (a Python script: CKSPACE_CXX, the same override a wrapped toolchain uses) fails,
fails once, or kills the Ray worker that runs it, by markers in the kernels' sources; 200 units
driven through it must each end ok, failed after one retry, or cached, with nothing half-written in
the object cache. The same tree built with ninja and with Ray gives the same report (the reports are
compared field by field but for timings, the executor and what came from the cache). The real CI
compile sample is built through Ray once and then linked by ninja from the objects Ray stored.
"""

from __future__ import annotations

import json
import os
import socket
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from compile_sample import sample_kernels, sample_request
from conftest import FAKE_OBJECT, fake_ck
from ray_loopback import loopback_cluster
from test_build import _toolchain_or_skip

from ckspace.cli import main
from ckspace.compiling import ray_task
from ckspace.compiling.builder import build
from ckspace.compiling.report import BuildReport
from ckspace.emit.emitter import SelectorOptions, emit
from ckspace.emit.rendering import buildable
from ckspace.environment.ck_header_cache import find_revision
from ckspace.run.library import KernelLibrary
from ckspace.space.listing import Kernel
from ckspace.space.space import Space

STAND_IN = """#!{python}
# Stand-in for clang, by markers in the kernels' .cpp files (MARKERS is where it remembers attempts):
#   BROKEN      fails, every time                      FLAKY       fails the first time only
#   KILL        kills its parent (the Ray worker) the first time, after writing half an object
#   KILLALWAYS  does that every time
import os, pathlib, signal, sys
MARKERS = pathlib.Path({markers!r})
args = sys.argv[1:]
if "--version" in args:
    print("stand-in clang version 1.0"); sys.exit(0)
out = pathlib.Path(args[args.index("-o") + 1])
if "-shared" in args or "-nogpulib" in args:
    out.write_text("lib") if "-shared" in args else None; sys.exit(0)
source = pathlib.Path(args[args.index("-c") + 1])
includes = [pathlib.Path(a[2:]) for a in args if a.startswith("-I")]

def first_time(rule):
    MARKERS.mkdir(exist_ok=True)
    try:
        os.close(os.open(MARKERS / f"{{source.stem}}.{{rule}}", os.O_CREAT | os.O_EXCL))
        return True
    except FileExistsError:
        return False

for line in source.read_text().splitlines():
    name = line.split('"')[1]
    text = next((folder / name).read_text() for folder in includes if (folder / name).is_file())
    for rule in ("KILLALWAYS", "KILL", "BROKEN", "FLAKY"):
        if "// " + rule + "\\n" not in text:
            continue
        if rule.startswith("KILL") and (rule == "KILLALWAYS" or first_time(rule)):
            out.write_text("ob")  # half an object, then the worker dies (its unit folder noted)
            with (MARKERS / "killed-in").open("a") as noted:
                noted.write(os.getcwd() + "\\n")
            os.kill(os.getppid(), signal.SIGKILL); sys.exit(9)
        if rule == "BROKEN" or (rule == "FLAKY" and first_time(rule)):
            print(f"{{name}}:1:1: error: {{rule.lower()}} kernel", file=sys.stderr); sys.exit(1)
out.write_bytes({fake_object})
"""


@pytest.fixture(scope="module")
def ray_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A head and a second node, both on 127.0.0.1 (Ray on Linux would otherwise advertise the
    machine's outward address: its switch for that is read when Ray is imported, so it is set in the
    environment of the nodes and patched in this process); yields the head's address.

    The workers cannot import ckspace, as on a worker machine without it: what a task runs must
    travel with it. Ray puts the driver's working directory first on its workers' path, so the tests
    run in a directory whose ``ckspace`` package refuses to load (the driver imported its own
    already, by absolute path)."""
    shadow = tmp_path_factory.mktemp("no-ckspace")
    (shadow / "ckspace").mkdir()
    (shadow / "ckspace" / "__init__.py").write_text('raise ImportError("ckspace is not installed on this worker")\n')
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(shadow)
        with loopback_cluster({"num_cpus": 2}, {"num_cpus": 2}) as address:
            yield address


@pytest.fixture()
def stand_in(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The stand-in compiler as CKSPACE_CXX, a fake CK tree; returns the folder of the attempt markers."""
    compiler = tmp_path / "stand-in" / "clang"
    compiler.parent.mkdir()
    compiler.write_text(
        STAND_IN.format(python=sys.executable, markers=str(tmp_path / "markers"), fake_object=repr(FAKE_OBJECT))
    )
    compiler.chmod(compiler.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("CKSPACE_CXX", str(compiler))
    monkeypatch.setenv("CKSPACE_DEVICE_LIBS", str(tmp_path))
    monkeypatch.setenv("CK_ROOT", str(fake_ck(tmp_path / "ck", explicit_gemm=False)))
    return tmp_path / "markers"


def fake_kernels(count: int) -> list[Kernel]:
    """``count`` kernels the fake CK tree can build (the emitter leaves out the others)."""
    listed = Space("gfx942", "forward", None, ["bf16", "fp16"], "full").kernels()
    wanted = {c.name for c in buildable(listed, find_revision())[0]}
    return [k for k in listed if k.name in wanted][:count]


def mark(tree: Path, name: str, rule: str) -> None:
    with (tree / f"{name}.cpp").open("a") as handle:
        handle.write(f"// {rule}\n")


def comparable(report: BuildReport) -> dict:
    """A report without what may differ between executors: timings, the executor, the cache's part."""
    data = report.model_dump(exclude={"seconds", "executor", "compiled_units", "cached"})
    for kernel in data["kernels"]:
        kernel.pop("cached")
    return data


def cache_objects(cache: Path) -> dict[str, bytes]:
    """Every file in the object cache (temporary files included) and its bytes."""
    return {str(p.relative_to(cache)): p.read_bytes() for p in cache.rglob("*") if p.is_file()}


@pytest.mark.slow
def test_200_units_with_failures_and_killed_workers(
    tmp_path: Path, stand_in: Path, ray_cluster: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CKSPACE_BUILD_CACHE", str(tmp_path / "objects"))
    kernels = fake_kernels(200)
    assert len(kernels) == 200
    tree = tmp_path / "tree"
    names = [k.name for k in emit(kernels, tree, find_revision(), arch="gfx942", request={}).manifest.kernels]
    warm = build(tree, "gfx942", jobs=2, batch=1)  # ninja: every object cached
    assert (warm.ok, warm.failed, warm.compiled_units) == (200, 0, 200)

    rules = {
        **dict.fromkeys(names[50:60], "BROKEN"),
        **dict.fromkeys(names[60:70], "FLAKY"),
        **dict.fromkeys(names[70:73], "KILL"),
        names[73]: "KILLALWAYS",
        **dict.fromkeys(names[74:], "CHANGED"),
    }  # names[:50] untouched: from the cache
    for name, rule in rules.items():
        mark(tree, name, rule)
    report = build(tree, "gfx942", jobs=None, batch=1, allow_edited=True, executor="ray", address=ray_cluster)
    assert (report.executor, report.jobs, report.units, report.compiled_units) == ("ray", 4, 200, 150)

    outcome = {}
    for kernel in report.kernels:
        text = (tree / "build" / "gfx942" / kernel.log).read_text()
        retried = "attempt 1 of 2 failed; retried" in text
        outcome[kernel.name] = (
            "cached"
            if kernel.cached
            else "ok"
            if kernel.status == "ok" and not retried
            else "ok-after-retry"
            if kernel.status == "ok"
            else "failed-after-retry"
            if retried
            else "failed-without-retry"
        )
    expected = {
        name: {
            "BROKEN": "failed-after-retry",
            "KILLALWAYS": "failed-after-retry",
            "FLAKY": "ok-after-retry",
            "KILL": "ok-after-retry",
            "CHANGED": "ok",
        }.get(rules.get(name, ""), "cached")
        for name in names
    }
    assert outcome == expected
    errors = {k.name: k.error for k in report.kernels if k.status == "failed"}
    assert all("error: broken kernel" in errors[n] for n in names[50:60])
    assert "WorkerCrashedError" in errors[names[73]]
    assert report.library is not None  # the 189 good objects link

    objects = cache_objects(tmp_path / "objects")
    assert len(objects) == 200 + 126 + 10 + 3  # warm, changed, ok after a retry (3 after a killed worker)...
    assert set(objects.values()) == {FAKE_OBJECT}  # ...and no half object, no temporary file
    killed_in = (stand_in / "killed-in").read_text().split()
    assert len(killed_in) == 5  # 3 KILL once, KILLALWAYS twice
    again = build(tree, "gfx942", jobs=None, batch=1, allow_edited=True, executor="ray", address=ray_cluster)
    assert {k.name for k in again.kernels if not k.cached} == {k for k, v in expected.items() if "failed" in v}
    assert (again.ok, again.failed) == (report.ok, report.failed)
    # the killed workers could not remove their unit folders: the units compiled since removed them
    assert [folder for folder in killed_in if Path(folder).exists()] == []


def test_a_unit_removes_the_folders_of_this_hosts_workers_that_are_gone(tmp_path: Path) -> None:
    gone = subprocess.Popen([sys.executable, "-c", ""])
    gone.wait()
    here = socket.gethostname()
    folders = {
        "gone": tmp_path / f"{ray_task.PREFIX}{gone.pid}@{here}-abc",
        "alive": tmp_path / f"{ray_task.PREFIX}{os.getpid()}@{here}-def",
        "other host": tmp_path / f"{ray_task.PREFIX}{gone.pid}@not-{here}-ghi",
        "not ours": tmp_path / f"ckspace-unit-{gone.pid}-jkl",
    }
    for folder in folders.values():
        (folder / "tu").mkdir(parents=True)
        (folder / "tu" / "a.o").write_bytes(b"ob")
    as_file = tmp_path / f"{ray_task.PREFIX}{gone.pid}@{here}-file"
    as_file.write_text("a file of that name is not a unit folder")
    target = tmp_path / "elsewhere"
    target.mkdir()
    (target / "kept").write_text("")
    link = tmp_path / f"{ray_task.PREFIX}{gone.pid}@{here}-link"
    link.symlink_to(target)

    assert ray_task.sweep(here, tmp_path) == [folders["gone"]]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [*(f.name for k, f in folders.items() if k != "gone"), as_file.name, link.name, "elsewhere"]
    )
    assert (target / "kept").exists()
    assert ray_task.sweep(here, tmp_path) == []


@pytest.mark.slow
def test_ninja_and_ray_give_the_same_report(
    tmp_path: Path, stand_in: Path, ray_cluster: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Failure isolation included: a batch with a broken kernel is split into single units."""
    tree = tmp_path / "tree"
    names = [k.name for k in emit(fake_kernels(7), tree, find_revision(), arch="gfx942", request={}).manifest.kernels]
    mark(tree, names[4], "BROKEN")
    reports = {}
    for executor in ("local", "ray"):
        monkeypatch.setenv("CKSPACE_BUILD_CACHE", str(tmp_path / f"objects-{executor}"))
        reports[executor] = build(
            tree,
            "gfx942",
            jobs=2,
            batch=3,
            allow_edited=True,
            executor=executor,
            address=ray_cluster if executor == "ray" else None,
        )
    ninja, ray = reports["local"], reports["ray"]
    assert (ninja.ok, ninja.failed, ninja.units) == (6, 1, 3 + 3)
    assert comparable(ray) == comparable(ninja)
    assert cache_objects(tmp_path / "objects-local") == cache_objects(tmp_path / "objects-ray")


def test_cli_executor_choices_and_missing_ray(
    tmp_path: Path, stand_in: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    tree = tmp_path / "tree"
    emit(fake_kernels(1), tree, find_revision(), arch="gfx942", request={})
    assert main(["build", str(tree), "--arch", "gfx942", "--executor", "slurm"]) == 2
    assert capsys.readouterr().err.strip().endswith("unknown executor 'slurm'; valid: local, ray")
    assert main(["build", str(tree), "--arch", "gfx942", "--address", "127.0.0.1:6379"]) == 2
    assert "needs --executor ray" in capsys.readouterr().err
    monkeypatch.setitem(sys.modules, "ray", None)  # as if Ray were not installed
    assert main(["build", str(tree), "--arch", "gfx942", "--executor", "ray"]) == 2
    err = capsys.readouterr().err
    assert "--executor ray needs Ray: pip install 'ckspace[ray]'" in err and len(err.strip().splitlines()) == 1


def test_an_open_connection_is_reused_and_left_open(ray_cluster: str) -> None:
    """What bench/build.py relies on: builds inside ``connected`` use that connection, and only the
    ``connected`` that opened it closes it."""
    from ckspace.compiling.cluster import connected, describe

    def import_ckspace() -> str:
        try:
            import ckspace  # noqa: F401
        except ImportError as exc:
            return str(exc)
        return "imported"

    with connected(ray_cluster) as ray:
        assert describe(ray).endswith("2 node(s), 4 CPU(s)")
        assert ray.get(ray.remote(import_ckspace).remote()) == "ckspace is not installed on this worker"
        with connected() as inner:
            assert inner is ray
        assert ray.is_initialized()
    assert not ray.is_initialized()


def test_unreachable_cluster_is_one_line_and_quick(
    tmp_path: Path, stand_in: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Ray alone retries an unreachable head for minutes; build says so in seconds."""
    import socket

    with socket.socket() as closed:  # a port nothing listens on
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    tree = tmp_path / "tree"
    emit(fake_kernels(1), tree, find_revision(), arch="gfx942", request={})
    assert main(["build", str(tree), "--arch", "gfx942", "--executor", "ray", "--address", f"127.0.0.1:{port}"]) == 2
    err = capsys.readouterr().err.strip()
    assert f"cannot connect to Ray at 127.0.0.1:{port}" in err and len(err.splitlines()) == 1


@pytest.mark.slow
def test_compile_sample_through_ray(tmp_path: Path, ray_cluster: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The CI compile sample compiled on the Ray cluster (for real, once), then built again by ninja
    from the objects Ray stored: the same report, and a library that lists every kernel."""
    _toolchain_or_skip()
    monkeypatch.setenv("CKSPACE_BUILD_CACHE", str(tmp_path / "cache"))
    revision = find_revision()
    kernels, probes = sample_kernels("gfx942", revision)
    result = emit(
        kernels,
        tmp_path / "tree",
        revision,
        arch="gfx942",
        request=sample_request("gfx942", revision, kernels, probes),
        selector=SelectorOptions(),
    )
    ray = build(tmp_path / "tree", "gfx942", jobs=2, batch=6, executor="ray", address=ray_cluster)
    assert {k.name: k.error for k in ray.kernels if k.status == "failed"} == {} and ray.link_error is None
    assert (ray.ok, ray.units, ray.compiled_units) == (len(kernels), 2, 2)
    ninja = build(tmp_path / "tree", "gfx942", jobs=2, batch=6)
    assert ninja.compiled_units == 0
    assert comparable(ray) == comparable(ninja)
    assert json.loads((tmp_path / "tree" / "build" / "gfx942" / "report.json").read_text())["executor"] == "local"
    assert KernelLibrary(ninja.library).names == tuple(sorted(k.name for k in result.manifest.kernels))
