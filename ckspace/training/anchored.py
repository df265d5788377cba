"""The learning loop's model: the analytical model as its first trees, corrections only where measured
pairs show, out of fold, that they help.

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
   each problem's measured kernels, and continue from the prior or a steeper copy of it
   (:data:`RANKER_PRIOR_SCALES`): the steeper, the more a measurement must disagree with the prior
   to reorder kernels. The TFLOPS regressor's see every pair, the unmeasured ones labelled by the prior.
3. **Out-of-fold choice.** How many correction rounds (:data:`ROUNDS`, none among them), of which
   objective and, for the ranker, on which prior's scale, is chosen on
   the measured problems by grouped cross-validation (by shape, as ``evaluate`` splits): the pick's
   efficiency on held-out problems whose analytical pick and one more kernel are measured, an
   unmeasured pick worth what the prior estimates (:func:`choose`). Corrections
   are kept only when their mean gain over the prior alone exceeds the standard error of the
   per-problem gains: where the evidence is thin, the model is the analytical model.
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
from ckspace.training.metrics import Scores, per_problem_efficiency, summarize, tflops_error
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
"""Correction rounds the out-of-fold choice weighs; 0 is the prior alone."""
CHOICE_FOLDS = 5
"""Folds of the out-of-fold choice (fewer when the measured problems have fewer shapes)."""


@dataclass(frozen=True)
class Choice:
    """What the out-of-fold comparison chose, and what it saw (efficiencies among measured kernels)."""

    ranker_objective: str
    ranker_rounds: int
    regressor_rounds: int
    folds: int
    prior: Scores | None
    chosen: Scores | None
    tflops_error: dict[int, float]
    ranker_scale: float = 1.0

    def text(self) -> str:
        if self.prior is None or self.chosen is None:
            return "too few measured shapes to cross-validate: the analytical model alone (calibrated)"
        what = (
            "the analytical model alone (calibrated)"
            if self.ranker_rounds == 0
            else f"the analytical model (x{self.ranker_scale:g}) with {self.ranker_rounds} {self.ranker_objective} "
            "correction rounds"
        )
        return (
            f"{what}: out of fold ({self.folds} folds by shape, picks among measured kernels) mean "
            f"{self.chosen.mean:.2f} %, P10 {self.chosen.p10:.2f} % against the analytical model's "
            f"{self.prior.mean:.2f} %, {self.prior.p10:.2f} %; TFLOPS from {self.regressor_rounds} regression "
            "correction rounds"
        )


def analytical(per_problem: list[np.ndarray]) -> np.ndarray:
    """The analytical feature (log2 TFLOPS) of every (problem, kernel)."""
    column = FEATURE_NAMES.index(ANALYTICAL_FEATURE)
    return np.vstack([m[:, column] for m in per_problem])


def prior_booster(low: float, high: float, level: float, seed: int, threads: int, scale: float = 1.0):
    """The calibrated analytical model as trees over ``[low, high]`` log2 TFLOPS (see the module doc),
    times ``scale`` (one of :data:`RANKER_PRIOR_SCALES` for the ranker's prior: the same order)."""
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
RANKER_PRIOR_SCALES = (1.0, 4.0)
"""The ranker's prior is the regressor's times one of these (the same order), chosen out of fold:
lambdarank's gradients shrink as a problem's scores spread apart, so corrections continued from a
steeper prior move it only where the measured pairs disagree with it clearly."""


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


def worth_it(gains: np.ndarray) -> bool:
    """Whether per-problem out-of-fold gains over the prior are evidence: their mean exceeds its
    standard error (two problems or more)."""
    return len(gains) >= 2 and float(gains.mean()) > float(gains.std(ddof=1)) / math.sqrt(len(gains))


def informative(tflops: np.ndarray, log2_model: np.ndarray) -> np.ndarray:
    """The problems whose measurements can judge a correction: two or more kernels measured, the
    analytical model's own pick among them. What matters is whether a correction beats the prior's
    pick at the top; on a problem measured only on kernels the prior ranks low (a uniform draw of a
    few pairs mostly is), a correction that orders those well may still misorder the top, which
    nothing measured there shows."""
    measured = ~np.isnan(tflops)
    top = np.argmax(log2_model, axis=1)
    return np.flatnonzero((measured.sum(axis=1) >= 2) & measured[np.arange(len(tflops)), top])


def choose(
    data: Measurements,
    per_problem: list[np.ndarray],
    log_tflops: np.ndarray,
    priors: dict[tuple[str, float], object],
    seed: int,
    threads: int,
) -> Choice:
    """The correction rounds of the ranker and the regressor, by grouped out-of-fold comparison (see
    the module doc; ``priors`` by objective and scale): every workload problem is in a fold; the held-out
    problems :func:`informative` names are scored, each pick among all kernels as held-out picks are
    made, against :func:`completed` (a measured pick is worth its measurement; an unmeasured one no
    more than the prior and its problem's measurements say: the ranker's corrections never saw it,
    so a correction that lifts it has no evidence, and judging picks among measured kernels alone
    would not see it lifted)."""
    folds = min(CHOICE_FOLDS, len(set(data.groups)))
    scored = informative(data.tflops, analytical(per_problem))
    if folds < 2 or len({data.groups[i] for i in scored}) < 2:
        return Choice("regression", 0, 0, folds, None, None, {})
    fold = fold_of_groups(data.groups, folds, seed)
    everything = np.arange(len(data.problems))
    arms = [("regression", 1.0)] + [("lambdarank", scale) for scale in RANKER_PRIOR_SCALES]
    out = {arm: {r: np.full(data.tflops.shape, np.nan) for r in ROUNDS} for arm in arms}
    for f in range(folds):
        train, test = everything[fold != f], everything[fold == f]
        held = np.vstack([per_problem[i] for i in test])
        ranking = measured_rows(train, per_problem, data.tflops)
        regression = rows_of(train, per_problem, log_tflops, data.tflops)
        for objective, scale in arms:
            prior = priors[(objective, scale)]
            rows = ranking if objective == "lambdarank" else regression
            booster = corrected(prior, rows, objective, max(ROUNDS), seed, threads)
            for r, predicted in _staged(booster, prior.num_trees(), held, threads).items():
                out[(objective, scale)][r][test] = predicted.reshape(len(test), -1)
    truth = np.exp(log_tflops[scored])
    prior_alone = out[("regression", 1.0)][0][scored]
    base = per_problem_efficiency(prior_alone, truth)
    gains = {(*arm, r): per_problem_efficiency(out[arm][r][scored], truth) - base for arm in arms for r in ROUNDS if r}
    for key, g in gains.items():
        log.info(
            "out-of-fold gain of %s (prior x%g) x %d: mean %.3f %%, standard error %.3f %%",
            *key,
            100 * g.mean(),
            100 * g.std(ddof=1) / math.sqrt(len(g)),
        )
    worth = [key for key, g in gains.items() if worth_it(g)]
    objective, scale, rounds = max(worth, key=lambda key: gains[key].mean(), default=("regression", 1.0, 0))
    ok = ~np.isnan(data.tflops)
    logged = out[("regression", 1.0)]
    errors = {r: tflops_error(logged[r][ok], np.log(data.tflops[ok])) for r in ROUNDS}
    regressor = min(ROUNDS, key=lambda r: (errors[r], r))
    chosen = out[(objective, scale)][rounds][scored]
    return Choice(
        objective, rounds, regressor, folds, summarize(prior_alone, truth), summarize(chosen, truth), errors, scale
    )


def train_anchored(
    data: Measurements,
    record: Measurements,
    per_problem: list[np.ndarray],
    out: Path,
    seed: int = 0,
    command: str = "",
    num_threads: int = 1,
) -> tuple[ModelCard, Choice]:
    """The anchored model of ``data`` (every workload problem and candidate kernel, NaN where not
    measured; ``per_problem`` its feature matrices) written to ``out`` as ``ckspace train`` writes a
    model; ``record`` is the record as ``train`` reads it (its files, rows and cleaning go into the
    card)."""
    log2_model = analytical(per_problem)
    rows_any = ~np.all(np.isnan(data.tflops), axis=1)
    level = fit_level(log2_model[rows_any], data.tflops[rows_any]) if rows_any.any() else 1.0
    low, high = float(log2_model.min()) - PRIOR_MARGIN_LOG2, float(log2_model.max()) + PRIOR_MARGIN_LOG2
    prior = prior_booster(low, high, level, seed, num_threads)
    priors = {("regression", 1.0): prior, ("lambdarank", 1.0): prior}
    for scale in RANKER_PRIOR_SCALES:
        if scale != 1.0:
            priors[("lambdarank", scale)] = prior_booster(low, high, level, seed, num_threads, scale)
    log_tflops = completed(math.log(level) + math.log(2.0) * log2_model, data.tflops)
    choice = choose(data, per_problem, log_tflops, priors, seed, num_threads)
    everything = np.arange(len(data.problems))
    rows = rows_of(everything, per_problem, log_tflops, data.tflops)
    if choice.ranker_objective == "lambdarank":
        ranker_rows = measured_rows(everything, per_problem, data.tflops)
    else:
        ranker_rows = rows
    ranker_prior = priors[(choice.ranker_objective, choice.ranker_scale)]
    ranker = corrected(ranker_prior, ranker_rows, choice.ranker_objective, choice.ranker_rounds, seed, num_threads)
    regressor = corrected(prior, rows, "regression", choice.regressor_rounds, seed, num_threads)
    measured = np.flatnonzero((~np.isnan(data.tflops)).sum(axis=1) >= 1)
    rows = design(data.subset(measured), [per_problem[i] for i in measured])
    domain = training_domain(data.configs, data.problems, ranker, rows.features, rows.log_tflops, rows.problem)
    objective = choice.ranker_objective
    figures = {name: s.model_dump() for name, s in (("model", choice.chosen), ("analytical", choice.prior)) if s}
    cross_validation = {
        "folds": choice.folds,
        "seed": seed,
        "analytical_level": level,
        "ranker_rounds": choice.ranker_rounds,
        "ranker_prior_scale": choice.ranker_scale,
        "regressor_rounds": choice.regressor_rounds,
        "tflops_median_error_percent_by_rounds": {str(r): e for r, e in choice.tflops_error.items()},
        **figures,
    }
    card = model_card(record, data.kernel_names, objective, choice.text(), cross_validation, command, domain)
    return save_model(out, ranker, regressor, card, force=True), choice
