"""The learning loop's parts on small inputs made by hand, for the fast tier (the loop itself, which
runs them on a recording, is tests/test_learning.py's and slow): how acquisition moves estimates,
reads a spread and values pairs (:mod:`ckspace.training.acquisition`), and how many corrections the
anchored model takes (:mod:`ckspace.training.anchored`)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ckspace.training import anchored
from ckspace.training.acquisition import SIGMA_FLOOR, centred_sigma, lookahead, shifted

NAN = math.nan


def test_measured_pairs_keep_their_measurement_and_move_their_problems_others() -> None:
    mu = np.log(np.array([[10.0, 20.0, 40.0], [10.0, 20.0, 40.0], [5.0, 5.0, 5.0]]))
    values = np.array([[20.0, NAN, 80.0], [NAN, 30.0, NAN], [NAN, NAN, NAN]])
    out = shifted(mu, values)
    assert out[0, 0] == math.log(20.0) and out[0, 2] == math.log(80.0)
    assert out[0, 1] == pytest.approx(math.log(40.0))  # both measured pairs say twice the estimate
    assert out[1, 1] == math.log(30.0)
    assert np.exp(out[1, [0, 2]]) == pytest.approx([15.0, 60.0])  # one pair: its ratio, 1.5
    assert np.array_equal(out[2], mu[2])  # nothing measured: the estimate stands


def test_the_spread_is_within_problems_and_never_below_the_floor() -> None:
    assert centred_sigma(np.array([[0.3, NAN], [NAN, -0.2]])) == SIGMA_FLOOR  # no problem with two
    levels = np.array([[1.0, 1.0, 1.0], [-2.0, -2.0, -2.0]])  # each problem off by its own level only
    assert centred_sigma(levels) == SIGMA_FLOOR
    wide = np.array([[0.0, 0.5, -0.5], [3.0, 3.5, 2.5]])
    assert centred_sigma(wide) == pytest.approx(1.4826 * 0.5) and centred_sigma(wide) == centred_sigma(wide[:1])


def test_timing_is_worth_it_where_the_pick_is_uncertain_only() -> None:
    """Problem 0: two unmeasured kernels estimated alike (regret, and value in timing either);
    problem 1: every pair measured (a certain pick); problem 2: one kernel failed, one left
    (nothing to choose); problem 3: the winner measured, a close second failed: neither timed nor picked."""
    mu = np.log(np.array([[10.0, 10.0, 1.0], [10.0, 12.0, 11.0], [10.0, 10.0, 10.0], [30.0, 10.0, 29.0]]))
    values = np.array([[NAN, NAN, NAN], [10.0, 12.0, 11.0], [NAN, NAN, NAN], [30.0, NAN, NAN]])
    failed = np.zeros(mu.shape, dtype=bool)
    failed[2, [0, 1]] = True
    failed[3, 2] = True
    regret, value = lookahead(mu, 0.2, values, failed, np.random.default_rng(0), 400)
    assert regret[0] > 0.02 and value[0, 0] > 0 and value[0, 1] > 0
    assert value[0, 2] < min(value[0, 0], value[0, 1])  # ten times slower: rarely the best
    assert regret[1] == 0 and not value[1].any()
    assert regret[2] == 0 and not value[2].any()
    assert value[3, 2] == 0 and value[3, 0] == 0 and regret[3] == 0  # failed (though close), measured
    again = lookahead(mu, 0.2, values, failed, np.random.default_rng(0), 400)
    assert np.array_equal(again[0], regret) and np.array_equal(again[1], value)  # seeded


def test_the_ranker_is_corrected_from_enough_pairs_and_the_regressor_by_its_least_error(monkeypatch) -> None:
    """choose: the ranker's RANKER_ROUNDS from MIN_CORRECTION_PAIRS measured pairs on (none below);
    the regressor's rounds the fewest of least out-of-fold error; none without errors to compare."""
    errors = {0: 9.0, 25: 7.5, 75: 7.5, 200: 8.0}
    monkeypatch.setattr(anchored, "regressor_errors", lambda *args: (5, errors))
    shape = (40, 30)

    def record(pairs: int):
        tflops = np.full(shape, NAN)
        tflops.flat[:pairs] = 1.0
        return type("Record", (), {"tflops": tflops})()

    at = anchored.choose(record(anchored.MIN_CORRECTION_PAIRS), [], np.zeros(shape), None, 0, 1)
    assert (at.ranker_rounds, at.regressor_rounds, at.measured_pairs) == (
        anchored.RANKER_ROUNDS,
        25,
        anchored.MIN_CORRECTION_PAIRS,
    )
    assert at.ranker_objective == "lambdarank" and "7.5 %" in at.text()
    below = anchored.choose(record(anchored.MIN_CORRECTION_PAIRS - 1), [], np.zeros(shape), None, 0, 1)
    assert below.ranker_rounds == 0 and below.ranker_objective == "regression"
    assert "analytical model alone" in below.text()
    monkeypatch.setattr(anchored, "regressor_errors", lambda *args: (1, {}))
    none = anchored.choose(record(anchored.MIN_CORRECTION_PAIRS), [], np.zeros(shape), None, 0, 1)
    assert none.regressor_rounds == 0 and "too few measured shapes" in none.text()
