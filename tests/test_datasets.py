"""The shipped data sets: the installed bytes are the catalogue's, the package data holds them all,
and every command argument that reads a measurement or problems CSV takes their names (a file of
the user's with the same name wins; anything else is one line listing the names)."""

from __future__ import annotations

import csv
import fnmatch
import json
import tomllib
from pathlib import Path

import pytest
from fuzz_world import contract_breaks, run_cli

from ckspace.cli import _parser
from ckspace.commands.common import measurements_file, problems_file
from ckspace.core.errors import InvalidInputError
from ckspace.core.vocab import Variant
from ckspace.environment.files import sha256
from ckspace.planning.workload import read_workload
from ckspace.workloads.datasets import DATASETS, Kind, argument_text, data_file, dataset_names

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "ckspace"
ARGUMENTS = {
    ("train", "--data"): Kind.MEASUREMENTS,
    ("evaluate", "--data"): Kind.MEASUREMENTS,
    ("plan", "--problems"): Kind.PROBLEMS,
    ("bench", "--problems"): Kind.PROBLEMS,
    ("hipdnn", "--problems"): Kind.PROBLEMS,
}
"""Every command argument that reads a data set's kind of CSV, and the kind."""
COMMAND_LINES = {
    "train": ["train", "--out", "model", "--data"],
    "evaluate": ["evaluate", "--data"],
    "plan": ["plan", "--arch", "gfx950", "--variant", "forward", "--dtype", "bf16", "--budget", "2", "--problems"],
    "bench": ["bench", "tree", "--out", "results.csv", "--problems"],
    "hipdnn": ["hipdnn", "census", "plugin.so", "--problems"],
}
"""A command line of each command, missing only the data set argument's value (last)."""


@pytest.mark.parametrize("name", list(DATASETS))
def test_the_installed_file_is_the_catalogued_one(name: str) -> None:
    dataset = DATASETS[name]
    assert dataset.path.is_file() and sha256(dataset.path.read_bytes()) == dataset.sha256, name
    with dataset.path.open(newline="") as handle:
        rows = list(csv.reader(handle))
    assert len(rows) - 1 == dataset.rows and all(len(row) == len(rows[0]) for row in rows)
    provenance = (dataset.path.parent / "PROVENANCE.md").read_text()
    assert name in provenance and dataset.file in provenance
    assert argument_text(dataset.path) == name  # how a model card's training command names it


def test_every_shipped_csv_is_catalogued_and_is_package_data() -> None:
    """Nothing under ckspace/data/<kind>/ escapes the catalogue, and pyproject's package data
    takes every file there (so a non-editable install has the data sets and their provenance)."""
    shipped = {p for kind in Kind for p in (PACKAGE / "data" / kind.value).iterdir()}
    assert {p for p in shipped if p.suffix == ".csv"} == {d.path for d in DATASETS.values()}
    patterns = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["ckspace"]
    for path in shipped:
        relative = path.relative_to(PACKAGE).as_posix()
        assert any(fnmatch.fnmatch(relative, pattern) for pattern in patterns), relative


def test_exactly_these_arguments_take_data_set_names() -> None:
    parser, _ = _parser()
    kinds = {measurements_file: Kind.MEASUREMENTS, problems_file: Kind.PROBLEMS}
    found = {
        (name, action.option_strings[0]): kinds[action.convert]
        for name, command in parser.subcommands.items()
        for action in command.arguments
        if getattr(action, "convert", None) in kinds
    }
    assert found == ARGUMENTS


@pytest.mark.parametrize("command, option", list(ARGUMENTS))
def test_each_data_set_name_is_an_argument_of_each_command(command: str, option: str) -> None:
    parser, _ = _parser()
    for name in dataset_names(ARGUMENTS[command, option]):
        args = parser.parse_args([*COMMAND_LINES[command], name])
        value = getattr(args, option.removeprefix("--"))
        assert (value if isinstance(value, Path) else value[0]) == DATASETS[name].path, (command, name)


@pytest.mark.parametrize("name", dataset_names(Kind.PROBLEMS))
def test_each_problem_list_reads_as_a_workload(name: str) -> None:
    """What plan and bench read of each list: its problems, in the variant its rows say (the
    lists without a direction column are forward lists)."""
    with DATASETS[name].path.open(newline="") as handle:
        first = next(csv.DictReader(handle))
    variant = Variant.parse(first.get("direction", "forward"))
    workload = read_workload(DATASETS[name].path, variant)
    assert workload.rows == DATASETS[name].rows
    if name in LAYER_LISTS:  # a model's layers: identical blocks repeat their shapes
        assert len(workload.problems) == LAYER_LISTS[name]
    else:
        assert len(workload.problems) > 0.9 * workload.rows


LAYER_LISTS = {"torchvision-resnet50": 23, "torchvision-vgg16": 9}
"""The problem lists that are a model's convolutions row by row, with their distinct shapes."""


def test_plan_on_a_data_set_by_name() -> None:
    outcome = run_cli(
        [
            "plan",
            "--arch",
            "gfx950",
            "--variant",
            "bwd_weight",
            "--dtype",
            "bf16",
            "--problems",
            "validation-bwd-weight",
            "--budget",
            "1",
            "--time-limit",
            "1",
            "--rules-only",
        ]
    )
    assert outcome.status == 0 and len([line for line in outcome.stdout.splitlines() if line[:1] != "#"]) == 1


def test_a_file_of_the_users_wins_over_the_data_set(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    Path("miopen-forward-300").write_text("N,C,K\n")
    assert data_file("miopen-forward-300", Kind.PROBLEMS) == Path("miopen-forward-300")
    Path("dangling").symlink_to(tmp_path / "nowhere")  # a path even if broken: the reader says what is wrong
    assert data_file("dangling", Kind.PROBLEMS) == Path("dangling")
    assert argument_text(Path("miopen-forward-300")) == "miopen-forward-300"


@pytest.mark.parametrize(
    "command, option, value",
    [
        (command, option, value)
        for (command, option), kind in ARGUMENTS.items()
        for value in (
            "no-such-data",
            dataset_names(Kind.PROBLEMS if kind is Kind.MEASUREMENTS else Kind.MEASUREMENTS)[0],
        )
    ],
)
def test_anything_else_is_one_line_naming_it_and_the_data_sets(command: str, option: str, value: str) -> None:
    """A value that is no file and no data set of the argument's kind (a data set of the other
    kind says so)."""
    kind = ARGUMENTS[command, option]
    argv = [*COMMAND_LINES[command], value]
    outcome = run_cli(argv)
    assert outcome.status == 2 and not contract_breaks(argv, outcome), outcome.stderr
    assert all(needle in outcome.stderr for needle in (option, repr(value), *dataset_names(kind))), outcome.stderr
    if value in DATASETS:
        assert f"is a {DATASETS[value].kind.value} data set, not a {kind.value} one" in outcome.stderr
    with pytest.raises(InvalidInputError, match=r"neither an existing file nor|data set, not a"):
        data_file(value, kind)


@pytest.mark.slow
def test_info_lists_the_data_sets() -> None:
    info = json.loads(run_cli(["info", "--format", "json"]).stdout)["datasets"]
    assert list(info) == list(DATASETS)
    assert all(info[n]["sha256"] == d.sha256 and info[n]["kind"] == d.kind.value for n, d in DATASETS.items())
    text = run_cli(["info"]).stdout
    assert all(f"  {name}: " in text for name in DATASETS)
