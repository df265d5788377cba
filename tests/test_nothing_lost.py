""" "Nothing lost" (docs/cli.md, *Bad input, outputs, caches and the environment*): what a hostile or
unlucky ``--out`` must never cost its owner.

* ``bench --resume`` checks the whole file before it changes a byte: a foreign CSV (or one whose
  complete rows are not this sweep's) is refused untouched, even when its last line is unterminated;
  only a torn last row of a genuine results file is dropped. A symbolic link is never appended
  through, and two benches never write one results file at once.
* A re-emit deletes and writes only inside ``--out``: manifest paths with ``..``, absolute paths,
  and paths through a symbolic link inside the tree are never followed.
"""

from __future__ import annotations

import csv
import io
import json
import os
from pathlib import Path

import pytest

from ckspace.core.config import GemmConfig
from ckspace.core.errors import CkspaceError, InvalidInputError
from ckspace.run.results import ResultsFile
from ckspace.workloads.measurement import COLUMNS, config_cells, problem_cells
from ckspace.workloads.problem import ConvProblem

KERNEL = "grouped_conv_fwd_bf16_nhwgc_2d_compv3_cshuffle_intrawave_128x128x64_2x2x1_16x16x32_vec8_8_1"
PROBLEMS = (
    ConvProblem.parse("N=2,C=16,K=16,G=1,Hi=6,Wi=6,Y=3,X=3,stride_h=1,stride_w=1,pad_h=1,pad_w=1"),
    ConvProblem.parse("N=1,C=32,K=16,G=2,Hi=5,Wi=7,Y=3,X=3,stride_h=2,stride_w=2,pad_h=1,pad_w=1"),
)


def _row(idx: int, kernel: str = KERNEL) -> dict[str, str]:
    row = dict.fromkeys(COLUMNS, "")
    row.update(
        kernel=kernel,
        problem_idx=str(idx),
        **problem_cells(PROBLEMS[idx]),
        **config_cells(GemmConfig.from_name(KERNEL, "gfx942")),
        status="ok",
        ckspace_version="0",
    )
    return row


def _csv(rows: list[dict[str, str]]) -> bytes:
    text = io.StringIO()
    writer = csv.DictWriter(text, fieldnames=COLUMNS, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return text.getvalue().encode()


# -- bench --out --resume -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "content",
    [
        b"a,b\n1,2",  # someone else's CSV without a final newline
        b"name,score\nalice,3\nbob,4",
        b"just one line, no newline",
        b"\xff\xfe not utf-8\n\x00\x01",
    ],
)
def test_resume_of_a_foreign_csv_without_final_newline_refuses_it_untouched(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "mine.csv"
    path.write_bytes(content)
    with pytest.raises(InvalidInputError, match="not a results file"):
        ResultsFile.open(path, True, PROBLEMS)
    assert path.read_bytes() == content


def test_resume_of_a_results_file_of_other_problems_with_a_torn_tail_refuses_it_untouched(tmp_path: Path) -> None:
    """The header is ckspace's, a complete row is not of these problems, the last line is torn:
    refused because of the complete row, before the torn line is dropped."""
    other = {**_row(0), **problem_cells(PROBLEMS[1])}  # problem 0 of another problems file
    _refused_untouched(tmp_path, _csv([other]) + _csv([_row(1)]).splitlines(keepends=True)[1][:30])


def test_resume_of_a_header_followed_by_foreign_text_refuses_it_untouched(tmp_path: Path) -> None:
    """ckspace's header, then an unterminated line that cannot be the start of a bench row."""
    _refused_untouched(tmp_path, _csv([_row(0)]) + b"totals:,,,," + b"x," * (len(COLUMNS) + 3))


def _refused_untouched(tmp_path: Path, content: bytes) -> None:
    """``--resume`` of a file holding ``content`` is refused, and the file keeps every byte."""
    path = tmp_path / "mine.csv"
    path.write_bytes(content)
    with pytest.raises(InvalidInputError):
        ResultsFile.open(path, True, PROBLEMS)
    assert path.read_bytes() == content


def test_resume_of_a_genuine_results_file_drops_only_its_torn_last_row(tmp_path: Path) -> None:
    whole = _csv([_row(0)])
    path = tmp_path / "out.csv"
    path.write_bytes(whole + _csv([_row(1)]).splitlines(keepends=True)[1][:40])
    results = ResultsFile.open(path, True, PROBLEMS)
    try:
        assert results.done == {(KERNEL, 0)}
        results.append(_row(1))
    finally:
        results.close()
    assert path.read_bytes() == _csv([_row(0), _row(1)])


def test_resume_refuses_a_symlink_out_and_leaves_its_target(tmp_path: Path) -> None:
    target = tmp_path / "real.csv"
    target.write_bytes(_csv([_row(0)]))
    link = tmp_path / "link.csv"
    link.symlink_to(target)
    with pytest.raises(InvalidInputError, match="symbolic link"):
        ResultsFile.open(link, True, PROBLEMS)
    assert target.read_bytes() == _csv([_row(0)]) and link.is_symlink()


def test_resume_refuses_a_fifo_out_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo.csv"
    os.mkfifo(fifo)
    with pytest.raises(InvalidInputError):
        ResultsFile.open(fifo, True, PROBLEMS)


def test_two_concurrent_benches_of_one_output_do_not_both_write_it(tmp_path: Path) -> None:
    path = tmp_path / "out.csv"
    first = ResultsFile.open(path, False, PROBLEMS)
    try:
        first.append(_row(0))
        with pytest.raises(InvalidInputError, match="another"):
            ResultsFile.open(path, True, PROBLEMS)
    finally:
        first.close()
    assert path.read_bytes() == _csv([_row(0)])
    second = ResultsFile.open(path, True, PROBLEMS)  # once the first has ended, resuming works
    second.close()


def test_a_new_results_file_never_replaces_one_created_meanwhile(tmp_path: Path, monkeypatch) -> None:
    """The existence check and the creation race: the loser is refused, the winner's rows stay."""
    path = tmp_path / "out.csv"
    path.write_bytes(_csv([_row(0)]))
    monkeypatch.setattr(Path, "exists", lambda self: False)  # as if the other bench created it just now
    with pytest.raises(CkspaceError, match="exists"):
        ResultsFile.open(path, False, PROBLEMS)
    monkeypatch.undo()
    assert path.read_bytes() == _csv([_row(0)])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.csv"]  # no temporary left behind


# -- emit: only inside --out -------------------------------------------------------------------------------


def _emit(out: Path):
    from test_emit import AITER, golden_configs, kernel_of

    from ckspace.emit.emitter import SelectorOptions, emit

    kernels = [kernel_of(c) for c in golden_configs()[:2]]
    return emit(kernels, out, AITER, arch="gfx942", request={}, selector=SelectorOptions())


def _victim(path: Path) -> bytes:
    path.parent.mkdir(parents=True, exist_ok=True)
    data = b"// Generated by ckspace (not this tree's: someone else's file)\n"
    path.write_bytes(data)
    return data


def test_re_emit_never_deletes_files_outside_the_tree_a_manifest_names(tmp_path: Path) -> None:
    out = tmp_path / "tree"
    _emit(out)
    outside = _victim(tmp_path / "victim.hpp")
    absolute = _victim(tmp_path / "elsewhere" / "absolute.hpp")
    manifest = json.loads((out / "manifest.json").read_text())
    for path in ("../victim.hpp", str(tmp_path / "elsewhere" / "absolute.hpp"), "dispatcher_wrappers/../../victim.hpp"):
        manifest["shared"].append({"path": path, "sha256": "0" * 64})
    (out / "manifest.json").write_text(json.dumps(manifest))
    result = _emit(out)
    assert (tmp_path / "victim.hpp").read_bytes() == outside
    assert (tmp_path / "elsewhere" / "absolute.hpp").read_bytes() == absolute
    assert not any(".." in p or p.startswith("/") for p in result.removed)


def test_re_emit_never_follows_a_symlinked_folder_out_of_the_tree(tmp_path: Path) -> None:
    out = tmp_path / "tree"
    first = _emit(out)
    wrappers = [k.wrapper.path for k in first.manifest.kernels]
    elsewhere = tmp_path / "elsewhere"
    kept = {name: _victim(elsewhere / Path(name).name) for name in wrappers}
    for name in (out / "dispatcher_wrappers").iterdir():
        name.unlink()
    (out / "dispatcher_wrappers").rmdir()
    (out / "dispatcher_wrappers").symlink_to(elsewhere)
    with pytest.raises(InvalidInputError, match="symbolic link"):
        _emit(out)
    assert {name: (elsewhere / Path(name).name).read_bytes() for name in wrappers} == kept
    assert sorted(p.name for p in elsewhere.iterdir()) == sorted(Path(n).name for n in wrappers)


@pytest.mark.parametrize("keep", [1, 6, 40, 200])
def test_a_row_torn_anywhere_is_dropped(tmp_path: Path, keep: int) -> None:
    path = tmp_path / "out.csv"
    path.write_bytes(_csv([_row(0)]) + _csv([_row(1)]).splitlines(keepends=True)[1][:keep])
    ResultsFile.open(path, True, PROBLEMS).close()
    assert path.read_bytes() == _csv([_row(0)])


@pytest.mark.slow
def test_two_builds_of_one_tree_link_side_by_side(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two host-only builds (what every ``bench`` runs) of one tree at once both succeed and leave one
    whole library and no temporary: each links to a name of its own (it was the fixed
    ``libckspace_dispatch.so.tmp``, which the second ``os.replace`` could find gone)."""
    import subprocess
    import sys

    from conftest import ROOT, fake_ck

    from ckspace.environment.files import unique_temporary

    first, second = unique_temporary(tmp_path / "lib.so"), unique_temporary(tmp_path / "lib.so")
    assert first != second and first.name.startswith(".lib.so.") and first.name.endswith(".tmp")
    ck = fake_ck(tmp_path / "ck", explicit_gemm=False)
    tree = tmp_path / "tree"
    env = {**os.environ, "CK_ROOT": str(ck), "CKSPACE_BUILD_CACHE": str(tmp_path / "objects")}
    emit = [
        sys.executable,
        "-m",
        "ckspace",
        "emit",
        "--arch",
        "gfx950",
        "--variant",
        "forward",
        "--ndim",
        "2",
        "--dtype",
        "bf16",
        "--rule-set",
        "default",
        "--with-selector",
        "--out",
        str(tree),
    ]
    subprocess.run(emit, env=env, cwd=ROOT, check=True, capture_output=True, timeout=300)
    build = [sys.executable, "-m", "ckspace", "build", str(tree), "--host-only"]
    runs = [
        subprocess.Popen(build, env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    outcomes = [(run.wait(timeout=300), run.stderr.read()) for run in runs]
    assert all(status == 0 for status, _ in outcomes), outcomes
    host = tree / "build" / "host"
    assert (host / "libckspace_dispatch.so").is_file()
    assert not [p.name for p in host.iterdir() if p.name.endswith(".tmp")]


# -- a full disk -------------------------------------------------------------------------------------------

_ON_A_FULL_DISK = (
    'mount -t tmpfs -o size="$1" ckspace-full "$2" && shift 2 && "$@" >/dev/null; s=$?; find "$0"; exit $s'
)
"""Mount a tmpfs of size $1 at $2, run the rest, list what is left on it ($0: the mount point again)."""


def _on_a_full_disk(mount: Path, size: str, argv: list[str], env: dict[str, str]) -> tuple[int, str, list[str]]:
    """``python -m ckspace argv`` with ``mount`` a tmpfs of ``size`` (a full disk once that is written)
    in a mount namespace of its own, so the mount ends with the command whatever happens: the exit
    status, stderr and the paths left on the tmpfs. Needs root (tests run as root here); skipped
    where a mount namespace cannot be made."""
    import shutil
    import subprocess
    import sys

    if shutil.which("unshare") is None:
        pytest.skip("no unshare(1) to make a mount namespace")
    probe = subprocess.run(["unshare", "--mount", "true"], capture_output=True)
    if probe.returncode != 0:
        pytest.skip(f"no mount namespace here: {probe.stderr.decode().strip()}")
    mount.mkdir()
    command = [sys.executable, "-m", "ckspace", *argv]
    done = subprocess.run(
        ["unshare", "--mount", "sh", "-c", _ON_A_FULL_DISK, str(mount), size, str(mount), *command],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    return done.returncode, done.stderr, sorted(done.stdout.split())


EMIT_TINY = "emit --arch gfx950 --variant forward --ndim 2 --dtype bf16 --rule-set tiny"


@pytest.mark.parametrize(
    "argv, written",
    [(EMIT_TINY.split(), "tree"), (["train", "--arch", "gfx950", "--folds", "2"], "model")],
    ids=["emit", "train"],
)
@pytest.mark.slow
def test_issue36_item19_a_full_disk_is_one_line_naming_the_file(tmp_path: Path, argv: list[str], written: str) -> None:
    """``emit`` (files written one by one) and ``train`` (a model directory
    filled and swapped in) on a disk that fills up. The write's ENOSPC carries no file name, so the
    line said "No space left on device" and not where; it names the output file now, and nothing
    half-written is left (the tree keeps the whole files written before)."""
    from ckspace.workloads.datasets import DATASETS

    data = tmp_path / "small.csv"
    data.write_text("".join(DATASETS["mi355x-forward-bf16"].path.read_text().splitlines(keepends=True)[:400]))
    mount = tmp_path / "full"
    out = mount / written
    extra = ["--data", str(data)] if argv[0] == "train" else []
    env = {**os.environ, "CKSPACE_CACHE_DIR": str(tmp_path / "cache")}
    status, stderr, left = _on_a_full_disk(mount, "32k", [*argv, *extra, "--out", str(out)], env)
    said = [line for line in stderr.splitlines() if not line.startswith("ckspace: NOTICE: ")]
    assert status == 2 and len(said) == 1, stderr
    prefix = f"ckspace: error: No space left on device: '{out}/"
    assert said[0].startswith(prefix) and said[0].endswith("'"), said[0]
    assert not [path for path in left if Path(path).name.startswith(".")], left


# -- evaluate --plot ------------------------------------------------------------------------------------------


def _evaluate_plot(tmp_path: Path, target: Path, monkeypatch: pytest.MonkeyPatch):
    """``evaluate --plot target`` on a small CSV, with cross-validation made to fail the test: the
    refusals below come before any work."""
    from fuzz_world import run_cli

    import ckspace.training.evaluation as evaluation
    from ckspace.workloads.datasets import DATASETS

    data = tmp_path / "small.csv"
    data.write_text("".join(DATASETS["mi355x-forward-bf16"].path.read_text().splitlines(keepends=True)[:400]))
    monkeypatch.setattr(evaluation, "cross_validate", lambda *a, **k: pytest.fail("cross-validation ran first"))
    argv = ["evaluate", "--data", str(data), "--arch", "gfx950", "--folds", "2", "--plot", str(target)]
    return run_cli(argv)


@pytest.mark.parametrize(
    "name, content, says",
    [
        ("results.csv", b"kernel,tflops\na,1\n", "give a path ending in .png"),
        ("plot", None, "give a path ending in .png"),
        ("plot.png", b"kernel,tflops\na,1\n", "exists and is not a PNG"),
    ],
    ids=["an existing csv", "no suffix", "a png name holding text"],
)
def test_issue36_item13_evaluate_plot_never_replaces_a_file_it_did_not_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, content: bytes | None, says: str
) -> None:
    """``--plot`` over an existing CSV replaced it with a PNG (exit 0). A plot is
    written only to a ``.png`` path that is new or already holds a PNG; anything else is one line
    naming the path, before the cross-validation, and the file keeps every byte."""
    target = tmp_path / name
    if content is not None:
        target.write_bytes(content)
    outcome = _evaluate_plot(tmp_path, target, monkeypatch)
    assert (outcome.status, len(outcome.stderr.splitlines())) == (2, 1), outcome.stderr
    assert repr(str(target)) in outcome.stderr and says in outcome.stderr
    assert (target.read_bytes() if content is not None else target.exists()) == (content or False)


def test_issue36_item21_evaluate_plot_checks_matplotlib_before_the_cross_validation(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without matplotlib, ``--plot`` failed only after the whole cross-validation
    had run; the check now comes first, in one line."""
    import sys

    monkeypatch.setitem(sys.modules, "matplotlib", None)  # an import of it raises ImportError
    outcome = _evaluate_plot(tmp_path, tmp_path / "plot.png", monkeypatch)
    assert (outcome.status, outcome.stderr) == (
        2,
        "ckspace: error: plots need matplotlib: pip install 'ckspace[plot]'\n",
    )
