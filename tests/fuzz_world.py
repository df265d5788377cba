"""The hostile world the CLI fuzzer runs in: a temporary directory of files a user may point ckspace
at by mistake or on purpose, the argument vocabulary drawn from, and the contract every run is
checked against.

Files: a small valid benchmark CSV and its BOM, UTF-16, binary and empty twins; a names file (what
`enumerate --list` prints, depthwise names included); an emitted tree and its damaged twins
(truncated, empty or binary manifest, sources missing, a source edited); a model directory and a
damaged one; a directory holding someone else's file; a symbolic link; a fifo; and paths to
/dev/null and under a file. `snapshot` records what is there so a run can be checked to have
changed nothing it did not create. `start_ready` starts a real ckspace process to be signalled.
"""

from __future__ import annotations

import hashlib
import io
import os
import re
import select
import shutil
import stat
import subprocess
import sys
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import SHARED, fake_ck

from ckspace.cli import main
from ckspace.select.store import shipped_model_dir

PROBLEM = "N=1,G=1,C=64,K=128,Hi=56,Wi=56,Y=3,X=3,stride=1,pad=1"
FOREIGN = "foreign"
"""A directory that is not ckspace's: its file must survive every command."""

_LOG_LINE = re.compile(r"^ckspace: (WARNING|INFO|DEBUG): ")


def build_world(root: Path) -> dict[str, str]:
    """Create the hostile files under ``root``; returns name -> path (relative to ``root``)."""
    data = SHARED / "data" / "upstream" / "benchmark_forward_300_bf16_gfx950.csv"
    lines = data.read_text().splitlines(keepends=True)[:400] if data.is_file() else []
    csv_text = "".join(lines)
    (root / "small_gfx950.csv").write_text(csv_text)
    (root / "bom.csv").write_bytes(b"\xef\xbb\xbf" + csv_text.encode())
    (root / "utf16.csv").write_bytes(csv_text.encode("utf-16"))
    (root / "binary.bin").write_bytes(bytes(range(256)) * 8)
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

    names = io.StringIO()
    with redirect_stdout(names), redirect_stderr(io.StringIO()):
        main(["enumerate", "--arch", "gfx950", "--variant", "forward", "--ndim", "2", "--dtype", "bf16",
              "--rule-set", "tiny", "--list"])
    (root / "names.txt").write_text(names.getvalue())
    fake_ck(root / "ck", explicit_gemm=True)
    with redirect_stdout(io.StringIO()), redirect_stderr(io.StringIO()):
        status = main(["emit", "--arch", "gfx950", "--variant", "forward", "--ndim", "2", "--dtype", "fp16",
                       "--rule-set", "full-tests", "--ck-root", str(root / "ck"), "--out", str(root / "tree")])
    assert status == 0 and (root / "tree" / "manifest.json").is_file()
    for name, damage in (("tree_truncated", lambda m: m.write_bytes(m.read_bytes()[:100])),
                         ("tree_empty", lambda m: m.write_bytes(b"")),
                         ("tree_binary", lambda m: m.write_bytes(bytes(range(256))))):
        shutil.copytree(root / "tree", root / name)
        damage(root / name / "manifest.json")
    (root / "tree_missing").mkdir()
    shutil.copy(root / "tree" / "manifest.json", root / "tree_missing" / "manifest.json")
    shutil.copytree(root / "tree", root / "tree_edited")
    source = sorted((root / "tree_edited").glob("grouped_conv_*.hpp"))[0]
    source.write_text(source.read_text() + "// edited\n")
    trees = {n: n for n in ("ck", "tree", "tree_truncated", "tree_empty", "tree_binary", "tree_missing", "tree_edited")}
    return {
        "csv": "small_gfx950.csv", "bom": "bom.csv", "utf16": "utf16.csv", "binary": "binary.bin",
        "empty": "empty.txt", "names": "names.txt", "foreign": FOREIGN, "link": "link", "dangling": "dangling",
        "fifo": "fifo", "model": "model", "model_damaged": "model_damaged", "devnull": "/dev/null",
        "under_file": "small_gfx950.csv/sub", "new": "new_output", "new_model": "new_model", "dot": ".", **trees,
    }


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
        if relative and relative[0] in ("model", "tree", "new_output", "new_model") and entry.kind != "special":
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


def run_cli(argv: list[str]) -> Outcome:
    """``ckspace argv`` in this process (fast enough to run thousands): exit status and output.
    An exception escaping ``main`` is a broken contract and propagates to the test."""
    out, err = io.StringIO(), io.StringIO()
    saved = dict(os.environ)
    try:
        with redirect_stdout(out), redirect_stderr(err):
            try:
                status = main(argv)
            except SystemExit as exc:  # --help, --version
                status = exc.code if isinstance(exc.code, int) else 0
    finally:
        os.environ.clear()
        os.environ.update(saved)
    return Outcome(status, out.getvalue(), err.getvalue())


def contract_breaks(argv: list[str], outcome: Outcome) -> list[str]:
    """What ``outcome`` breaks of the contract: exit status 0, 1 or 2; no traceback; a failure is
    one line on stderr (log lines of -v and warnings aside)."""
    breaks = []
    if outcome.status not in (0, 1, 2):
        breaks.append(f"exit status {outcome.status}")
    if "Traceback" in outcome.stderr:
        breaks.append("traceback on stderr")
    said = [line for line in outcome.stderr.splitlines() if not _LOG_LINE.match(line)]
    if outcome.status == 2 and len(said) != 1:
        breaks.append(f"a failure said {len(said)} lines: {said[:3]}")
    if outcome.status == 2 and said and not said[0].startswith("ckspace: error: "):
        breaks.append(f"a failure's line is not an error line: {said[0][:100]}")
    return breaks


READY_TIMEOUT = 60.0
"""Seconds a test waits for a child to report ready: far above a start-up on a loaded machine, so
that a hung child fails the test instead of hanging it."""


def start_ready(argv: list[str], **popen) -> subprocess.Popen:
    """``python -m ckspace argv``, returned once it reports its signal handlers installed (on the
    pipe it is given by ``CKSPACE_TEST_READY_FD``): a signal sent from then on is ckspace's to
    handle, while one sent during interpreter start-up would be Python's (death by the signal)."""
    read, write = os.pipe()
    try:
        process = subprocess.Popen([sys.executable, "-m", "ckspace", *argv], pass_fds=(write,),
                                   env={**os.environ, "CKSPACE_TEST_READY_FD": str(write)}, **popen)
    finally:
        os.close(write)
    try:
        ready, _, _ = select.select([read], [], [], READY_TIMEOUT)
        said = os.read(read, 64) if ready else b""
    finally:
        os.close(read)
    if said != b"ready\n":
        process.kill()
        _, stderr = process.communicate(timeout=READY_TIMEOUT)
        pytest.fail(f"ckspace {argv!r} did not report ready in {READY_TIMEOUT:.0f} s "
                    f"(said {said!r}, exit {process.returncode}): {stderr}")
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
