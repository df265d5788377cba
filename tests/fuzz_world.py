"""The hostile world the CLI fuzzer runs in: a temporary directory of files a user may point ckspace
at by mistake or on purpose, the argument vocabulary drawn from, and the contract every run is
checked against.

Files: a small valid benchmark CSV and its BOM, UTF-16, Latin-1 (not UTF-8), binary and empty
twins; a names file (what `enumerate --list` prints, depthwise names included); JSON nested 100,000
deep, bare and as a kernels file; an emitted tree and its damaged twins (truncated, empty, binary,
deeply nested or Latin-1 manifest, sources missing, a source edited); a model directory and a
damaged one and one whose card is deeply nested; a directory holding someone else's file; a
symbolic link; a fifo; and paths to /dev/null and under a file. `HOSTILE_ENVIRONMENT` holds values
of the environment variables ckspace reads, set for one run. `snapshot` records what is there so a
run can be checked to have changed nothing it did not create. `start_ready` starts a real ckspace
process to be signalled.
"""

from __future__ import annotations

import hashlib
import io
import os
import re
import select
import shutil
import signal
import stat
import subprocess
import sys
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, redirect_stderr, redirect_stdout
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import fake_ck

from ckspace.cli import main
from ckspace.select.store import shipped_model_dir
from ckspace.workloads.datasets import DATASETS

PROBLEM = "N=1,G=1,C=64,K=128,Hi=56,Wi=56,Y=3,X=3,stride=1,pad=1"
DEEP = "[" * 100_000 + "]" * 100_000
"""JSON nested far deeper than a recursive parser goes."""
FOREIGN = "foreign"
"""A directory that is not ckspace's: its file must survive every command."""

HOSTILE_ENVIRONMENT = {
    "CKSPACE_HIP_FLAGS": ['"-O2', "-O2 \\", "'", "-DX='a b'"],
    "CK_ROOT": ["fifo", "binary.bin", "/dev/null", "nowhere", "link", "small_gfx950.csv/sub", "ck", "tree"],
    "CKSPACE_CACHE_DIR": ["small_gfx950.csv", "/dev/null", "fifo", "dangling", "cache3"],
    "CKSPACE_BUILD_CACHE": ["small_gfx950.csv", "/dev/null", "fifo"],
    "CKSPACE_CXX": ["clang++ -v", "fifo", "small_gfx950.csv", "/dev/null"],
    "CKSPACE_DEVICE_LIBS": ["fifo", "/dev/null", "nowhere"],
    "ROCM_PATH": ["fifo", "/dev/null", "small_gfx950.csv"],
    "CC": ["gcc -O2", "no-such-cc", "fifo"],
    "CKSPACE_TEST_READY_FD": ["abc", "-1", "99999999999999999999", "", "3.5"],
}
"""Values of the environment variables ckspace reads (``ckspace --help`` lists them) a run may get:
unparsable, pointing at the world's hostile files, or nowhere. Never an empty CKSPACE_CXX (ckspace
would look for a real compiler and might compile for minutes) nor a small READY_FD (ckspace would
write to, and close, a descriptor of the test process); RAY_ADDRESS is left out (a Ray client
retries an address for a long time)."""

_SHAPES = "1,64,64,56,56,3,3"
PROBLEM_FILES = {
    "problems.csv": f"N,C,K,Hi,Wi,Y,X,stride,pad,w\n{_SHAPES},1,1,2\n2,64,128,28,28,1,1,2,0,1\n",
    "problems_stride_x.csv": f"N,C,K,Hi,Wi,Y,X,Stride_X,Stride_Y\n{_SHAPES},2,2\n",
    "problems_padding.csv": f"N,C,K,Hi,Wi,Y,X,padding\n{_SHAPES},1\n",
    "problems_lone_stride.csv": f"N,C,K,Hi,Wi,Y,X,stride_h\n{_SHAPES},2\n",
    "problems_repeated.csv": f"N,C,K,Hi,Wi,Y,X,N\n{_SHAPES},4\n",
    "problems_short_row.csv": f"N,C,K,Hi,Wi,Y,X,w\n{_SHAPES},1\n1,64,64\n",
    "problems_output.csv": f"N,C,K,Hi,Wi,Y,X,Ho,Wo\n{_SHAPES},56,56\n",
    "problems_zero_weights.csv": f"N,C,K,Hi,Wi,Y,X,w\n{_SHAPES},0\n",
    "problems_3d_lacking.csv": "N,C,K,Di,Hi,Wi,Z,Y,X,pad_h,pad_w\n1,64,64,8,56,56,3,3,3,1,1\n",
}
"""Problems CSVs (the contract's items 1, 7, 15, 16 of its third round): one that is read, and one of
each kind that must be refused in one line (a column in another vocabulary, a lone per-dimension column, a repeated
column, a short row, an output size the sizes do not give, weights all 0, a 3D row lacking the
depth of the per-dimension columns)."""

_LOG_LINE = re.compile(r"^ckspace: (WARNING|NOTICE|INFO|DEBUG): ")


def build_world(root: Path) -> dict[str, str]:
    """Create the hostile files under ``root``; returns name -> path (relative to ``root``)."""
    lines = DATASETS["mi355x-forward-bf16"].path.read_text().splitlines(keepends=True)[:400]
    csv_text = "".join(lines)
    (root / "small_gfx950.csv").write_text(csv_text)
    (root / "bom.csv").write_bytes(b"\xef\xbb\xbf" + csv_text.encode())
    (root / "utf16.csv").write_bytes(csv_text.encode("utf-16"))
    (root / "binary.bin").write_bytes(bytes(range(256)) * 8)
    (root / "latin1.csv").write_bytes(csv_text.encode() + "é,1\n".encode("latin-1"))
    (root / "deep.json").write_text(DEEP)
    for name, text in PROBLEM_FILES.items():
        (root / name).write_text(text)
    (root / "kernels.json").write_text('{"kernels": ' + DEEP + "}")
    (root / "empty.txt").write_bytes(b"")
    (root / FOREIGN).mkdir()
    (root / FOREIGN / "precious.txt").write_text("not ckspace's\n")
    (root / "link").symlink_to(root / FOREIGN)
    (root / "dangling").symlink_to(root / "nowhere")
    os.mkfifo(root / "fifo")
    shutil.copytree(shipped_model_dir("gfx950", "forward", "bf16"), root / "model")
    shutil.copytree(root / "model", root / "model_damaged")
    ranker = root / "model_damaged" / "ranker.txt"
    ranker.write_bytes(ranker.read_bytes()[: ranker.stat().st_size // 2])
    shutil.copytree(root / "model", root / "model_deep")
    (root / "model_deep" / "card.json").write_text('{"arch": ' + DEEP + "}")

    names = io.StringIO()
    with redirect_stdout(names), redirect_stderr(io.StringIO()):
        main(
            [
                "enumerate",
                "--arch",
                "gfx950",
                "--variant",
                "forward",
                "--ndim",
                "2",
                "--dtype",
                "bf16",
                "--rule-set",
                "tiny",
                "--list",
            ]
        )
    (root / "names.txt").write_text(names.getvalue())
    fake_ck(root / "ck", explicit_gemm=True)
    with redirect_stdout(io.StringIO()), redirect_stderr(io.StringIO()):
        status = main(
            [
                "emit",
                "--arch",
                "gfx950",
                "--variant",
                "forward",
                "--ndim",
                "2",
                "--dtype",
                "fp16",
                "--rule-set",
                "full-tests",
                "--ck-root",
                str(root / "ck"),
                "--out",
                str(root / "tree"),
            ]
        )
    assert status == 0 and (root / "tree" / "manifest.json").is_file()
    for name, damage in (
        ("tree_truncated", lambda m: m.write_bytes(m.read_bytes()[:100])),
        ("tree_empty", lambda m: m.write_bytes(b"")),
        ("tree_binary", lambda m: m.write_bytes(bytes(range(256)))),
        ("tree_deep", lambda m: m.write_text('{"kernels": ' + DEEP + "}")),
        ("tree_latin1", lambda m: m.write_bytes(m.read_bytes().replace(b"{", b"{\xe9", 1))),
    ):
        shutil.copytree(root / "tree", root / name)
        damage(root / name / "manifest.json")
    (root / "tree_missing").mkdir()
    shutil.copy(root / "tree" / "manifest.json", root / "tree_missing" / "manifest.json")
    shutil.copytree(root / "tree", root / "tree_edited")
    source = sorted((root / "tree_edited").glob("grouped_conv_*.hpp"))[0]
    source.write_text(source.read_text() + "// edited\n")
    _damaged_cache(root / "damaged_cache")
    trees = {
        n: n
        for n in (
            "ck",
            "tree",
            "tree_truncated",
            "tree_empty",
            "tree_binary",
            "tree_deep",
            "tree_latin1",
            "tree_missing",
            "tree_edited",
        )
    }
    return {
        "csv": "small_gfx950.csv",
        "bom": "bom.csv",
        "utf16": "utf16.csv",
        "binary": "binary.bin",
        "latin1": "latin1.csv",
        "deep": "deep.json",
        "kernels_json": "kernels.json",
        "empty": "empty.txt",
        "names": "names.txt",
        "foreign": FOREIGN,
        "link": "link",
        "dangling": "dangling",
        "fifo": "fifo",
        "model": "model",
        "model_damaged": "model_damaged",
        "model_deep": "model_deep",
        "devnull": "/dev/null",
        "under_file": "small_gfx950.csv/sub",
        "new": "new_output",
        "new_model": "new_model",
        "dot": ".",
        **{name.removesuffix(".csv"): name for name in PROBLEM_FILES},
        **trees,
    }


def _damaged_cache(cache: Path) -> None:
    """A cache whose cell and CK revision entries are damaged in ways a reader must take as a miss
    (a directory in an entry's place, bytes that are not UTF-8, JSON nested too deeply); the first
    command that uses it writes them anew. No fifo: the world's snapshot takes a special file
    replaced for one lost."""
    saved = os.environ.get("CKSPACE_CACHE_DIR")
    try:
        with redirect_stdout(io.StringIO()), redirect_stderr(io.StringIO()):
            assert (
                main(
                    [
                        "enumerate",
                        "--arch",
                        "gfx950",
                        "--variant",
                        "forward",
                        "--ndim",
                        "2",
                        "--dtype",
                        "bf16",
                        "--rule-set",
                        "tiny",
                        "--count",
                        "--cache-dir",
                        str(cache),
                    ]
                )
                == 0
            )
    finally:  # --cache-dir sets the variable for the process
        if saved is None:
            os.environ.pop("CKSPACE_CACHE_DIR", None)
        else:
            os.environ["CKSPACE_CACHE_DIR"] = saved
    damages = [
        lambda path: (path.unlink(), path.mkdir(), (path / "inside").write_text("x")),
        lambda path: path.write_bytes(b'{"key": "\xff"}'),
        lambda path: path.write_text(DEEP),
    ]
    entries = sorted(cache.glob("*/*.json"))
    assert len(entries) >= len(damages)
    for i, path in enumerate(entries):
        damages[i % len(damages)](path)


@dataclass(frozen=True)
class Entry:
    kind: str
    digest: str


def snapshot(root: Path) -> dict[str, Entry]:
    """Every entry under ``root`` (links not followed) with its kind and content hash."""
    out = {}
    for path in [root, *root.rglob("*")]:
        mode = os.lstat(path).st_mode
        if stat.S_ISLNK(mode):
            out[str(path)] = Entry("link", os.readlink(path))
        elif stat.S_ISREG(mode):
            out[str(path)] = Entry("file", hashlib.sha256(path.read_bytes()).hexdigest())
        elif stat.S_ISDIR(mode):
            out[str(path)] = Entry("dir", "")
        else:
            out[str(path)] = Entry("special", str(stat.S_IFMT(mode)))
    return out


def lost(before: dict[str, Entry], after: dict[str, Entry], root: Path) -> list[str]:
    """Entries that existed before and are gone or changed, except ckspace's own outputs: a model
    directory's model files and an emitted tree's bannered files may be rewritten by a command."""
    out = []
    for path, entry in before.items():
        relative = Path(path).relative_to(root).parts
        if (
            relative
            and relative[0] in ("model", "tree", "new_output", "new_model", "damaged_cache")
            and entry.kind != "special"
        ):
            continue
        if after.get(path) != entry and entry.kind != "dir":
            out.append(path)
        if entry.kind == "dir" and after.get(path, Entry("gone", "")).kind != "dir":
            out.append(path)
    return out


@dataclass
class Outcome:
    status: int
    stdout: str
    stderr: str


class Hung(BaseException):
    """A command that ran past its bound (a BaseException: no handler of ckspace's swallows it)."""


HANG_SECONDS = 600.0
"""How long one in-process command may run: far above any command a test runs on a loaded
machine, so that one waiting forever (on a fifo, a terminal) fails its test instead of hanging it."""


@contextmanager
def bounded(seconds: float, argv: list[str]) -> Iterator[None]:
    """Raise :class:`Hung` in this thread once ``seconds`` have passed (SIGALRM interrupts even a
    blocking ``open`` of a fifo). Only the main thread receives signals: elsewhere, unbounded."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def expired(signum: int, frame: object) -> None:
        raise Hung(f"ckspace {argv!r} ran for more than {seconds:.0f} s")

    previous = signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def run_cli(argv: list[str], env: Mapping[str, str] | None = None, limit: float = HANG_SECONDS) -> Outcome:
    """``ckspace argv`` in this process (fast enough to run thousands), with the variables ``env``
    set for this run only: exit status and output. An exception escaping ``main`` is a broken
    contract and propagates to the test, as does :class:`Hung` past ``limit`` seconds."""
    out, err = io.StringIO(), io.StringIO()
    saved = dict(os.environ)
    try:
        os.environ.update(env or {})
        with redirect_stdout(out), redirect_stderr(err), bounded(limit, argv):
            try:
                status = main(argv)
            except SystemExit as exc:  # --help, --version
                status = exc.code if isinstance(exc.code, int) else 0
    finally:
        os.environ.clear()
        os.environ.update(saved)
    return Outcome(status, out.getvalue(), err.getvalue())


def contract_breaks(argv: list[str], outcome: Outcome) -> list[str]:
    """What ``outcome`` breaks of the contract: exit status 0, 1 or 2 (and 3, explain's "valid but
    not proposed by the rule set"); no traceback; a failure is one line on stderr (log lines of -v
    and warnings aside); a problems CSV of :data:`PROBLEM_FILES` that must be refused never is
    read (exit 0)."""
    breaks = []
    if outcome.status not in (0, 1, 2) and not (outcome.status == 3 and "explain" in argv):
        breaks.append(f"exit status {outcome.status}")
    if "Traceback" in outcome.stderr:
        breaks.append("traceback on stderr")
    said = [line for line in outcome.stderr.splitlines() if not _LOG_LINE.match(line)]
    if outcome.status == 2 and len(said) != 1:
        breaks.append(f"a failure said {len(said)} lines: {said[:3]}")
    if outcome.status == 2 and said and not said[0].startswith("ckspace: error: "):
        breaks.append(f"a failure's line is not an error line: {said[0][:100]}")
    given = [argv[i + 1] for i, arg in enumerate(argv[:-1]) if arg == "--problems"]
    if outcome.status == 0 and any(value in PROBLEM_FILES and value != "problems.csv" for value in given):
        breaks.append(f"a problems CSV that must be refused was read: {given}")
    return breaks


READY_TIMEOUT = 300.0
"""Seconds a test waits for a child to report (ready, or a moment it reached): far above a start-up
or an emit's first writes on a loaded 2-core machine, so that only a hung child fails the test, and
fails it instead of hanging it."""


def start_ready(argv: list[str], **popen) -> subprocess.Popen:
    """``python -m ckspace argv``, returned once it reports its signal handlers installed (on the
    pipe it is given by ``CKSPACE_TEST_READY_FD``): a signal sent from then on is ckspace's to
    handle, while one sent during interpreter start-up would be Python's (death by the signal)."""
    env = {**popen.pop("env", os.environ)}
    return start_reporting(
        lambda fd: ([sys.executable, "-m", "ckspace", *argv], {**env, "CKSPACE_TEST_READY_FD": str(fd)}),
        b"ready\n",
        f"ckspace {argv!r}",
        **popen,
    )


def start_reporting(command, expected: bytes, what: str, **popen) -> subprocess.Popen:
    """A process started by ``command(fd)`` (which returns its argv and environment, given the
    descriptor of a pipe the process inherits), returned once it has written ``expected`` to that
    pipe: the one way tests wait for a child to reach a moment (handlers installed, a write about to
    happen), never a delay. A child that says something else, or nothing within
    :data:`READY_TIMEOUT`, is killed and fails the test with its stderr."""
    read, write = os.pipe()
    try:
        argv, env = command(write)
        process = subprocess.Popen(argv, pass_fds=(write,), env=env, **popen)
    finally:
        os.close(write)
    try:
        ready, _, _ = select.select([read], [], [], READY_TIMEOUT)
        said = os.read(read, 64) if ready else b""
    finally:
        os.close(read)
    if said != expected:
        process.kill()
        _, stderr = process.communicate(timeout=READY_TIMEOUT)
        pytest.fail(
            f"{what} did not report {expected!r} in {READY_TIMEOUT:.0f} s "
            f"(said {said!r}, exit {process.returncode}): {stderr}"
        )
    return process


def finish(process: subprocess.Popen) -> str:
    """The process's stderr once it has exited, within a bound (killed past it)."""
    try:
        _, stderr = process.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        process.kill()
        process.communicate()
        raise
    return stderr
