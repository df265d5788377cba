"""Where the learning loop's picks are most likely wrong, and what to build and time next.

The estimate of a round is a predicted log TFLOPS ``mu[p, k]`` of every (problem, kernel) pair and
one spread ``sigma`` of its error *within a problem* (a problem's level does not change its pick):

* ``mu`` is the analytical performance model at its calibrated level
  (:func:`~ckspace.training.calibration.fit_level` on the pairs measured);
* or, once enough problems have two kernels measured and the loop is asked to
  (``LearnSettings.fit_problems``; by default never), a LightGBM log-TFLOPS regressor fitted as
  ``ckspace train`` fits one (:func:`~ckspace.training.boosters.fit`), its spread taken from
  predictions on problems it was not fitted on (two folds grouped by shape,
  :func:`~ckspace.training.evaluation.fold_of_groups`);
* each problem's measured pairs shift its unmeasured ones by their median residual, and replace
  their own estimate with the measurement.

The *regret* of a problem is the expected loss of its pick (the kernel with the best estimate) to
the best kernel, as a share of the best, over samples of the unmeasured pairs drawn around ``mu``
with ``sigma`` (seeded: the same state gives the same estimate). A pair's *value* is how much timing
it is expected to lower its problem's regret: a one-step lookahead over the same samples (for each
drawn outcome of the pair, the pick that outcome would make and the regret left), which is high
where the top estimates are close or unmeasured and nil where a pick is already certain. A round
then measures either the least sure problems' contenders, building what they need
(:func:`contender_pairs`, the loop's default), or the most value per second (:func:`choose_pairs`:
pairs on built kernels at the measurer's pair cost, and a new kernel only when the value of its best
pairs, beyond the pairs it displaces, beats what its build time would buy in pairs at the round's
marginal value).
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass

import numpy as np

from ckspace.training.boosters import design, fit
from ckspace.training.calibration import fit_level
from ckspace.training.dataset import Measurements
from ckspace.training.evaluation import fold_of_groups

log = logging.getLogger(__name__)

MAD_TO_SIGMA = 1.4826
"""The normal distribution's standard deviation per median absolute deviation: the spread is
estimated robustly, so a few pairs a model misjudges badly do not widen every sample."""
SIGMA_FLOOR = 0.02
"""The least within-problem spread believed: about the run-to-run noise of timing a kernel (the
recorded MI355X data hold one shape measured twice), below which a model's residuals are luck."""


@dataclass(frozen=True)
class Estimate:
    """A round's view of every pair: log TFLOPS, its spread, each problem's regret, each pair's value."""

    source: str  # "analytical" or "lightgbm"
    level: float  # the analytical model's calibrated level (1.0 once LightGBM predicts)
    sigma: float
    mu: np.ndarray  # (problems, kernels) natural log TFLOPS, measured pairs at their measurement
    regret: np.ndarray  # (problems,) expected loss of the pick, fraction of the best
    value: np.ndarray  # (problems, kernels) expected regret reduction of timing the pair, weighted
    weights: np.ndarray  # (problems,) each problem's share of the workload that can be measured

    def mean_regret(self) -> float:
        return float(self.regret @ self.weights)


def analytical_mu(log2_model: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, float]:
    """The analytical model's natural-log TFLOPS at the level fitted on the measured pairs."""
    rows = ~np.all(np.isnan(values), axis=1)
    level = fit_level(log2_model[rows], values[rows]) if rows.any() else 1.0
    return math.log(level) + math.log(2.0) * log2_model, level


def regressor_mu(
    data: Measurements, per_problem: list[np.ndarray], seed: int, threads: int
) -> tuple[np.ndarray, np.ndarray]:
    """A LightGBM log-TFLOPS regressor's prediction of every pair, fitted on every measured pair,
    and the residuals (measured minus predicted, per measured pair) of predictions made by
    regressors fitted on the other half of the shapes: what the spread is read from."""
    measured = np.flatnonzero(~np.all(np.isnan(data.tflops), axis=1))
    everything = np.vstack(per_problem)
    booster = fit(design(data.subset(measured), [per_problem[i] for i in measured]), "regression", seed, None, threads)
    mu = booster.predict(everything, num_threads=threads).reshape(data.tflops.shape)
    groups = tuple(data.groups[i] for i in measured)
    fold = fold_of_groups(groups, 2, seed)
    residual = np.full(data.tflops.shape, np.nan)
    for f in (0, 1):
        train, test = measured[fold != f], measured[fold == f]
        half = fit(design(data.subset(train), [per_problem[i] for i in train]), "regression", seed, None, threads)
        predicted = half.predict(np.vstack([per_problem[i] for i in test]), num_threads=threads)
        residual[test] = np.log(data.tflops[test]) - predicted.reshape(len(test), -1)
    return mu, residual


def centred_sigma(residual: np.ndarray) -> float:
    """The within-problem spread of log residuals: each problem's residuals less their median, over
    the problems with two or more, robustly (:data:`MAD_TO_SIGMA`), at least :data:`SIGMA_FLOOR`."""
    centred = [r[~np.isnan(r)] - np.nanmedian(r) for r in residual if np.count_nonzero(~np.isnan(r)) >= 2]
    if not centred:
        return SIGMA_FLOOR
    spread = np.concatenate(centred)
    return max(SIGMA_FLOOR, MAD_TO_SIGMA * float(np.median(np.abs(spread - np.median(spread)))))


def shifted(mu: np.ndarray, values: np.ndarray) -> np.ndarray:
    """``mu`` moved, per problem, by the median residual of its measured pairs, which keep their
    measurement: a problem's level is learnt from any of its pairs."""
    residual = np.log(values) - mu
    measured = ~np.isnan(values)
    offset = np.zeros(len(mu))
    rows = measured.any(axis=1)
    offset[rows] = np.nanmedian(residual[rows], axis=1)
    return np.where(measured, np.log(np.where(measured, values, 1.0)), mu + offset[:, None])


def lookahead(
    mu: np.ndarray, sigma: float, values: np.ndarray, failed: np.ndarray, rng: np.random.Generator, samples: int
) -> tuple[np.ndarray, np.ndarray]:
    """Each problem's regret and each pair's value (see the module doc); failed pairs (asked, not
    measured) can be neither picked nor timed again."""
    problems, kernels = mu.shape
    z = rng.standard_normal((problems, kernels, samples))
    regret, value = np.zeros(problems), np.zeros((problems, kernels))
    for p in range(problems):
        ok = ~failed[p]
        if np.count_nonzero(ok) < 2:
            continue  # one kernel or none can run it: nothing to choose
        known = ~np.isnan(values[p])
        draws = np.where(known[:, None], np.exp(mu[p])[:, None], np.exp(mu[p][:, None] + sigma * z[p]))
        draws[~ok] = 0.0
        point = np.where(ok, np.exp(mu[p]), -np.inf)
        regret[p], value[p] = _problem_lookahead(draws, point, known | ~ok)
    return regret, value


def _problem_lookahead(draws: np.ndarray, point: np.ndarray, fixed: np.ndarray) -> tuple[float, np.ndarray]:
    """One problem: ``draws[k, s]`` sampled TFLOPS (fixed rows constant), ``point[k]`` the estimate
    the pick follows. Returns the regret of the pick and, per kernel, the regret expected to
    disappear once its true value (one of its draws, each equally likely) is known."""
    kernels, samples = draws.shape
    pick = int(np.argmax(point))
    best = draws.max(axis=0)
    regret = float(np.mean((best - draws[pick]) / best))
    top = np.argsort(-draws, axis=0, kind="stable")[:2]
    first, second = draws[top[0], np.arange(samples)], draws[top[1], np.arange(samples)]
    others_best = np.where(top[0][None, :] == np.arange(kernels)[:, None], second, first)  # (k, s)
    ranked = np.argsort(-point, kind="stable")[:2]
    pick_without = np.where(np.arange(kernels) == ranked[0], ranked[1], ranked[0])  # (k,)
    takes_k = draws > point[pick_without][:, None]  # (k, o): the outcome o of k makes k the pick
    best_after = np.maximum(others_best[:, None, :], draws[:, :, None])  # (k, o, s)
    chosen = np.where(takes_k[:, :, None], draws[:, :, None], draws[pick_without][:, None, :])
    after = np.mean((best_after - chosen) / best_after, axis=(1, 2))
    value = np.where(fixed, 0.0, np.clip(regret - after, 0.0, None))
    return regret, value


@dataclass(frozen=True)
class Costs:
    """What the measurer charges, in seconds."""

    build: float
    pair: float


def choose_pairs(
    value: np.ndarray, built: list[int], untried: np.ndarray, new_kernels: int, slots: int, costs: Costs
) -> list[tuple[int, int]]:
    """The next batch of (problem, kernel) pairs, at most ``slots``, with at most ``new_kernels``
    kernels not in ``built``: pairs on built kernels first (most value first), then each new kernel's
    pairs (see the module doc for when a kernel is worth building). Empty when nothing has value."""
    worth = np.where(untried, value, 0.0)
    on_built = _ranked_pairs(worth, built)
    candidates = [k for k in range(value.shape[1]) if k not in built]
    packages: list[tuple[int, int]] = []
    for _ in range(new_kernels):
        room = slots - len(packages)
        size = min(max(1, slots // 2), room)
        if size < 1:
            break
        kept = on_built[:room]
        overflow = max(0, len(kept) + size - room)
        displaced = float(sum(worth[pair] for pair in kept[len(kept) - overflow :]))
        marginal = float(worth[kept[-1]]) if kept else 0.0
        best = _best_package(worth, candidates, size, displaced, marginal, costs)
        if best is None:
            break
        candidates.remove(best[0][1])
        packages += best
    return on_built[: slots - len(packages)] + packages


def contender_pairs(
    mu: np.ndarray, regret: np.ndarray, untried: np.ndarray, allowed: np.ndarray, slots: int, contenders: int
) -> list[tuple[int, int]]:
    """The next batch as each unsure problem's contenders: problems by ``regret`` (weighted expected
    loss of the pick, most first; none with none), each with its ``contenders`` best-estimated
    kernels among the ``allowed`` ones (built, or buildable within the budget), the untried pairs of
    them, at most ``slots``. Where every problem's contenders are tried, one more contender each, and
    so on: a problem's close contenders decide its pick, and corrections learnt on them carry to
    other problems' (a uniform draw measures mostly kernels far from any pick)."""
    order = [p for p in np.argsort(-regret, kind="stable").tolist() if regret[p] > 0]
    kernels = np.flatnonzero(allowed)
    for depth in range(contenders, len(kernels) + 1):
        pairs: list[tuple[int, int]] = []
        for p in order:
            top = kernels[np.argsort(-mu[p, kernels], kind="stable")[:depth]]
            pairs += [(p, int(k)) for k in top if untried[p, k]]
            if len(pairs) >= slots:
                return pairs[:slots]
        if pairs:
            return pairs
    return []


def _ranked_pairs(worth: np.ndarray, kernels: list[int]) -> list[tuple[int, int]]:
    """The pairs of ``kernels`` with value, most value first (ties by problem, then kernel)."""
    pairs = [(p, k) for k in kernels for p in np.flatnonzero(worth[:, k] > 0).tolist()]
    return sorted(pairs, key=lambda pk: (-worth[pk], pk))


def _best_package(
    worth: np.ndarray, candidates: list[int], size: int, displaced: float, marginal: float, costs: Costs
) -> list[tuple[int, int]] | None:
    """The best ``size`` pairs of the new kernel whose pairs gain most over the ``displaced`` value
    of built pairs, per second of its build, if that beats ``marginal`` value per pair-second (what
    the build's time buys in pairs); else None."""
    best, best_rate = None, marginal / costs.pair
    for k in candidates:
        problems = [p for p in np.argsort(-worth[:, k], kind="stable")[:size].tolist() if worth[p, k] > 0]
        rate = (float(sum(worth[p, k] for p in problems)) - displaced) / costs.build
        if problems and rate > best_rate:
            best, best_rate = [(p, k) for p in problems], rate
    return best
