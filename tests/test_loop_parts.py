"""The learning loop's parts on small inputs made by hand, for the fast tier (the loop itself, which
runs them on a recording, is tests/test_learning.py's and slow): how acquisition moves estimates,
reads a spread and values pairs (:mod:`ckspace.training.acquisition`), and when the anchored model
keeps its corrections (:mod:`ckspace.training.anchored`)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ckspace.training.acquisition import SIGMA_FLOOR, centred_sigma, lookahead, shifted
from ckspace.training.anchored import worth_it

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


def test_corrections_need_gains_beyond_their_standard_error() -> None:
    assert worth_it(np.array([0.02, 0.03, 0.025]))
    assert not worth_it(np.array([0.05, -0.04, 0.0]))  # a mean within the noise of the gains
    assert not worth_it(np.array([0.5]))  # one problem is no evidence
    assert not worth_it(np.array([0.0, 0.0]))
