"""``ckspace bench`` end to end on the CPU, with stand-in kernel libraries.

A stand-in library is a real emitted tree's generated host dispatcher (kernel table, support checks,
selection) linked with ``tests/standin/standin_run.c``, whose ``ckspace_run`` computes a real naive
convolution on host memory. Kernels chosen at compile time misbehave: one returns wrong results,
one dereferences NULL, one never returns. The sweep runs them through the same workers,
supervision, CSV and resume code as a GPU sweep (``--backend host``: host buffers, wall-clock time).
"""

from __future__ import annotations

import csv
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from standin_library import build_standin

from ckspace.workloads.measurement import COLUMNS, config_from_row, problem_from_row

GOOD, WRONG, CRASH, HANG = 0, 1, 2, 3
PROBLEMS = """N,C,K,G,Hi,Wi,Y,X,stride_h,stride_w,pad_h,pad_w
2,16,16,1,6,6,3,3,1,1,1,1
1,32,16,2,5,7,3,3,2,2,1,1
2,16,32,1,8,8,1,1,1,1,0,0
"""
TIMING = {"latency_ms", "tflops", "latency_min_ms", "latency_max_ms", "device", "device_name", "clock_mhz"}


@pytest.fixture(scope="module")
def standin(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_standin(tmp_path_factory.mktemp("standin"), wrong=WRONG, crash=CRASH, hang=HANG)


def _names(tree: Path) -> list[str]:
    from ckspace.emit.manifest import Manifest

    return Manifest.model_validate_json((tree / "manifest.json").read_bytes()).dispatcher.kernels


def _files(tmp_path: Path, tree: Path, kernels: list[int]) -> tuple[Path, Path]:
    problems = tmp_path / "problems.csv"
    problems.write_text(PROBLEMS)
    names = _names(tree)
    chosen = tmp_path / "kernels.txt"
    chosen.write_text("".join(names[i] + "\n" for i in kernels))
    return problems, chosen


def _command(tree: Path, problems: Path, kernels: Path, out: Path, *extra: str, timeout: str = "2") -> list[str]:
    return [
        sys.executable,
        "-m",
        "ckspace",
        "bench",
        str(tree),
        "--problems",
        str(problems),
        "--out",
        str(out),
        "--kernels",
        str(kernels),
        "--backend",
        "host",
        "--timeout",
        timeout,
        "--warmup",
        "1",
        "--repeat",
        "2",
        *extra,
    ]


def _rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as handle:
        reader = csv.DictReader(handle)
        assert tuple(reader.fieldnames or ()) == COLUMNS
        return list(reader)


def _stable(rows: list[dict[str, str]]) -> set[tuple]:
    """What a rerun must reproduce: every column but timings and placement."""
    return {tuple((k, v) for k, v in sorted(row.items()) if k not in TIMING) for row in rows}


@pytest.mark.slow
def test_every_pair_ends_ok_wrong_crash_or_timeout(standin: Path, tmp_path: Path) -> None:
    """Good, wrong, crashing and hanging kernels in one batch, then a good one after the culprits:
    the batch goes on after each crash and hang, every pair gets exactly one row."""
    problems, kernels = _files(tmp_path, standin, [GOOD, WRONG, CRASH, HANG, 4])
    out = tmp_path / "out.csv"
    done = subprocess.run(_command(standin, problems, kernels, out), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    rows = _rows(out)
    names = _names(standin)
    status = {(r["kernel"], int(r["problem_idx"])): r["status"] for r in rows}
    assert len(rows) == len(status) == 15
    expected = {GOOD: "ok", WRONG: "wrong", CRASH: "crash", HANG: "timeout", 4: "ok"}
    assert status == {(names[k], p): s for k, s in expected.items() for p in range(3)}
    for row in rows:
        assert problem_from_row(row).N in (1, 2)
        assert config_from_row(row).name == row["kernel"]  # the config columns are the kernel's own
        if row["status"] == "ok":
            assert float(row["max_rel_error"]) < 0.05 and float(row["tflops"]) > 0 and int(row["non_zero"]) > 0
        if row["status"] == "wrong":
            assert float(row["max_abs_error"]) > 1.0 and "beyond tolerance" in row["detail"]
            assert row["tflops"]  # it ran: timed, but never a measurement (train drops it)
        if row["status"] == "crash":
            assert "SIGSEGV" in row["detail"] and not row["tflops"]
        if row["status"] == "timeout":
            assert "2 s" in row["detail"] and not row["latency_ms"]
    assert "15 supported pairs" in done.stdout and "crash 3" in done.stdout and "timeout 3" in done.stdout


@pytest.mark.slow
def test_a_killed_sweep_resumed_writes_the_rows_of_an_uninterrupted_one(standin: Path, tmp_path: Path) -> None:
    problems, kernels = _files(tmp_path, standin, [GOOD, WRONG, CRASH, 4, 5])
    whole = tmp_path / "whole.csv"
    subprocess.run(
        _command(standin, problems, kernels, whole, "--batch", "1"), check=True, capture_output=True, timeout=300
    )
    cut = tmp_path / "cut.csv"
    proc = subprocess.Popen(
        _command(standin, problems, kernels, cut, "--batch", "1"), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    deadline = time.monotonic() + 600  # a bound on a wait for rows, not a timing: generous for a busy machine
    while time.monotonic() < deadline and (not cut.exists() or len(cut.read_text().splitlines()) < 1 + 6):
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    partial = _rows(cut)
    assert 6 <= len(partial) < 15, "the sweep was not killed half-way"
    again = subprocess.run(_command(standin, problems, kernels, cut, "--batch", "1"), capture_output=True, text=True)
    assert again.returncode == 2 and "--resume" in again.stderr  # never replaced without --resume
    resumed = subprocess.run(
        _command(standin, problems, kernels, cut, "--batch", "1", "--resume"),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert resumed.returncode == 0, resumed.stderr
    assert f"{len(partial)} already in" in resumed.stdout
    rows = _rows(cut)
    assert len(rows) == 15 and _stable(rows) == _stable(_rows(whole))


@pytest.mark.slow
def test_two_devices_share_the_work(standin: Path, tmp_path: Path) -> None:
    problems, kernels = _files(tmp_path, standin, [GOOD, 4, 5, 6])
    out = tmp_path / "out.csv"
    done = subprocess.run(
        _command(standin, problems, kernels, out, "--devices", "0,1", "--batch", "1"),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    rows = _rows(out)
    pairs = [(r["kernel"], r["problem_idx"]) for r in rows]
    assert len(pairs) == len(set(pairs)) == 12
    assert {r["device"] for r in rows} == {"0", "1"}
    assert all(r["status"] == "ok" for r in rows)


@pytest.mark.parametrize(
    "args, message",
    [
        (["--devices", "0,x"], "--devices '0,x'"),
        (["--backend", "cuda"], "--backend"),
        (["--executor", "mpi"], "--executor"),
        (["--batch", "0"], "--batch 0"),
        (["--address", "127.0.0.1:1"], "--address is for --executor ray"),
        (["--variant", "forward"], "holds bwd_weight kernels only"),
    ],
)
@pytest.mark.slow
def test_bad_options_are_one_line(standin: Path, tmp_path: Path, args: list[str], message: str) -> None:
    problems, kernels = _files(tmp_path, standin, [GOOD])
    done = subprocess.run(
        _command(standin, problems, kernels, tmp_path / "o.csv", *args), capture_output=True, text=True
    )
    assert done.returncode == 2 and message in done.stderr and "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "o.csv").exists()


@pytest.mark.slow
def test_without_a_gpu_bench_says_what_is_missing(standin: Path, tmp_path: Path) -> None:
    """The HIP backend on this machine (no AMD GPU, perhaps no hip-python): one line, exit non-zero."""
    problems, kernels = _files(tmp_path, standin, [GOOD])
    command = [c for c in _command(standin, problems, kernels, tmp_path / "o.csv") if c not in ("--backend", "host")]
    done = subprocess.run(command, capture_output=True, text=True)
    assert done.returncode != 0 and "Traceback" not in done.stderr
    line = done.stderr.strip()
    assert len(line.splitlines()) == 1
    assert ("pip install 'ckspace[hip]'" in line) or ("no AMD GPU" in line)


def test_a_gpu_probe_that_hangs_is_stopped_and_named(
    standin: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A wedged driver hangs HIP's initialisation: bench stops the probe after its time and says so
    in one line, instead of waiting for good. The probe's own interpreter hangs at start-up here (a
    sitecustomize on its path), so the probe process is the real one."""
    from ckspace.cli import main
    from ckspace.run import gpus

    hang = tmp_path / "hang"
    hang.mkdir()
    (hang / "sitecustomize.py").write_text("import time\ntime.sleep(600)\n")
    monkeypatch.setenv("PYTHONPATH", str(hang))
    monkeypatch.setattr(gpus, "PROBE_SECONDS", 1.0)
    problems, kernels = _files(tmp_path, standin, [GOOD])
    command = [c for c in _command(standin, problems, kernels, tmp_path / "o.csv") if c not in ("--backend", "host")]
    started = time.monotonic()
    assert main(command[3:]) == 2
    assert time.monotonic() - started < 60
    err = capsys.readouterr().err
    assert err.strip() == "ckspace: error: the GPU probe gave no answer within 1 s (a hung HIP runtime or driver)"
    assert not (tmp_path / "o.csv").exists()


@pytest.mark.slow
def test_a_foreign_or_mismatched_results_file_is_refused(standin: Path, tmp_path: Path) -> None:
    problems, kernels = _files(tmp_path, standin, [GOOD])
    foreign = tmp_path / "foreign.csv"
    foreign.write_text("a,b\n1,2\n")
    done = subprocess.run(_command(standin, problems, kernels, foreign, "--resume"), capture_output=True, text=True)
    assert done.returncode == 2 and "not a results file" in done.stderr
    assert foreign.read_text() == "a,b\n1,2\n"
    out = tmp_path / "out.csv"
    subprocess.run(_command(standin, problems, kernels, out), check=True, capture_output=True)
    problems.write_text(PROBLEMS.replace("2,16,16,1,6,6", "4,16,16,1,6,6"))
    done = subprocess.run(_command(standin, problems, kernels, out, "--resume"), capture_output=True, text=True)
    assert done.returncode == 2 and "problems file it was started with" in done.stderr


@pytest.mark.slow
def test_resume_of_a_foreign_csv_without_final_newline_refuses_it_untouched(standin: Path, tmp_path: Path) -> None:
    """A bug this fixes: the torn-row repair ran before the file was checked, deleting the foreign
    last line."""
    problems, kernels = _files(tmp_path, standin, [GOOD])
    for name, content in (("mine.csv", b"a,b\n1,2"), ("link.csv", None)):
        path = tmp_path / name
        if content is None:  # a link to a genuine results file: never appended through
            real = tmp_path / "real.csv"
            subprocess.run(_command(standin, problems, kernels, real), check=True, capture_output=True)
            content = real.read_bytes()
            path.symlink_to(real)
        else:
            path.write_bytes(content)
        done = subprocess.run(_command(standin, problems, kernels, path, "--resume"), capture_output=True, text=True)
        assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
        assert len(done.stderr.strip().splitlines()) == 1 and str(path) in done.stderr
        assert path.read_bytes() == content


@pytest.mark.slow
def test_a_torn_last_row_is_dropped_on_resume(standin: Path, tmp_path: Path) -> None:
    problems, kernels = _files(tmp_path, standin, [GOOD])
    out = tmp_path / "out.csv"
    subprocess.run(_command(standin, problems, kernels, out), check=True, capture_output=True)
    whole = out.read_text()
    last = whole.splitlines(keepends=True)[-1]
    out.write_text(whole[: -len(last)] + last[:20])
    subprocess.run(_command(standin, problems, kernels, out, "--resume"), check=True, capture_output=True)
    assert _stable(_rows(out)) == _stable([*csv.DictReader(whole.splitlines())])


@pytest.mark.slow
def test_worker_dies_with_its_supervisor(standin: Path, tmp_path: Path) -> None:
    """kill -9 of ckspace bench while a kernel hangs: the hung worker goes too."""
    problems, kernels = _files(tmp_path, standin, [HANG])
    out = tmp_path / "out.csv"
    proc = subprocess.Popen(_command(standin, problems, kernels, out, timeout="600"))
    deadline = time.monotonic() + 300  # bounds on waits for events, generous for a busy machine
    workers: list[int] = []
    while time.monotonic() < deadline and not workers:
        workers = _children(proc.pid)
        time.sleep(0.1)
    assert workers
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and any(_alive(pid) for pid in workers):
        time.sleep(0.1)
    assert not any(_alive(pid) for pid in workers)


def _children(parent: int) -> list[int]:
    """The bench workers ``parent`` started (Linux /proc)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
                if ppid == parent and b"ckspace.run.worker" in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
            except (OSError, IndexError, ValueError):
                continue
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split()[2]
    except OSError:
        return False
    return state != "Z"


HEADER = PROBLEMS.splitlines(keepends=True)[0]
NORMAL = PROBLEMS.splitlines(keepends=True)[1]


def _sweep_by_problem(standin: Path, tmp_path: Path, first: str, **env: str) -> dict[int, dict[str, str]]:
    """A sweep of the good kernel over [``first``, a normal problem]: its rows by problem index."""
    problems, kernels = _files(tmp_path, standin, [GOOD])
    problems.write_text(HEADER + first + NORMAL)
    out = tmp_path / "out.csv"
    done = subprocess.run(
        _command(standin, problems, kernels, out),
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, **env},
    )
    assert done.returncode == 0, done.stderr
    rows = _rows(out)
    assert len(rows) == 2
    return {int(r["problem_idx"]): r for r in rows}


@pytest.mark.slow
def test_issue_36_item_17_a_problem_beyond_memory_is_failed_with_its_bytes(standin: Path, tmp_path: Path) -> None:
    """Hi=Wi=2^20 (32 TiB per bf16 activation) killed the worker with a MemoryError and the sweep
    with it; its need is now held against the host's available memory before anything is
    allocated: the pair is failed, naming the bytes, and the next problem runs."""
    rows = _sweep_by_problem(standin, tmp_path, "1,16,16,1,1048576,1048576,3,3,1,1,1,1\n")
    activation = 1 * 1048576 * 1048576 * 16 * 2  # N Hi Wi C, 2 bytes: dy and x of bwd_weight alike
    assert rows[0]["status"] == "failed" and not rows[0]["latency_ms"]
    assert f"A {activation} + B {activation}" in rows[0]["detail"] and "host memory" in rows[0]["detail"]
    assert rows[1]["status"] == "ok" and float(rows[1]["latency_ms"]) > 0


@pytest.mark.slow
def test_issue_36_item_17_a_worker_dying_in_preparation_costs_only_its_problem(standin: Path, tmp_path: Path) -> None:
    """An allocation that passes the check and still kills the worker (here an address-space limit
    of 640 MiB on the worker, which the check of available memory does not see; on a real machine
    the OOM killer) records the problem's pairs as failed and runs the rest."""
    limit = tmp_path / "limit"
    limit.mkdir()
    (limit / "sitecustomize.py").write_text(
        "import resource, sys\n"
        "if 'ckspace.run.worker' in sys.orig_argv:\n"
        "    resource.setrlimit(resource.RLIMIT_AS, (640 << 20, 640 << 20))\n"
    )
    rows = _sweep_by_problem(standin, tmp_path, "1,16,16,1,8192,4096,1,1,1,1,0,0\n", PYTHONPATH=str(limit))
    activation = 8192 * 4096 * 16 * 2  # 1 GiB: more than the worker may map
    assert rows[0]["status"] == "failed"
    assert f"A {activation} + B {activation}" in rows[0]["detail"] and "MemoryError" in rows[0]["detail"]
    assert rows[1]["status"] == "ok" and float(rows[1]["latency_ms"]) > 0


@pytest.mark.slow
def test_a_ray_cluster_of_two_nodes_shares_the_work(standin: Path, tmp_path: Path) -> None:
    """A local Ray cluster started here, two nodes with one stand-in device each: every pair runs once,
    on either node, and the CSV is complete."""
    from ray_loopback import loopback_cluster

    problems, kernels = _files(tmp_path, standin, [GOOD, WRONG, CRASH, 4])
    out = tmp_path / "out.csv"
    device = {"num_cpus": 1, "resources": {"ckspace_device": 1}}
    with loopback_cluster(device, device) as address:
        done = subprocess.run(
            _command(standin, problems, kernels, out, "--batch", "1", "--executor", "ray", "--address", address),
            capture_output=True,
            text=True,
            timeout=600,
        )
    assert done.returncode == 0, done.stderr
    rows = _rows(out)
    pairs = [(r["kernel"], r["problem_idx"]) for r in rows]
    assert len(pairs) == len(set(pairs)) == 12
    names = _names(standin)
    assert {r["status"] for r in rows if r["kernel"] == names[CRASH]} == {"crash"}
    assert {r["status"] for r in rows if r["kernel"] == names[WRONG]} == {"wrong"}
    assert len({r["device"] for r in rows}) == 2  # both nodes ran batches


def test_the_hip_device_without_a_gpu_is_one_error() -> None:
    """The real HIP bindings (hip-python, a test dependency) on this machine's runtime: opening a
    device that is not there is a CkspaceError naming the call, not a crash or a raw tuple. On a
    machine with an AMD GPU, the device the probe reports opens instead."""
    from ckspace.core.errors import CkspaceError
    from ckspace.run.device import HipDevice
    from ckspace.run.gpus import probe_devices

    try:
        devices = probe_devices()
    except CkspaceError as exc:
        assert "no AMD GPU" in str(exc) or "hip" in str(exc).lower()
        with pytest.raises(CkspaceError, match=r"hip\w+\(0\) failed|hipGetDeviceProperties failed"):
            HipDevice(0)
    else:
        assert devices and HipDevice(0).info.name == devices[0].name


TRAIN_PROBLEMS = "N,C,K,G,Hi,Wi,Y,X,stride_h,stride_w,pad_h,pad_w\n" + "".join(
    f"{n},{c},{k},{g},{h},{w},{f},{f},{s},{s},{f // 2},{f // 2}\n"
    for n, c, k, g, h, w, f, s in [
        (1, 16, 16, 1, 6, 6, 3, 1),
        (2, 16, 32, 1, 5, 5, 1, 1),
        (1, 32, 16, 2, 6, 4, 3, 2),
        (1, 16, 16, 1, 9, 9, 3, 2),
        (2, 32, 32, 1, 4, 4, 3, 1),
        (1, 64, 16, 1, 5, 5, 1, 1),
        (1, 16, 64, 1, 5, 6, 1, 1),
        (2, 16, 16, 2, 7, 7, 3, 1),
        (1, 32, 32, 4, 6, 6, 3, 1),
        (3, 16, 16, 1, 4, 5, 3, 1),
        (1, 48, 16, 1, 6, 6, 1, 2),
        (1, 16, 48, 1, 8, 4, 3, 1),
    ]
)


@pytest.mark.slow
def test_train_on_a_bwd_weight_sweep_and_select_with_the_model(standin: Path, tmp_path: Path) -> None:
    """The loop closed: bench a bwd_weight cell (crashing and wrong kernels included), train on the
    CSV it wrote, and Selector.load uses the model; wrong and crashed rows are never training data."""
    from ckspace.select.selector import Selector
    from ckspace.workloads.problem import ConvProblem

    problems = tmp_path / "problems.csv"
    problems.write_text(TRAIN_PROBLEMS)
    names = _names(standin)
    kernels = tmp_path / "kernels.txt"
    kernels.write_text("".join(names[i] + "\n" for i in (GOOD, WRONG, CRASH, 4, 5, 6, 7)))
    out = tmp_path / "sweep.csv"
    subprocess.run(
        [*_command(standin, problems, kernels, out), "--batch", "4"], check=True, capture_output=True, timeout=600
    )
    rows = _rows(out)
    assert {r["status"] for r in rows} == {"ok", "wrong", "crash"} and len(rows) == 7 * 12
    model = tmp_path / "model"
    done = subprocess.run(
        [sys.executable, "-m", "ckspace", "train", "--data", str(out), "--out", str(model), "--folds", "3"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    card = (model / "card.json").read_text()
    assert '"bwd_weight"' in card and "wrong" in card and "crash" in card
    selector = Selector.load("gfx950", "bwd_weight", "bf16", model_dir=model, engine="lightgbm")
    trained = {names[i] for i in (GOOD, 4, 5, 6, 7)}
    pick = selector.select(ConvProblem.parse("N=2,C=16,K=16,Hi=6,Wi=6,Y=3,X=3,pad=1"), candidates=sorted(trained))
    assert pick.pick in trained and pick.source == "model"


@pytest.mark.slow
def test_bench_host_backend_refuses_a_hip_library_up_front(tmp_path: Path, capsys) -> None:
    from standin_library import build_standin

    from ckspace.cli import main
    from ckspace.compiling.report import BuildReport
    from ckspace.compiling.toolchain import Toolchain

    tree = build_standin(tmp_path)
    problems = tmp_path / "problems.csv"
    problems.write_text("N,C,K,G,Hi,Wi,Y,X,stride_h,stride_w,pad_h,pad_w\n2,16,16,1,6,6,3,3,1,1,1,1\n")
    bench = ["bench", str(tree), "--problems", str(problems), "--backend", "host", "--timeout", "5"]
    assert main([*bench, "--out", str(tmp_path / "standin.csv")]) == 0  # a stand-in runs on the host
    capsys.readouterr()
    library = tree / "build" / "gfx950" / "libckspace_kernels_gfx950.so"
    toolchain = Toolchain(
        kind="clang",
        compiler="clang++-22",
        version="clang version 22.0.0",
        identity="0" * 64,
        arch="gfx950",
        compile_flags=(),
        link_flags=(),
    )
    report = BuildReport(
        arch="gfx950",
        toolchain=toolchain,
        ck_revision="r",
        ck_fingerprint="f",
        batch=8,
        jobs=1,
        units=1,
        compiled_units=1,
        seconds=1.0,
        ok=1,
        failed=0,
        cached=0,
        library=str(library),
        link_error=None,
        kernels=[],
    )
    (library.parent / "report.json").write_text(report.model_dump_json())  # as ckspace build leaves it
    assert main([*bench, "--out", str(tmp_path / "hip.csv")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(
        f"ckspace: error: --backend host: {library} is a HIP library "
        "(ckspace build linked it for gfx950 with clang version 22.0.0)"
    )
    assert not (tmp_path / "hip.csv").exists()
