"""Fitting the analytical model's constants to a GPU (ckspace/training/calibration.py) and carrying
them with a model: a GPU whose truth is a grid point is recovered exactly from the design's pairs;
the design depends only on the answers (a rerun over recorded answers asks the same pairs), stays
within its kernel budget and never asks a pair that cannot run; a table priced with one GPU's
constants is never scored with another's; a model card's constants price the selector's features,
and a card with a bad one is refused in one line naming the model."""

from __future__ import annotations

import json
import shutil
from functools import cache
from pathlib import Path

import numpy as np
import pytest

from ckspace.core.errors import CkspaceError
from ckspace.features import performance
from ckspace.features.hardware import hardware_facts
from ckspace.features.matrix import ConfigTable, feature_matrix
from ckspace.select.selector import Selector
from ckspace.select.store import shipped_model_dir
from ckspace.training.calibration import DESIGN_PAIRS, FITTED, PlausibleGrid, fit_constants, grid_size, sequential_pairs
from ckspace.training.dataset import load_cells
from ckspace.workloads.datasets import DATASETS


@cache
def cell():
    """40 problems of the MI355X recording (every third), all 30 kernels."""
    (data,) = load_cells([DATASETS["mi355x-forward-bf16"].path])
    return data.subset(np.arange(0, 120, 3))


def shipped() -> dict[str, float]:
    return {name: performance.constant(name) for name in FITTED}


@cache
def grid() -> PlausibleGrid:
    return PlausibleGrid(cell(), shipped(), per_octave=1)  # 5^3 points: factors 1/4 .. 4


class Answers:
    """A GPU whose every pair runs at the model's TFLOPS under the grid point ``truth``; it notes what
    it was asked, so that a test can see each call and replay the answers."""

    def __init__(self, truth: int, rows: np.ndarray) -> None:
        self.tflops = np.exp2(grid().scores[truth][rows])
        self.calls: list[list[tuple[int, int]]] = []

    def __call__(self, pairs: list[tuple[int, int]]) -> np.ndarray:
        self.calls.append(list(pairs))
        measured = np.unique([p for p, _ in pairs])
        out = np.full((len(measured), self.tflops.shape[1]), np.nan)
        where = {p: i for i, p in enumerate(measured)}
        for p, k in pairs:
            out[where[p], k] = self.tflops[p, k]
        return out


def flops(rows: np.ndarray) -> list[float]:
    return [cell().problems[r].flops for r in rows]


@pytest.mark.parametrize("truth", [0, 31, 93, 124])
def test_a_gpu_whose_truth_is_a_grid_point_is_recovered_from_the_designs_pairs(truth: int) -> None:
    rows = np.arange(len(cell().problems))
    answers = Answers(truth, rows)
    pairs = sequential_pairs(grid(), rows, flops(rows), answers)
    assert len(pairs) == len(set(pairs)) <= DESIGN_PAIRS
    assert fit_constants(grid(), rows, pairs, answers(pairs)) == grid().points[truth]
    assert grid().points[truth] != shipped()  # none of these is the start


def test_a_grid_is_every_combination_of_its_steps_around_the_start() -> None:
    """5 steps a constant at 1 per octave (1/4, 1/2, 1, 2, 4 of the start), 9 at 2, 17 at 4; the
    centre point is the start; the size is known before the grid is built."""
    assert (grid_size(1), grid_size(2), grid_size(4)) == (125, 729, 4913) == (5**3, 9**3, 17**3)
    points = grid().points
    assert len(points) == grid_size(1) and points[grid().centre] == shipped()
    factors = {round(p[name] / shipped()[name], 9) for p in points for name in FITTED}
    assert factors == {0.25, 0.5, 1.0, 2.0, 4.0}


def test_a_grid_runs_from_every_constant_at_a_quarter_to_every_constant_at_four_times() -> None:
    """The points in order (the first wins a tie): the last constant's steps innermost."""
    points = grid().points
    assert points[0] == {name: value / 4 for name, value in shipped().items()}
    assert points[-1] == {name: value * 4 for name, value in shipped().items()}
    last = FITTED[-1]
    assert points[1] == {**points[0], last: shipped()[last] / 2}


def test_the_design_measures_next_the_problems_the_plausible_constants_split_most() -> None:
    """Stated apart: the points whose mixed objective on the first round's answers is within SLACK of
    the best; for every problem not measured, the entropy of those points' picks (Counter); the
    second round adds the two problems of most entropy (each with its most-voted kernels)."""
    from collections import Counter

    from ckspace.training.calibration import SLACK, objective_of

    rows = np.arange(len(cell().problems))
    answers = Answers(52, rows)
    sequential_pairs(grid(), rows, flops(rows), answers)
    first, second = answers.calls[0], answers.calls[1]
    measured = sorted({p for p, _ in first})
    values = answers(first)
    fits = np.array([objective_of(scores[measured], values, "mixed") for scores in grid().scores])
    space = [g for g in range(len(grid().points)) if fits[g] >= fits.max() - SLACK]

    def entropy(p: int) -> float:
        counts = np.array(list(Counter(int(np.argmax(grid().scores[g][p])) for g in space).values()))
        shares = counts / counts.sum()
        return float(-(shares * np.log(shares)).sum())

    split = sorted((p for p in rows if p not in measured and entropy(p) > 0), key=lambda p: -entropy(p))
    added = list(dict.fromkeys(p for p, _ in second[len(first) :]))
    assert len(added) == 2 and entropy(added[0]) >= entropy(added[1]) > 0
    assert {round(entropy(p), 12) for p in added} <= {round(entropy(p), 12) for p in split[:2]}
    picked = [len({int(np.argmax(grid().scores[g][p])) for g in space}) for p in added]
    assert len(second) - len(first) == sum(min(3, n) for n in picked) > 4  # up to three kernels each


def test_a_large_workload_designs_on_problems_spread_over_its_flops(monkeypatch) -> None:
    """Beyond GRID_SCORES: as many problems as fit (scores / (points x kernels), never fewer than the
    design's 60 pairs), at evenly spaced FLOP ranks from the smallest to the largest; at most, all."""
    from ckspace.training import calibration

    (data,) = load_cells([DATASETS["mi355x-forward-bf16"].path])
    problems = data.problems  # 231
    monkeypatch.setattr(calibration, "GRID_SCORES", 729 * 30 * 80)
    chosen = calibration.design_problems(problems, 30, 729)
    order = np.argsort([p.flops for p in problems], kind="stable")
    assert chosen.tolist() == sorted(int(order[round(i * (len(problems) - 1) / 79)]) for i in range(80))
    assert calibration.design_problems(problems, 1, 729 * 30).tolist() == chosen.tolist()
    assert calibration.design_problems(problems, 0, 729 * 30).tolist() == chosen.tolist()
    monkeypatch.setattr(calibration, "GRID_SCORES", 729 * 30)
    assert len(calibration.design_problems(problems, 30, 729)) == DESIGN_PAIRS
    monkeypatch.setattr(calibration, "GRID_SCORES", 729 * 30 * 300)
    assert calibration.design_problems(problems, 30, 729).tolist() == list(range(231))


def test_the_calibrations_bounds_are_the_stated_ones() -> None:
    """60 pairs: the budget the issue states calibration for (and the bench's study measures); a grid
    of at most 2^26 scores, 512 MB of float64."""
    from ckspace.training import calibration

    assert DESIGN_PAIRS == 60 and calibration.GRID_SCORES * 8 == 512 * 2**20


def test_a_grid_of_fewer_problems_than_kernels_designs_within_its_kernels() -> None:
    """The votes count kernels, not problems: 12 problems of 30 kernels, at most 5 kernels taken."""
    few = PlausibleGrid(cell().subset(np.arange(0, 36, 3)), shipped(), per_octave=1)
    rows = np.arange(12)
    answers = Answers.__new__(Answers)
    answers.tflops, answers.calls = np.exp2(few.scores[31]), []
    pairs = sequential_pairs(few, rows, [cell().problems[p].flops for p in range(0, 36, 3)], answers, max_kernels=5)
    assert len({k for _, k in pairs}) <= 5 and len(pairs) == len(set(pairs)) > 10


def test_a_grid_at_two_steps_an_octave_takes_each_half_octave() -> None:
    tiny = cell().subset(np.arange(2))
    points = PlausibleGrid(tiny, shipped(), per_octave=2).points
    factors = sorted({round(p["l2_reuse"] / shipped()["l2_reuse"], 9) for p in points})
    assert factors == [round(2.0 ** (i / 2), 9) for i in range(-4, 5)]


def test_the_first_round_is_the_start_models_top_three_of_ten_problems_spread_over_the_flops() -> None:
    """Stated independently: the problems at ranks round(i x (n - 1) / 9) of the FLOP order, i = 0..9,
    each with the start's three best-scored kernels."""
    rows = np.arange(len(cell().problems))
    answers = Answers(93, rows)
    sequential_pairs(grid(), rows, flops(rows), answers)
    order = np.argsort(flops(rows), kind="stable")
    problems = [int(order[round(i * (len(rows) - 1) / 9)]) for i in range(10)]
    start = grid().scores[grid().centre]
    expected = [(p, int(k)) for p in problems for k in np.argsort(-start[p], kind="stable")[:3]]
    assert answers.calls[0] == expected


def test_the_design_stops_where_the_plausible_constants_agree_and_at_its_limit(monkeypatch) -> None:
    """A problem every point picks alike tells nothing: with one kernel that runs per problem, the
    first round's 10 pairs are all. With two kernels that run on the first round's first problem
    (29 pairs in the first round), a limit of 31 cuts the next round's three pairs to two."""
    from ckspace.training import calibration

    rows = np.arange(len(cell().problems))
    single = np.zeros((len(rows), len(cell().configs)), dtype=bool)
    single[rows, rows % len(cell().configs)] = True
    lone = PlausibleGrid(cell(), shipped(), per_octave=1, runs=single)
    assert len(sequential_pairs(lone, rows, flops(rows), Answers(93, rows))) == 10
    runs = np.ones_like(single)
    first = int(np.argsort(flops(rows), kind="stable")[0])
    runs[first, np.argsort(-grid().scores[grid().centre][first], kind="stable")[2:]] = False
    cut = PlausibleGrid(cell(), shipped(), per_octave=1, runs=runs)
    monkeypatch.setattr(calibration, "DESIGN_PAIRS", 31)
    answers = Answers(0, rows)
    pairs = sequential_pairs(cut, rows, flops(rows), answers)
    assert sum(p == first for p, _ in pairs) == 2 and len(answers.calls[0]) == 29 and len(pairs) == 31


def test_a_design_whose_pairs_all_fail_stops_after_its_first_round() -> None:
    """Every answer missing (a GPU that runs none of them): nothing tells the constants apart, so
    the design asks the first round and no more, and the fit stays at the start."""
    rows = np.arange(len(cell().problems))
    calls = []

    def failing(pairs: list[tuple[int, int]]) -> np.ndarray:
        calls.append(list(pairs))
        return np.full((len({p for p, _ in pairs}), len(cell().configs)), np.nan)

    pairs = sequential_pairs(grid(), rows, flops(rows), failing)
    assert len(calls) == 1 and pairs == calls[0] and len(pairs) == 30
    assert fit_constants(grid(), rows, pairs, failing(pairs)) == shipped()


def test_pairs_that_tell_nothing_leave_the_constants_at_the_start() -> None:
    """No answer at all (every pair failed), or one answer per problem (no order to fit): the start,
    not the first point of the grid; one problem's two answers move it."""
    rows = np.arange(len(cell().problems))
    answers = Answers(0, rows)
    pairs = sequential_pairs(grid(), rows, flops(rows), answers)
    nothing = np.full(answers(pairs).shape, np.nan)
    assert fit_constants(grid(), rows, pairs, nothing) == shipped() == fit_constants(grid(), rows, [], nothing[:0])
    lone = [pairs[0], pairs[3], pairs[6]]  # the first three problems' best kernel each
    assert len({p for p, _ in lone}) == 3
    assert fit_constants(grid(), rows, lone, answers(lone)) == shipped()
    assert fit_constants(grid(), rows, pairs[:3], answers(pairs[:3])) != shipped()


def test_the_design_asks_a_growing_list_and_replays_the_same_pairs() -> None:
    """Each call asks the pairs so far (the last call's, then more); a rerun whose answers come
    from a record of the first run's chooses the same pairs, in the same order."""
    rows = np.arange(5, len(cell().problems))
    answers = Answers(40, rows)
    pairs = sequential_pairs(grid(), rows, flops(rows), answers)
    for before, after in zip(answers.calls, answers.calls[1:], strict=False):
        assert after[: len(before)] == before and len(after) > len(before)
    recorded = Answers(40, rows)
    assert sequential_pairs(grid(), rows, flops(rows), recorded) == pairs
    assert recorded.calls == answers.calls


def test_the_design_keeps_to_its_kernels_and_to_the_pairs_that_run() -> None:
    rows = np.arange(len(cell().problems))
    runs = np.random.default_rng(1).random((len(rows), len(cell().configs))) > 0.4
    masked = PlausibleGrid(cell(), shipped(), per_octave=1, runs=runs)
    for limit in (3, 7):
        pairs = sequential_pairs(masked, rows, flops(rows), Answers(62, rows), max_kernels=limit)
        assert len({k for _, k in pairs}) <= limit
        assert all(runs[p, k] for p, k in pairs)
        assert len(pairs) > 2 * limit  # problems go on being measured on the kernels taken


def test_a_table_priced_with_one_gpus_constants_is_not_scored_with_anothers() -> None:
    data = cell()
    measured = performance.calibrated_facts(hardware_facts("gfx950"), {"l2_reuse": 2.0})
    plain = ConfigTable.build(data.configs)
    priced = ConfigTable.build(data.configs, measured)
    problem = data.problems[0]
    with pytest.raises(ValueError, match="build the table with the facts it is scored with"):
        feature_matrix(problem, data.variant, data.dtype, plain, measured)
    with pytest.raises(ValueError, match="stacking tables priced with constants"):
        plain.stack(priced)
    assert priced.take(np.arange(3)).constants == (("l2_reuse", 2.0),)
    ours = feature_matrix(problem, data.variant, data.dtype, priced, measured)
    theirs = feature_matrix(problem, data.variant, data.dtype, plain, hardware_facts("gfx950"))
    assert not np.array_equal(ours, theirs)  # the constant moves the analytical feature


def _model_with(tmp_path: Path, constants: dict) -> Path:
    model = tmp_path / "model"
    shutil.copytree(shipped_model_dir("gfx950", "forward", "bf16"), model)
    card = json.loads((model / "card.json").read_text())
    card["calibrated"] = constants
    (model / "card.json").write_text(json.dumps(card))
    return model


def test_a_models_measured_constants_price_the_selectors_features(tmp_path: Path) -> None:
    constants = {"memory_latency_cycles": 1500.0, "l2_reuse": 1.5}
    model = _model_with(tmp_path, constants)
    ours = Selector.load("gfx950", "forward", "bf16", model_dir=model, engine="lightgbm", ck=None)
    theirs = Selector.load("gfx950", "forward", "bf16", engine="lightgbm", ck=None)
    assert ours.hw.calibrated == constants and theirs.hw.calibrated == {}
    data = cell()
    prepared = ours.prepare(data.configs)
    assert prepared.table.constants == tuple(sorted(constants.items()))
    problem = data.problems[7]
    expected = feature_matrix(problem, data.variant, data.dtype, prepared.table, ours.hw)
    np.testing.assert_array_equal(ours.feature_matrix(problem, prepared.table), expected)
    with pytest.raises(ValueError):
        theirs.feature_matrix(problem, prepared.table)


@pytest.mark.slow
def test_the_compiled_selector_prices_a_calibrated_model_as_lightgbm_does(tmp_path: Path) -> None:
    """The trees compiled to C with the formulas priced by the card's constants (their cache keyed by
    the sources, so the shipped model's compiled selector is not reused): the same scores, features
    and picks as LightGBM's engine on numpy features, and not those of the shipped constants."""
    model = _model_with(tmp_path, {"memory_latency_cycles": 300.0, "epilogue_cycles_per_byte": 30.0})
    compiled = Selector.load("gfx950", "forward", "bf16", model_dir=model, engine="compiled", ck=None)
    lightgbm = Selector.load("gfx950", "forward", "bf16", model_dir=model, engine="lightgbm", ck=None)
    shipped_compiled = Selector.load("gfx950", "forward", "bf16", engine="compiled", ck=None)
    data = cell()
    differs = 0
    for problem in data.problems[::4]:
        ours = compiled.score_table(problem, compiled.prepare(data.configs).table)
        theirs = lightgbm.score_table(problem, lightgbm.prepare(data.configs).table)
        np.testing.assert_allclose(ours.matrix, theirs.matrix, rtol=1e-12)
        np.testing.assert_allclose(ours.scores, theirs.scores, rtol=1e-9, atol=1e-12)
        plain = shipped_compiled.score_table(problem, shipped_compiled.prepare(data.configs).table)
        differs += not np.allclose(plain.matrix, ours.matrix)
    assert differs == len(data.problems[::4])


@pytest.mark.slow
def test_select_says_its_model_was_calibrated(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A calibrated model's selection says so, with the constants, in text and in JSON; the shipped
    model's says nothing of it."""
    from ckspace.cli import main

    model = _model_with(tmp_path, {"l2_reuse": 1.5})
    command = ["select", "--arch", "gfx950", "--variant", "forward", "--dtype", "bf16", "--rules-only"]
    command += ["--problem", "N=1,C=64,K=128,Hi=56,Wi=56,Y=3,X=3,pad=1", "--top", "1"]
    assert main([*command, "--model", str(model)]) == 0
    assert "the model's analytical constants were measured on its GPU: l2_reuse 1.5\n" in capsys.readouterr().out
    assert main([*command, "--model", str(model), "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["calibrated"] == {"l2_reuse": 1.5}
    assert main(command) == 0
    assert "measured on its GPU" not in capsys.readouterr().out


@pytest.mark.parametrize(
    ("constants", "said"), [({"l2_reuse": -1.0}, "l2_reuse must be positive"), ({"l2_reus": 2.0}, "l2_reus")]
)
def test_a_card_with_a_bad_constant_is_refused_naming_the_model(tmp_path: Path, constants: dict, said: str) -> None:
    model = _model_with(tmp_path, constants)
    with pytest.raises(CkspaceError, match=said) as caught:
        Selector.load("gfx950", "forward", "bf16", model_dir=model, engine="lightgbm", ck=None)
    assert str(model) in str(caught.value) and "\n" not in str(caught.value)
