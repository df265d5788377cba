"""Training that behaves: ``--threads`` bounds LightGBM and OpenMP without changing a
figure, a progress callback counts the fits, and the tie rate says where kernel order, not the
selector, made the pick.

LightGBM runs a few rounds here (``boosters.NUM_ROUNDS``): what is checked is the same for any
number of rounds, and the tests stay at seconds.
"""

from __future__ import annotations

import io
import os
from pathlib import Path

import numpy as np
import pytest
from fuzz_world import contract_breaks, run_cli

from ckspace.commands.train import MAX_THREADS, bound_openmp, fit_progress, parse_threads
from ckspace.core.errors import InvalidInputError
from ckspace.features.matrix import FEATURE_NAMES
from ckspace.training import boosters
from ckspace.training.metrics import HEADER, random_expectation, summarize
from ckspace.workloads.datasets import DATASETS

DATA = DATASETS["mi355x-forward-bf16"].path


@pytest.fixture(autouse=True)
def _few_rounds(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(boosters, "NUM_ROUNDS", 8)


@pytest.fixture(scope="module")
def real():
    """The MI355X forward bf16 measurements (231 problems x 30 kernels)."""
    from ckspace.training.dataset import load_cells

    [data] = load_cells([DATA])
    return data


# -- --threads ----------------------------------------------------------------------------------
@pytest.mark.parametrize("command", ["train", "evaluate"])
@pytest.mark.parametrize("bad", ["0", "-1", "two", "1.5", "2x", str(MAX_THREADS + 1), "99999999999999999999"])
def test_a_bad_thread_count_is_one_line_naming_it(tmp_path: Path, command: str, bad: str) -> None:
    """Checked before any file is read (the data set's name is resolved to its file, not read)."""
    argv = [
        command,
        "--data",
        "mi355x-forward-bf16",
        "--threads",
        bad,
        *(["--out", str(tmp_path / "model")] if command == "train" else []),
    ]
    outcome = run_cli(argv)
    assert outcome.status == 2 and not contract_breaks(argv, outcome), outcome.stderr
    assert f"--threads {bad!r}" in outcome.stderr and "1 or more" not in outcome.stderr
    assert not (tmp_path / "model").exists()


def test_the_default_is_the_cpus_we_may_use_at_most_four() -> None:
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    assert parse_threads(None) == boosters.default_threads() == min(4, cpus) >= 1
    assert parse_threads(" 3 ") == 3 and parse_threads("1") == 1


def test_fit_refuses_a_thread_count_lightgbm_would_read_as_every_core() -> None:
    rows = synthetic_design(problems=4, kernels=5)
    for bad in (0, -2, 1.5, True, "2"):
        with pytest.raises(InvalidInputError, match="num_threads"):
            boosters.fit(rows, "regression", num_threads=bad)


def test_openmp_gets_the_bound_unless_the_user_set_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.delenv("GOMP_SPINCOUNT", raising=False)
    bound_openmp(3)
    assert os.environ["OMP_NUM_THREADS"] == "3" and os.environ["GOMP_SPINCOUNT"] == "10000"
    monkeypatch.setenv("OMP_NUM_THREADS", "7")
    monkeypatch.setenv("GOMP_SPINCOUNT", "300000")
    bound_openmp(2)
    assert os.environ["OMP_NUM_THREADS"] == "7" and os.environ["GOMP_SPINCOUNT"] == "300000"


# -- the thread count changes the time, not the model ----------------------------------------------
def synthetic_design(problems: int = 60, kernels: int = 40, seed: int = 0) -> boosters.Design:
    """Rows enough that LightGBM splits them among threads (row-wise histograms)."""
    rng = np.random.default_rng(seed)
    n = problems * kernels
    features = rng.normal(size=(n, len(FEATURE_NAMES)))
    log_tflops = features[:, :3] @ np.array([0.5, -0.3, 0.2]) + 0.1 * rng.normal(size=n) + 3.0
    tflops = np.exp(log_tflops).reshape(problems, kernels)
    efficiency = (tflops / tflops.max(axis=1, keepdims=True)).ravel()
    return boosters.Design(
        features,
        log_tflops,
        efficiency,
        np.repeat(np.arange(problems), kernels),
        np.tile(np.arange(kernels), problems),
        np.full(problems, kernels),
    )


def trees(booster) -> str:
    """The model text without its parameter block (which records num_threads itself)."""
    text = booster.model_to_string()
    assert "[num_threads: " in text
    return text.split("\nparameters:\n")[0]


def threads_recorded(booster) -> int:
    text = booster.model_to_string()
    return int(text.split("[num_threads: ", 1)[1].split("]", 1)[0])


def _same_model_for_any_thread_count(rows: boosters.Design) -> None:
    for objective in boosters.OBJECTIVES:
        one = boosters.fit(rows, objective, seed=3, num_threads=1)
        two = boosters.fit(rows, objective, seed=3, num_threads=2)
        assert (threads_recorded(one), threads_recorded(two)) == (1, 2)  # the count reached LightGBM
        assert trees(one) == trees(two), objective
        assert np.array_equal(one.predict(rows.features, num_threads=1), two.predict(rows.features, num_threads=2))


@pytest.mark.slow
def test_one_and_two_threads_fit_the_same_model_on_synthetic_rows() -> None:
    _same_model_for_any_thread_count(synthetic_design())


@pytest.mark.slow
def test_one_and_two_threads_fit_the_same_model_on_the_real_measurements(real) -> None:
    from ckspace.training.boosters import design

    _same_model_for_any_thread_count(design(real))


@pytest.mark.slow
def test_cross_validation_figures_do_not_depend_on_the_thread_count(real) -> None:
    from ckspace.training.evaluation import cross_validate

    one, two = (cross_validate(real, 3, seed=1, num_threads=n) for n in (1, 2))
    assert one.summary() == two.summary() and one.efficiency == two.efficiency
    assert one.predicted_log_tflops == two.predicted_log_tflops


# -- progress -------------------------------------------------------------------------------------
def test_cross_validation_calls_progress_once_per_fit(real) -> None:
    from ckspace.training.evaluation import cross_validate, cross_validation_steps

    calls: list[str] = []
    cross_validate(real, 3, num_threads=1, progress=calls.append)
    assert len(calls) == cross_validation_steps(3) == 3 * len(boosters.OBJECTIVES)
    assert calls == [f"fold {f}/3 {o}" for f in (1, 2, 3) for o in boosters.OBJECTIVES]


def test_training_calls_progress_once_per_fit_and_counts_the_fits(
    real, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every fit, cross-validation's and the final ones, calls back once: spied on ``fit`` itself."""
    from ckspace.training import evaluation
    from ckspace.training import trainer as training

    fits: list[str] = []
    calls: list[str] = []

    def counted(rows, objective, *args, **kwargs):
        fits.append(objective)
        assert kwargs.get("num_threads") == 1  # the thread count is threaded through to every fit
        return boosters.fit(rows, objective, *args, **kwargs)

    monkeypatch.setattr(evaluation, "fit", counted)
    monkeypatch.setattr(training, "fit", counted)
    card, cv = training.train_model(
        real, tmp_path / "model", folds=2, num_threads=1, progress=lambda step: calls.append(step) or None
    )
    assert len(calls) == len(fits) == 2 * len(boosters.OBJECTIVES) + len({"regression", cv.objective})
    assert len(calls) <= training.training_steps(2)
    assert calls[-1] == f"final {cv.objective}" and "final regression" in calls
    assert "ties" in card.cross_validation["model"]


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_no_bar_and_no_callback_off_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("sys.stderr", io.StringIO())
    with fit_progress("cell", 4) as progress:
        assert progress is None


def test_on_a_terminal_the_bar_counts_each_step(monkeypatch: pytest.MonkeyPatch) -> None:
    terminal = _Terminal()
    monkeypatch.setattr("sys.stderr", terminal)
    with fit_progress("gfx950 forward bf16", 3) as progress:
        assert progress is not None
        for step in ("fold 1/1 regression", "fold 1/1 lambdarank", "final regression"):
            progress(step)
    assert "gfx950 forward bf16" in terminal.getvalue()


@pytest.mark.slow
def test_evaluate_prints_the_same_off_a_terminal_and_only_a_line_per_fold_on_stderr(real) -> None:
    argv = ["evaluate", "--data", str(DATA), "--folds", "2", "--threads", "1"]
    outcome = run_cli(argv)
    folds = outcome.stderr.splitlines()  # no bar off a terminal: a line per fold
    assert outcome.status == 0 and [line.split(": ")[4].split()[0] for line in folds] == ["1/2", "2/2"], folds
    lines = outcome.stdout.splitlines()
    start = lines.index(HEADER) + 1
    table = lines[start : next(i for i in range(start, len(lines)) if lines[i].startswith("model = "))]
    # the trained model (named by its objective, which has no row of its own), the other objective,
    # the single best kernel and the analytical model side by side, ties last
    rows = {line.split()[0]: line.split() for line in table}
    winner = next(iter(rows)).removeprefix("model=")
    assert list(rows) == [
        f"model={winner}",
        *(o for o in boosters.OBJECTIVES if o != winner),
        "single_best_kernel",
        "random",
        "analytical",
    ]
    assert all(len(row) == len(HEADER.split()) for row in rows.values())
    assert rows["random"][-1] == "0.0"


# -- tie rate -------------------------------------------------------------------------------------
NAN = np.nan


def test_tie_rate_counts_only_a_best_score_shared_among_measured_kernels() -> None:
    tflops = np.array(
        [
            [10.0, 20.0, 30.0, 40.0],
            [10.0, 20.0, NAN, 40.0],
            [10.0, 20.0, 30.0, 40.0],
            [10.0, 20.0, 30.0, NAN],
            [10.0, NAN, 30.0, 40.0],
        ]
    )
    scores = np.array(
        [
            [1.0, 5.0, 5.0, 2.0],  # best shared by two measured kernels: a tie
            [1.0, 4.0, 9.0, 3.0],  # the 9 is unmeasured; the measured best (4) is alone: none
            [7.0, 7.0, 1.0, 8.0],  # a shared score below the best: none
            [6.0, 6.0, 6.0, 6.0],  # three measured kernels share it, the fourth is unmeasured: a tie
            [2.0, 9.0, 1.0, 2.0],
        ]
    )  # 9 unmeasured, the measured best 2 held by kernels 0 and 3: a tie
    assert summarize(scores, tflops).ties == pytest.approx(100.0 * 3 / 5)
    assert summarize(scores + np.arange(4) * 1e-9, tflops).ties == 0.0  # equal means exactly equal
    assert summarize(np.zeros_like(tflops), tflops).ties == 100.0


def test_a_random_pick_has_no_ties_and_the_table_has_a_ties_column() -> None:
    tflops = np.array([[1.0, 2.0, NAN], [3.0, 3.0, 3.0]])
    scores, _ = random_expectation(tflops)
    assert scores.ties == 0.0 and "ties" in scores.model_dump()
    row = summarize(np.array([[1.0, 1.0, 0.0], [0.0, 1.0, 2.0]]), tflops).row("x")
    assert HEADER.split()[-1] == "ties" and len(row) == len(HEADER) and row.split()[-1] == "50.0"


def test_a_card_written_before_the_tie_rate_still_loads() -> None:
    """Model cards keep their figures as plain dicts; one without ``ties`` reads back as written."""
    import json

    from ckspace.select.store import ModelCard, shipped_model_dir

    card = json.loads((shipped_model_dir("gfx950", "forward", "bf16") / "card.json").read_text())
    for figures in card["cross_validation"].values():
        if isinstance(figures, dict):
            figures.pop("ties", None)
    loaded = ModelCard.model_validate(card)
    assert "ties" not in loaded.cross_validation["model"] and loaded.cross_validation["model"]["mean"] > 0
