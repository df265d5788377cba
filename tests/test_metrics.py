"""The pick's efficiency and the centred log error, judged one selector at a time and many at once.

``per_problem_efficiency`` and ``centred_log_error`` take a stack of selectors (one per constant
value of a grid) as well as one; each is checked here against a statement written problem by
problem, on measurements with unmeasured pairs and with tied scores (the first tied kernel is the
pick, as ``np.argmax`` and ``select`` take it)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ckspace.training.calibration import centred_log_error
from ckspace.training.metrics import per_problem_efficiency


def _efficiency_by_hand(scores: np.ndarray, tflops: np.ndarray) -> list[float]:
    out = []
    for p in range(len(tflops)):
        best, best_score = None, -math.inf
        for k in range(tflops.shape[1]):
            if not math.isnan(tflops[p, k]) and scores[p, k] > best_score:
                best, best_score = k, scores[p, k]
        out.append(tflops[p, best] / max(t for t in tflops[p] if not math.isnan(t)))
    return out


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
