"""Long steps say how far they are when stderr is not a terminal, the build counts kernels and
compiles on every CPU it may use, a mistyped command, choice or filter field is answered with the
closest real one, and build and bench name their executors alike (the tests' names give the item of
the tracker they answer)."""

from __future__ import annotations

import inspect
import json
import os
import re
import sys
from pathlib import Path
from typing import ClassVar

import pytest
import synthetic_measurements as sm
from test_build import use_fake_toolchain

from ckspace.cli import main
from ckspace.compiling import builder
from ckspace.emit.emitter import emit
from ckspace.environment.ck_header_cache import find_revision
from ckspace.space.space import Space
from ckspace.training import boosters
from ckspace.workflow import build_library


@pytest.fixture()
def tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Five emitted gfx942 kernels, the second one failing to compile, for the stand-in compiler of
    :mod:`test_build` (a fake CK tree, an object cache of this test's own)."""
    use_fake_toolchain(tmp_path, monkeypatch, tmp_path / "fakeclang")
    kernels = Space("gfx942", "forward", 2, "bf16", "default").kernels()[:5]
    result = emit(kernels, tmp_path / "tree", find_revision(), arch="gfx942", request={})
    with (tmp_path / "tree" / f"{result.manifest.kernels[1].name}.cpp").open("a") as handle:
        handle.write("// BROKEN\n")
    return tmp_path / "tree"


def kernel_names(tree: Path) -> list[str]:
    return [k["name"] for k in json.loads((tree / "manifest.json").read_text())["kernels"]]


def test_issue36_item20_a_piped_build_says_a_line_per_kernel(tree: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """stderr is not a terminal here: every kernel is named on its own line as its unit finishes,
    counted out of all the kernels (5, in 2 units of 3 and 2), then the failed one again as it
    is compiled alone."""
    assert main(["build", str(tree), "--arch", "gfx942", "--batch", "3", "--allow-edited"]) == 1
    err = capsys.readouterr().err.splitlines()
    built = [line for line in err if re.fullmatch(r"ckspace: NOTICE: compiling gfx942: \d/5 \S+ \(\d+ s\)", line)]
    assert sorted(line.split()[5] for line in built) == sorted(kernel_names(tree))
    assert [line.split()[4] for line in built] == [f"{n}/5" for n in range(1, 6)]
    isolating = [line for line in err if "isolating failures: " in line]
    assert len(isolating) == 3  # the failed unit's three kernels, one unit each


class RecordingBar:
    """Stands in for ``rich.progress.Progress``: records each task's total and what advanced it."""

    tasks: ClassVar[list[dict]] = []

    def __init__(self, *columns: object, **options: object) -> None:
        self.options = options

    def __enter__(self) -> RecordingBar:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def add_task(self, description: str, total: int, **fields: object) -> int:
        RecordingBar.tasks.append({"label": description, "total": total, "done": 0, "options": self.options})
        return len(RecordingBar.tasks) - 1

    def advance(self, task: int, advance: int = 1) -> None:
        RecordingBar.tasks[task]["done"] += advance


def test_issue36_item20_the_build_bar_counts_kernels_on_stderr(tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """On a terminal the bar is drawn, on stderr, and counts kernels, not translation units: 5
    kernels in 2 units, then the 3 kernels of the failed unit alone."""
    import rich.progress

    monkeypatch.setattr(rich.progress, "Progress", RecordingBar)
    monkeypatch.setattr(RecordingBar, "tasks", [])
    report = builder.build(tree, "gfx942", jobs=2, batch=3, allow_edited=True, progress=True)
    assert (report.ok, report.failed, report.units) == (4, 1, 2 + 3)
    assert [(t["label"], t["total"], t["done"]) for t in RecordingBar.tasks] == [
        ("compiling gfx942", 5, 5),
        ("isolating failures", 3, 3),
    ]
    assert all(t["options"]["console"].file is sys.stderr for t in RecordingBar.tasks)


def test_issue36_item20_build_compiles_on_every_cpu_it_may_use(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """--jobs defaults to the CPUs of the affinity mask (three of a machine's cores here), and
    --help says so with the number."""
    monkeypatch.delattr(os, "process_cpu_count", raising=False)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 2, 5}, raising=False)
    monkeypatch.setattr(os, "cpu_count", lambda: 8)
    assert builder.default_jobs() == 3
    with pytest.raises(SystemExit):
        main(["build", "--help"])
    assert "the CPUs this process may use, 3 here" in " ".join(capsys.readouterr().out.split())


@pytest.mark.slow
def test_issue36_item20_a_piped_evaluation_says_a_line_per_fold(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Cross-validation with no bar (stderr is not a terminal) names each fold as it is done."""
    monkeypatch.setattr(boosters, "NUM_ROUNDS", 20)
    sweep = sm.sweep({"bwd_weight": sm.listed_problems("bwd_weight", 3, offset=5)}, seed=4)
    path = sweep.write(tmp_path / "small.csv")
    assert main(["evaluate", "--data", str(path), "--folds", "3"]) == 0
    folds = [line for line in capsys.readouterr().err.splitlines() if "cross-validation: " in line]
    assert [re.search(r"cross-validation: (\d/\d) folds", line)[1] for line in folds] == ["1/3", "2/3", "3/3"]
    assert all(line.startswith("ckspace: NOTICE: gfx950 bwd_weight bf16: ") for line in folds), folds


def one_error_line(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    return err.strip()


@pytest.mark.parametrize(
    "argv",
    [
        ["enumrate", "--arch", "gfx942", "--variant", "forward", "--count"],
        ["-v", "--cache-dir", "somewhere", "enumrate", "--arch", "gfx942"],
        ["enumrate"],
    ],
)
def test_issue36_item21_an_unknown_command_is_named_first(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    """Not 'unknown option --arch', which is right: the command is what is wrong."""
    line = one_error_line(argv, capsys)
    assert line.startswith("ckspace: error: unknown command 'enumrate'; did you mean enumerate? (valid: enumerate, ")


def test_issue36_item21_no_hint_when_no_command_is_close(capsys: pytest.CaptureFixture[str]) -> None:
    line = one_error_line(["frobnicate", "--arch", "gfx942"], capsys)
    assert line.startswith("ckspace: error: unknown command 'frobnicate' (valid: enumerate, explain, ")


@pytest.mark.parametrize(
    ("option", "value", "typo", "hint"),
    [
        ("--arch", "gfx94", "gfx94", "gfx942"),
        ("--variant", "forwrd", "forwrd", "forward"),
        ("--dtype", "bf61", "bf61", "bf16"),
        ("--rule-set", "ful", "ful", "full"),
        ("--rules-revision", "pr1273", "pr1273", "pr12173"),
        ("--where", "tile_mm >= 64", "tile_mm", "tile_m"),
        ("--where", "pipeline == compv33", "compv33", "compv3"),
    ],
)
def test_issue36_item21_a_mistyped_choice_names_the_closest(
    option: str, value: str, typo: str, hint: str, capsys: pytest.CaptureFixture[str]
) -> None:
    space = {"--arch": "gfx942", "--variant": "forward", "--ndim": "2", "--dtype": "bf16", option: value}
    argv = ["enumerate", *(word for pair in space.items() for word in pair), "--count", "--rules-only"]
    line = one_error_line(argv, capsys)
    assert f"did you mean {hint}?" in line and repr(typo) in line, line


def test_issue36_item21_build_and_bench_name_their_executors_alike(
    tree: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """local or ray in both; build's old name ninja is taken with a one-line note, and the report
    says local."""
    from ckspace.compiling.executor import EXECUTORS  # here: a module-level import would hide the other tests' failures

    assert EXECUTORS == ("local", "ray")
    for function in (builder.build, build_library):  # the Python flow's default needs no note either
        assert inspect.signature(function).parameters["executor"].default == "local"
    bench = ["bench", str(tree), "--problems", "holdout-300", "--out", str(tree.parent / "results.csv")]
    for command in (["build", str(tree), "--arch", "gfx942"], bench):
        line = one_error_line([*command, "--executor", "locale"], capsys)
        assert "'locale'; valid: local, ray; did you mean local?" in line, line
    assert main(["build", str(tree), "--arch", "gfx942", "--executor", "local", "--allow-edited"]) == 1
    assert "FAILED" in capsys.readouterr().out
    assert main(["build", str(tree), "--arch", "gfx942", "--executor", "ninja", "--allow-edited"]) == 1
    notes = [line for line in capsys.readouterr().err.splitlines() if "WARNING" in line and "'ninja'" in line]
    assert notes == [
        "ckspace: WARNING: executor 'ninja' is now called 'local' (as in bench); 'ninja' is accepted for now"
    ]
    assert json.loads((tree / "build" / "gfx942" / "report.json").read_text())["executor"] == "local"
