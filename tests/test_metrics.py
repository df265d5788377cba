"""Selection quality (ckspace/training/metrics.py) and the centred log error, against statements
written problem by problem here.

``per_problem_efficiency`` and ``centred_log_error`` take a stack of selectors (one per constant
value of a grid) as well as one; each is held to its per-problem statement, on measurements with
unmeasured pairs and with tied scores (the first tied kernel is the pick, as ``np.argmax`` and
``select`` take it)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from reference_picks import picks_by_hand

from ckspace.training.calibration import centred_log_error
from ckspace.training.metrics import (
    HEADER,
    LEGEND,
    per_problem_efficiency,
    random_expectation,
    summarize,
    table,
    tflops_error,
)


def _efficiency_by_hand(scores: np.ndarray, tflops: np.ndarray) -> list[float]:
    best = [max(t for t in row if not math.isnan(t)) for row in tflops]
    return [tflops[p, k] / best[p] for p, k in enumerate(picks_by_hand(scores, tflops))]


def _centred_by_hand(log2_tflops: np.ndarray, tflops: np.ndarray) -> float:
    squares = []
    for p in range(len(tflops)):
        residuals = [
            math.log(tflops[p, k]) - math.log(2.0) * log2_tflops[p, k]
            for k in range(tflops.shape[1])
            if not math.isnan(tflops[p, k])
        ]
        if len(residuals) >= 2:
            centre = sum(residuals) / len(residuals)
            squares += [(r - centre) ** 2 for r in residuals]
    return sum(squares) / len(squares) if squares else 0.0


def _measurements(seed: int, models: int, problems: int, kernels: int):
    """Scores rounded to halves (ties are common) and TFLOPS with about a third unmeasured; every
    problem keeps at least one measured pair."""
    rng = np.random.default_rng(seed)
    scores = np.round(rng.normal(size=(models, problems, kernels)) * 2.0) / 2.0
    tflops = rng.uniform(1.0, 100.0, size=(problems, kernels))
    tflops[rng.random((problems, kernels)) < 0.35] = np.nan
    tflops[np.arange(problems), rng.integers(0, kernels, problems)] = rng.uniform(1.0, 100.0, problems)
    return scores, tflops


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(1, 5), st.integers(1, 12), st.integers(1, 8))
def test_many_selectors_at_once_are_each_selector_alone(seed: int, models: int, problems: int, kernels: int) -> None:
    scores, tflops = _measurements(seed, models, problems, kernels)
    stacked = per_problem_efficiency(scores, tflops)
    errors = centred_log_error(scores, tflops)
    assert stacked.shape == (models, problems) and np.shape(errors) == (models,)
    for m in range(models):
        alone = per_problem_efficiency(scores[m], tflops)
        assert alone.tolist() == pytest.approx(_efficiency_by_hand(scores[m], tflops))
        assert stacked[m].tolist() == alone.tolist()
        assert isinstance(centred_log_error(scores[m], tflops), float)
        assert centred_log_error(scores[m], tflops) == pytest.approx(_centred_by_hand(scores[m], tflops), abs=1e-12)
        assert errors[m] == pytest.approx(_centred_by_hand(scores[m], tflops), abs=1e-12)


def test_the_first_of_tied_scores_is_the_pick_and_an_unmeasured_kernel_never_is() -> None:
    scores = np.array([[[3.0, 3.0, 1.0], [9.0, 2.0, 2.0]], [[1.0, 3.0, 3.0], [0.0, 0.0, 0.0]]])
    tflops = np.array([[10.0, 20.0, 40.0], [np.nan, 5.0, 10.0]])
    assert per_problem_efficiency(scores, tflops).tolist() == [[0.25, 0.5], [0.5, 0.5]]


def test_no_problem_with_two_measured_pairs_has_no_centred_error() -> None:
    tflops = np.array([[10.0, np.nan], [np.nan, 3.0]])
    assert centred_log_error(np.zeros((2, 2)), tflops) == 0.0
    assert centred_log_error(np.zeros((4, 2, 2)), tflops).tolist() == [0.0] * 4


def _summary_by_hand(scores: np.ndarray, tflops: np.ndarray) -> dict[str, float]:
    """summarize's figures stated problem by problem: top-1, the two top-5s and ties in percent."""
    top1 = top5 = top5b = ties = 0
    for p in range(len(tflops)):
        measured = [k for k in range(tflops.shape[1]) if not math.isnan(tflops[p, k])]
        by_score = sorted(measured, key=lambda k: -scores[p, k])  # stable: the first of tied scores first
        by_tflops = sorted(measured, key=lambda k: -tflops[p, k])
        pick, oracle = by_score[0], by_tflops[0]
        top1 += pick == oracle
        top5 += oracle in by_score[:5]
        top5b += pick in by_tflops[:5]
        ties += sum(scores[p, k] == scores[p, pick] for k in measured) >= 2
    n = len(tflops)
    return {"top1": 100 * top1 / n, "top5": 100 * top5 / n, "top5b": 100 * top5b / n, "ties": 100 * ties / n}


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(1, 12), st.integers(1, 9))
def test_the_summary_is_the_efficiencies_percentiles_and_the_top_rates(seed: int, problems: int, kernels: int) -> None:
    scores, tflops = _measurements(seed, 1, problems, kernels)
    s = summarize(scores[0], tflops)
    pct = 100.0 * np.array(_efficiency_by_hand(scores[0], tflops))
    hand = _summary_by_hand(scores[0], tflops)
    assert s.problems == problems
    assert (s.mean, s.median, s.min) == pytest.approx((pct.mean(), np.median(pct), pct.min()))
    assert s.p10 == pytest.approx(np.percentile(pct, 10))
    assert (s.top1, s.top5, s.top5_pick_in_oracle_top5, s.ties) == pytest.approx(
        (hand["top1"], hand["top5"], hand["top5b"], hand["ties"])
    )


def test_top_five_reaches_past_the_fifth_kernel_only_when_it_should() -> None:
    """Six measured kernels: the oracle sixth by score is outside the top 5, fifth inside; the pick
    fifth or sixth by TFLOPS likewise; an unmeasured kernel takes no rank."""
    tflops = np.array([[1.0, 2.0, 3.0, 4.0, 5.0, 60.0], [60.0, 1.0, np.nan, 2.0, 3.0, 4.0]])
    scores = np.array([[6.0, 5.0, 4.0, 3.0, 2.0, 1.0], [2.0, 7.0, 9.0, 6.0, 5.0, 4.0]])
    s = summarize(scores, tflops)
    # problem 0: pick kernel 0 (sixth by TFLOPS), oracle kernel 5 (sixth by score)
    # problem 1: pick kernel 1 (fifth by TFLOPS), oracle kernel 0 (fifth by score, kernel 2 unmeasured)
    assert (s.top1, s.top5, s.top5_pick_in_oracle_top5, s.ties) == (0.0, 50.0, 50.0, 0.0)


def test_a_random_pick_is_expected_at_the_mean_efficiency_and_one_in_the_measured_count() -> None:
    tflops = np.array([[10.0, 20.0, np.nan, 40.0], [5.0, 5.0, 5.0, 5.0], [1.0, 2.0, 3.0, 4.0]])
    scores, eff = random_expectation(np.hstack([tflops, np.full((3, 3), 8.0)]))
    # problem 0: 3 measured (10, 20, 40, 8, 8, 8) -> 6; problem 1: 7 measured; problem 2: 7
    expected = [
        np.mean([10, 20, 40, 8, 8, 8]) / 40,
        np.mean([5, 5, 5, 5, 8, 8, 8]) / 8,
        np.mean([1, 2, 3, 4, 8, 8, 8]) / 8,
    ]
    assert eff.tolist() == pytest.approx(expected)
    assert scores.mean == pytest.approx(100 * np.mean(expected))
    assert scores.top1 == pytest.approx(100 * np.mean([1 / 6, 1 / 7, 1 / 7]))
    assert scores.top5 == scores.top5_pick_in_oracle_top5 == pytest.approx(100 * np.mean([5 / 6, 5 / 7, 5 / 7]))
    assert scores.ties == 0.0


def test_the_tflops_error_is_the_median_absolute_relative_error() -> None:
    predicted = np.log(np.array([11.0, 8.0, 30.0, 100.0]))
    measured = np.log(np.array([10.0, 10.0, 20.0, 100.0]))
    # relative errors 0.1, -0.2, 0.5, 0: absolute 0.1, 0.2, 0.5, 0 -> median 0.15
    assert tflops_error(predicted, measured) == pytest.approx(15.0)


def test_the_table_labels_the_winning_objective_as_the_model_and_drops_its_own_row() -> None:
    tflops = np.array([[10.0, 20.0], [30.0, 15.0]])
    good, bad = (
        summarize(np.array([[0.0, 1.0], [1.0, 0.0]]), tflops),
        summarize(np.array([[1.0, 0.0], [0.0, 1.0]]), tflops),
    )
    text = table({"model": good, "lambdarank": good, "regression": bad}, "lambdarank")
    lines = text.splitlines()
    assert lines[0] == LEGEND and lines[1] == HEADER and len(lines) == 4
    assert lines[2].split()[:2] == ["model=lambdarank", "100.00"]
    assert lines[3].split()[:2] == ["regression", "50.00"]
    assert text.endswith("\n")
