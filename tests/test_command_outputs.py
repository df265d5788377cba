"""What plan, train and the CSVs print: every CSV spells booleans 0/1 and reads back, ``plan`` warns
once of a cell without a model, ``train`` prints a legend and each selector once."""

from __future__ import annotations

from pathlib import Path


def test_every_csv_spells_booleans_0_1_and_reads_back(capsys) -> None:
    """enumerate's CSV and bench's results (config_cells) spell a config alike, and the
    measurement reader reads enumerate's rows back to the kernels they name."""
    import csv
    import io

    from ckspace.cli import main
    from ckspace.workloads.measurement import CONFIG_COLUMNS, config_cells, config_from_row

    assert (
        main(
            [
                "enumerate",
                "--arch",
                "gfx950",
                "--variant",
                "forward",
                "bwd_weight",
                "--ndim",
                "2",
                "--dtype",
                "bf16",
                "--rule-set",
                "tiny",
                "--rules-only",
                "--list",
                "--format",
                "csv",
            ]
        )
        == 0
    )
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    gemm = [row for row in rows if row["kind"] == "gemm"]
    assert gemm and not any(value in ("True", "False") for row in rows for value in row.values())
    for row in gemm:
        config = config_from_row(row)
        assert config.name == row["name"] and {k: row[k] for k in CONFIG_COLUMNS} == config_cells(config)
    assert {row["two_stage"] for row in gemm} == {"0", "1"}


def test_plan_warns_once_of_a_cell_without_a_model(tmp_path: Path, capsys) -> None:
    from ckspace.cli import main

    problems = tmp_path / "problems.csv"
    problems.write_text("N,C,K,G,Hi,Wi,Y,X,stride_h,stride_w,pad_h,pad_w\n4,128,128,1,28,28,3,3,1,1,1,1\n")
    assert (
        main(
            [
                "plan",
                "--arch",
                "gfx942",
                "--variant",
                "forward",
                "--dtype",
                "bf16",
                "--rule-set",
                "default",
                "--budget",
                "1",
                "--problems",
                str(problems),
                "--time-limit",
                "2",
            ]
        )
        == 0
    )
    assert capsys.readouterr().err.count("no model for gfx942 forward bf16") == 1


def test_train_prints_a_legend_and_each_selector_once(tmp_path: Path, capsys, monkeypatch) -> None:
    from ckspace.cli import main
    from ckspace.training import plot
    from ckspace.training.metrics import HEADER, LEGEND
    from ckspace.workloads.datasets import DATASETS

    data = tmp_path / "small.csv"
    data.write_text("".join(DATASETS["mi355x-forward-bf16"].path.read_text().splitlines(keepends=True)[:400]))
    assert (
        main(
            [
                "train",
                "--data",
                str(data),
                "--arch",
                "gfx950",
                "--folds",
                "2",
                "--threads",
                "1",
                "--out",
                str(tmp_path / "model"),
            ]
        )
        == 0
    )
    lines = capsys.readouterr().out.splitlines()
    assert lines[lines.index(HEADER) - 1] == LEGEND
    rows = [line.split()[0] for line in lines[lines.index(HEADER) + 1 : -1]]
    winner = rows[0].removeprefix("model=")
    assert rows == [
        f"model={winner}",
        *({"lambdarank", "regression"} - {winner}),
        "single_best_kernel",
        "random",
        "analytical",
    ]
    figures = {}
    monkeypatch.setattr(plot, "_save", lambda fig, plt, path, option: figures.setdefault(option, fig))
    assert (
        main(
            [
                "evaluate",
                "--data",
                str(data),
                "--arch",
                "gfx950",
                "--folds",
                "2",
                "--threads",
                "1",
                "--plan-budgets",
                "2,4",
                "--plan-plot",
                str(tmp_path / "plans.png"),
            ]
        )
        == 0
    )
    axis = figures["--plan-plot"].axes[0]
    sets, styles = [a for a in axis.get_children() if type(a).__name__ == "Legend"]
    assert [t.get_text() for t in sets.get_texts()] == [
        "plan (predicted)",
        "hindsight (measured)",
        "most frequent winners",
        "random",
    ]
    solid, dashed = styles.legend_handles
    assert (solid.get_linestyle(), solid.get_marker()) != (dashed.get_linestyle(), dashed.get_marker())
    assert [t.get_text()[:3] for t in styles.get_texts()] == ["(a)", "(b)"]
