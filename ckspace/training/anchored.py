"""The learning loop's model: the analytical model as its first trees, and small corrections learnt
on the measured pairs once there are enough of them.

Why not the model ``ckspace train`` fits: from a few hundred measured pairs, a booster fitted from
scratch overrides a good prior (on the MI355X recording, 10 % of the pairs gave picks at 93-96 % of
the best where the analytical model alone reaches 97 %). So the loop's model is anchored:

1. **Prior.** A regression booster on the analytical feature alone that reproduces the calibrated
   analytical model, ``ln(level) + ln 2 * A`` (natural-log TFLOPS), as a staircase finer than
   timing noise (:data:`PRIOR_STEP_LOG2`) over the analytical range of the workload widened by
   :data:`PRIOR_MARGIN_LOG2`. A model directory holds trees only (the selector, the C dispatcher
   and its QuickScorer tables read nothing else), and trees cannot hold a linear term, so the prior
   is written as trees; fitted on a dense grid of the feature, not on measurements, it needs none.
2. **Corrections.** Boosting continues from the prior on the measured pairs, with small trees, a
   slow rate and a strong L2 penalty (:data:`CORRECTION_PARAMS`), so each tree can move the prior's
   order a little. The ranker's corrections (lambdarank) see only the measured pairs, graded among
   each problem's measured kernels, and continue from a steeper copy of the prior
   (:data:`RANKER_PRIOR_SCALE`): the steeper, the more a measurement must disagree with the prior
   to reorder kernels. The TFLOPS regressor's see every pair, the unmeasured ones labelled by the
   prior.
3. **How much.** The ranker takes a fixed :data:`RANKER_ROUNDS` rounds once the record holds
   :data:`MIN_CORRECTION_PAIRS` measured pairs, and none below. Choosing them per record, out of
   fold on the measured problems, was tried and failed: a pick the corrections move to an unmeasured
   kernel can only be judged by the prior's estimate (which rates it below the prior's own pick) or
   not at all, so the comparison either condemned corrections that help or kept ones that harm. On
   six of the loop's 10 % records of the MI355X recording it scored the recipe's corrections at
   -0.6 to +0.5 % while, on problems held out and fully measured, they gained 0.3 to 1.3 points of
   mean on every one of seven records (docs/results.md). The regressor's rounds (:data:`ROUNDS`, none among
   them) are chosen out of fold, grouped by shape as ``evaluate`` splits, by the median TFLOPS error
   on measured pairs, which has no such blind spot (:func:`choose`).
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ckspace.features.matrix import ANALYTICAL_FEATURE, FEATURE_NAMES
from ckspace.select.store import ModelCard, save_model
from ckspace.select.support import training_domain
from ckspace.training.acquisition import shifted
from ckspace.training.boosters import BASE_PARAMS, RELEVANCE_LEVELS, design, relevance
from ckspace.training.calibration import fit_level
from ckspace.training.dataset import Measurements
from ckspace.training.evaluation import fold_of_groups
from ckspace.training.metrics import tflops_error
from ckspace.training.trainer import model_card

log = logging.getLogger(__name__)

PRIOR_STEP_LOG2 = 0.0005
"""Spacing of the prior's grid in log2 TFLOPS (0.035 %): its staircase is about this fine, well under
the run-to-run noise of a timing (~2 %), so it rarely ties two kernels the analytical model orders."""
PRIOR_MARGIN_LOG2 = 2.0
"""How far beyond the workload's analytical range (log2 TFLOPS, a factor of 4 either way) the prior
keeps its slope: problems a little smaller or faster than the workload's still rank by it."""
PRIOR_ROUNDS = 400
"""Trees of the prior (:data:`PRIOR_LEAVES` leaves each): enough for its staircase to reach the
grid's resolution (checked by tests/test_learning.py against the analytical picks)."""
PRIOR_LEAVES = 63
"""Leaves per prior tree: the most the dispatcher's QuickScorer tables hold (64) less one."""
PRIOR_DEPTH = 10
"""The prior trees' deepest leaf: Treelite, which compiles trees to C for the selector and the
dispatcher, numbers nodes heap-wise and refuses a tree deeper than about 30 levels, which a 1-D
staircase grown leaf by leaf reaches."""
PRIOR_PARAMS: dict[str, object] = {
    "objective": "regression",
    "learning_rate": 1.0,
    "num_leaves": PRIOR_LEAVES,
    "max_depth": PRIOR_DEPTH,
    "min_data_in_leaf": 1,
    "min_data_in_bin": 1,
    "min_sum_hessian_in_leaf": 0.0,
    "lambda_l2": 0.0,
    "feature_fraction": 1.0,
    "bagging_fraction": 1.0,
    "bagging_freq": 0,
    "deterministic": True,
    "force_row_wise": True,
    "verbosity": -1,
}
"""The prior's fit: an interpolation of a known function, so nothing is held back (no bagging, no
penalty, a leaf per grid point if need be); every feature but the analytical one is masked."""
CORRECTION_PARAMS: dict[str, object] = {
    **BASE_PARAMS,
    "learning_rate": 0.05,
    "num_leaves": 7,
    "min_data_in_leaf": 20,
    "lambda_l2": 10.0,
}
"""The corrections' fit: trees of 7 leaves at a twentieth of their value each, leaves of 20 pairs
or more, a strong L2 penalty: many rounds are needed to move the prior far."""
ROUNDS = (0, 25, 75, 200)
"""Regression correction rounds the out-of-fold comparison of TFLOPS errors weighs; 0 is the prior."""
CHOICE_FOLDS = 5
"""Folds of that comparison (fewer when the measured problems have fewer shapes)."""
RANKER_PRIOR_SCALE = 4.0
"""The ranker's prior is the regressor's times this (the same order): lambdarank's gradients shrink
as a problem's scores spread apart, so corrections continued from a steeper prior move it only where
the measured pairs disagree with it clearly. Continued from the prior itself, the same 25 rounds
lost held out on five of the seven 10 % records studied (up to 2.6 points of mean)."""
RANKER_ROUNDS = 25
"""Lambdarank correction rounds of the ranker: a fixed recipe, not chosen per record (the module doc
says why, docs/results.md what it rests on)."""
MIN_CORRECTION_PAIRS = 400
"""Measured pairs below which the ranker is the prior alone: at 5 % of the MI355X recording (about
280 pairs) the recipe's corrections lost held out (0.1-0.4 point of mean, 2 of P10), at 10 % (about
550) they gained on every record studied. Known from that one cell's recording only."""


@dataclass(frozen=True)
class Choice:
    """What the ranker and the regressor are: correction rounds on the measured pairs, and the
    regressor's out-of-fold median TFLOPS error (percent) by rounds, which chose its rounds."""

    ranker_rounds: int
    regressor_rounds: int
    folds: int
    measured_pairs: int
    tflops_error: dict[int, float]
    ranker_scale: float = RANKER_PRIOR_SCALE

    @property
    def ranker_objective(self) -> str:
        return "lambdarank" if self.ranker_rounds else "regression"

    def text(self) -> str:
        if self.ranker_rounds == 0:
            what = (
                f"the analytical model alone (calibrated): {self.measured_pairs} measured pairs, corrections "
                f"need {MIN_CORRECTION_PAIRS}"
            )
        else:
            what = (
                f"the analytical model (x{self.ranker_scale:g}) with {self.ranker_rounds} lambdarank correction "
                f"rounds on {self.measured_pairs} measured pairs"
            )
        if not self.tflops_error:
            return f"{what}; TFLOPS from the prior (too few measured shapes to cross-validate its corrections)"
        error = self.tflops_error[self.regressor_rounds]
        return (
            f"{what}; TFLOPS from {self.regressor_rounds} regression correction rounds (out of fold, "
            f"{self.folds} folds by shape: median error {error:.1f} %)"
        )


def analytical(per_problem: list[np.ndarray]) -> np.ndarray:
    """The analytical feature (log2 TFLOPS) of every (problem, kernel)."""
    column = FEATURE_NAMES.index(ANALYTICAL_FEATURE)
    return np.vstack([m[:, column] for m in per_problem])


def prior_booster(low: float, high: float, level: float, seed: int, threads: int, scale: float = 1.0):
    """The calibrated analytical model as trees over ``[low, high]`` log2 TFLOPS (see the module doc),
    times ``scale`` (:data:`RANKER_PRIOR_SCALE` for the ranker's prior: the same order)."""
    import lightgbm as lgb

    grid = np.arange(low, high + PRIOR_STEP_LOG2, PRIOR_STEP_LOG2)
    features = np.zeros((grid.size, len(FEATURE_NAMES)))
    column = FEATURE_NAMES.index(ANALYTICAL_FEATURE)
    features[:, column] = grid
    params = {
        **PRIOR_PARAMS,
        "max_bin": int(grid.size),
        "interaction_constraints": [[column]],
        "seed": seed,
        "num_threads": threads,
    }
    label = scale * (math.log(level) + math.log(2.0) * grid)
    dataset = lgb.Dataset(features, label=label, feature_name=list(FEATURE_NAMES))
    log.info("fitting the prior: %d grid points over [%.2f, %.2f] log2 TFLOPS", grid.size, low, high)
    return lgb.train(params, dataset, num_boost_round=PRIOR_ROUNDS)


PSEUDO_WEIGHT = 0.3
"""The weight of an unmeasured pair in the regressor's corrections, labelled by the prior (moved by
its problem's median residual): the TFLOPS corrections learn the measured pairs and keep the prior's
level everywhere else, unmeasured kernels beside measured ones included."""


@dataclass(frozen=True)
class Rows:
    """(problem, kernel) pairs of some problems, in problem order: every pair with the measurement
    where there is one and the prior's estimate elsewhere (:func:`completed`), or the measured pairs
    alone (:func:`measured_rows`); each pair's weight."""

    features: np.ndarray
    log_tflops: np.ndarray
    efficiency: np.ndarray
    weight: np.ndarray
    group_sizes: np.ndarray


def completed(log_prior: np.ndarray, tflops: np.ndarray) -> np.ndarray:
    """Natural-log TFLOPS of every pair: measured pairs their measurement, the others the prior moved
    by their problem's median residual (a problem's level is learnt from any of its pairs)."""
    return shifted(log_prior, tflops)


def rows_of(index: np.ndarray, per_problem: list[np.ndarray], log_tflops: np.ndarray, tflops: np.ndarray) -> Rows:
    """Every pair of the problems at ``index`` (``log_tflops``: :func:`completed`), unmeasured ones
    at :data:`PSEUDO_WEIGHT`: the regressor's corrections."""
    measured = ~np.isnan(tflops[index])
    labels = log_tflops[index]
    return Rows(
        np.vstack([per_problem[i] for i in index]),
        labels.ravel(),
        np.exp(labels - labels.max(axis=1, keepdims=True)).ravel(),
        np.where(measured, 1.0, PSEUDO_WEIGHT).ravel(),
        np.full(len(index), labels.shape[1]),
    )


def measured_rows(index: np.ndarray, per_problem: list[np.ndarray], tflops: np.ndarray) -> Rows | None:
    """The measured pairs of the problems at ``index`` that have two or more (a ranking needs two),
    efficiency among the problem's measured kernels: the ranker's corrections learn only what was
    measured, and the prior holds everywhere else. None when no problem has two."""
    keep = [i for i in index if np.count_nonzero(~np.isnan(tflops[i])) >= 2]
    if not keep:
        return None
    masks = [~np.isnan(tflops[i]) for i in keep]
    values = [tflops[i, m] for i, m in zip(keep, masks, strict=True)]
    return Rows(
        np.vstack([per_problem[i][m] for i, m in zip(keep, masks, strict=True)]),
        np.concatenate([np.log(v) for v in values]),
        np.concatenate([v / v.max() for v in values]),
        np.ones(sum(v.size for v in values)),
        np.asarray([v.size for v in values]),
    )


def corrected(prior, rows: Rows | None, objective: str, rounds: int, seed: int, threads: int):
    """``prior`` with ``rounds`` correction trees fitted on ``rows`` (the prior itself for 0 or no rows)."""
    import lightgbm as lgb

    if rounds == 0 or rows is None:
        return prior
    params = {**CORRECTION_PARAMS, "objective": objective, "seed": seed, "num_threads": threads}
    if objective == "lambdarank":
        params.update(lambdarank_truncation_level=10, label_gain=[float(2**i - 1) for i in range(RELEVANCE_LEVELS)])
        label, group = relevance(rows.efficiency), rows.group_sizes
    else:
        label, group = rows.log_tflops, None
    dataset = lgb.Dataset(rows.features, label=label, group=group, weight=rows.weight, feature_name=list(FEATURE_NAMES))
    return lgb.train(params, dataset, num_boost_round=rounds, init_model=prior, keep_training_booster=False)


def _staged(booster, prior_trees: int, features: np.ndarray, threads: int) -> dict[int, np.ndarray]:
    """The booster's predictions after the prior and each of :data:`ROUNDS` correction rounds."""
    if booster.num_trees() == prior_trees:  # no rows to correct on: the prior at every stage
        alone = booster.predict(features, num_threads=threads)
        return dict.fromkeys(ROUNDS, alone)
    return {r: booster.predict(features, num_iteration=prior_trees + r, num_threads=threads) for r in ROUNDS}


def regressor_errors(
    data: Measurements, per_problem: list[np.ndarray], log_tflops: np.ndarray, prior, seed: int, threads: int
) -> tuple[int, dict[int, float]]:
    """The regressor's out-of-fold median TFLOPS error (percent) after each of :data:`ROUNDS`
    correction rounds, grouped by shape as ``evaluate`` splits, on the measured pairs (every workload
    problem is in a fold); the folds, and no errors when there are fewer than two measured shapes."""
    measured_shapes = {g for g, row in zip(data.groups, data.tflops, strict=True) if not np.all(np.isnan(row))}
    folds = min(CHOICE_FOLDS, len(set(data.groups)))
    if folds < 2 or len(measured_shapes) < 2:
        return folds, {}
    fold = fold_of_groups(data.groups, folds, seed)
    everything = np.arange(len(data.problems))
    out = {r: np.full(data.tflops.shape, np.nan) for r in ROUNDS}
    for f in range(folds):
        train, test = everything[fold != f], everything[fold == f]
        rows = rows_of(train, per_problem, log_tflops, data.tflops)
        booster = corrected(prior, rows, "regression", max(ROUNDS), seed, threads)
        held = np.vstack([per_problem[i] for i in test])
        for r, predicted in _staged(booster, prior.num_trees(), held, threads).items():
            out[r][test] = predicted.reshape(len(test), -1)
    ok = ~np.isnan(data.tflops)
    return folds, {r: tflops_error(out[r][ok], np.log(data.tflops[ok])) for r in ROUNDS}


def choose(
    data: Measurements, per_problem: list[np.ndarray], log_tflops: np.ndarray, prior, seed: int, threads: int
) -> Choice:
    """The ranker's correction rounds (the recipe, :data:`RANKER_ROUNDS`, from
    :data:`MIN_CORRECTION_PAIRS` measured pairs on) and the regressor's (the fewest of least
    out-of-fold TFLOPS error)."""
    pairs = int(np.count_nonzero(~np.isnan(data.tflops)))
    folds, errors = regressor_errors(data, per_problem, log_tflops, prior, seed, threads)
    regressor = min(ROUNDS, key=lambda r: (errors[r], r)) if errors else 0
    ranker = RANKER_ROUNDS if pairs >= MIN_CORRECTION_PAIRS else 0
    for r, e in errors.items():
        log.info("out-of-fold median TFLOPS error after %d regression correction rounds: %.2f %%", r, e)
    return Choice(ranker, regressor, folds, pairs, errors)


def train_anchored(
    data: Measurements,
    record: Measurements,
    per_problem: list[np.ndarray],
    out: Path,
    seed: int = 0,
    command: str = "",
    num_threads: int = 1,
    calibrated: dict[str, float] | None = None,
) -> tuple[ModelCard, Choice]:
    """The anchored model of ``data`` (every workload problem and candidate kernel, NaN where not
    measured; ``per_problem`` its feature matrices) written to ``out`` as ``ckspace train`` writes a
    model; ``record`` is the record as ``train`` reads it (its files, rows and cleaning go into the
    card). ``calibrated``: the constants measured on the data's GPU that ``per_problem`` was priced
    with, which the card carries so that every user of the model prices its features alike."""
    log2_model = analytical(per_problem)
    rows_any = ~np.all(np.isnan(data.tflops), axis=1)
    level = fit_level(log2_model[rows_any], data.tflops[rows_any]) if rows_any.any() else 1.0
    low, high = float(log2_model.min()) - PRIOR_MARGIN_LOG2, float(log2_model.max()) + PRIOR_MARGIN_LOG2
    prior = prior_booster(low, high, level, seed, num_threads)
    log_tflops = completed(math.log(level) + math.log(2.0) * log2_model, data.tflops)
    choice = choose(data, per_problem, log_tflops, prior, seed, num_threads)
    everything = np.arange(len(data.problems))
    rows = rows_of(everything, per_problem, log_tflops, data.tflops)
    ranker = prior
    if choice.ranker_rounds:
        steep = prior_booster(low, high, level, seed, num_threads, choice.ranker_scale)
        ranker_rows = measured_rows(everything, per_problem, data.tflops)
        ranker = corrected(steep, ranker_rows, "lambdarank", choice.ranker_rounds, seed, num_threads)
    regressor = corrected(prior, rows, "regression", choice.regressor_rounds, seed, num_threads)
    measured = np.flatnonzero((~np.isnan(data.tflops)).sum(axis=1) >= 1)
    rows = design(data.subset(measured), [per_problem[i] for i in measured])
    domain = training_domain(data.configs, data.problems, ranker, rows.features, rows.log_tflops, rows.problem)
    objective = choice.ranker_objective
    cross_validation = {
        "folds": choice.folds,
        "seed": seed,
        "analytical_level": level,
        "ranker_rounds": choice.ranker_rounds,
        "ranker_prior_scale": choice.ranker_scale,
        "regressor_rounds": choice.regressor_rounds,
        "measured_pairs": choice.measured_pairs,
        "tflops_median_error_percent_by_rounds": {str(r): e for r, e in choice.tflops_error.items()},
    }
    card = model_card(record, data.kernel_names, objective, choice.text(), cross_validation, command, domain)
    card = card.model_copy(update={"calibrated": dict(calibrated or {})})
    return save_model(out, ranker, regressor, card, force=True), choice
