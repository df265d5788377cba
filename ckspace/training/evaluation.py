"""K-fold cross-validation grouped by problem shape: both objectives, the baselines, the fallback.

Folds split the distinct shapes (a shape measured twice is never on both sides), shuffled by the
seed. Everything fitted is fitted on the training folds only: the boosters of both objectives and
the single-best-kernel baseline. The random expectation and the analytical fallback fit nothing;
they are scored on the same held-out problems, so every row of the report covers the same
problems. The objective with the better mean efficiency (then P10) is the ``model``.

Every fit and every prediction runs on ``num_threads`` LightGBM threads (default
:func:`~ckspace.training.boosters.default_threads`): the figures do not depend on it, the time does.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

import numpy as np
from pydantic import BaseModel

from ckspace.core.errors import CkspaceError
from ckspace.environment.progress import step_line
from ckspace.features.matrix import ANALYTICAL_FEATURE, FEATURE_NAMES
from ckspace.training.boosters import OBJECTIVES, design, fit, problem_features, thread_count
from ckspace.training.dataset import Measurements
from ckspace.training.metrics import Scores, per_problem_efficiency, random_expectation, summarize, tflops_error
from ckspace.training.plan_evaluation import PLANS, BudgetResult, fold_plans, measured_efficiency, summarize_plans

log = logging.getLogger(__name__)


class CrossValidation(BaseModel):
    """Out-of-fold results: scores per selector plus what the plot needs."""

    folds: int
    seed: int
    problems: int
    objective: str  # the winner
    scores: dict[str, Scores]  # model, <objective> for each, single_best_kernel, random, analytical
    efficiency: dict[str, list[float]]  # per problem (fraction), same problem order for every selector
    tflops_median_error: float  # regression's out-of-fold TFLOPS error, percent
    predicted_log_tflops: list[float]  # regression's out-of-fold predictions per measured pair
    measured_log_tflops: list[float]
    plans: dict[str, BudgetResult] = {}  # per budget (as text), when asked for

    def summary(self) -> dict[str, object]:
        """The model's figures at the top level (the ``--format json`` contract), the rest nested."""
        return {
            **self.scores["model"].model_dump(),
            "objective": self.objective,
            "folds": self.folds,
            "seed": self.seed,
            "tflops_median_error": self.tflops_median_error,
            "selectors": {k: v.model_dump() for k, v in self.scores.items()},
            **({"plans": {k: v.model_dump() for k, v in self.plans.items()}} if self.plans else {}),
        }


DEFAULT_FOLDS = 5
MIN_SHAPES = 2
"""The least data a model can be trained and judged on: two distinct problem shapes, each with at
least two kernels measured ok (:data:`~ckspace.training.dataset.MIN_KERNELS_PER_PROBLEM`). Fewer
cannot be cross-validated, and cross-validation picks the objective and gives the card its figures."""


def choose_folds(data: Measurements, requested: int | None) -> int:
    """The folds to use: ``requested``, or :data:`DEFAULT_FOLDS` capped at the number of distinct
    shapes when the user asked for none (a small sweep still trains); a request the data cannot
    meet, or data below :data:`MIN_SHAPES`, is an error in one line."""
    shapes = len(set(data.groups))
    if shapes < MIN_SHAPES:
        raise CkspaceError(
            f"{data.cell.text()}: the data hold {shapes} distinct problem shape with at least 2 "
            f"kernels measured ok; training and evaluation need at least {MIN_SHAPES} "
            "(cross-validation picks the objective)"
        )
    if requested is None:
        return min(DEFAULT_FOLDS, shapes)
    if requested > shapes:
        raise CkspaceError(
            f"--folds {requested}: {data.cell.text()} has only {shapes} distinct problem shapes to "
            f"split; give --folds {shapes} or fewer"
        )
    return requested


def fold_of_groups(groups: tuple[str, ...], folds: int, seed: int) -> np.ndarray:
    """Fold number per problem: distinct groups shuffled by ``seed`` and dealt round-robin."""
    distinct = sorted(set(groups))
    if folds < 2 or folds > len(distinct):
        raise CkspaceError(f"folds must be between 2 and the number of distinct shapes ({len(distinct)}), not {folds}")
    order = np.random.default_rng(seed).permutation(len(distinct))
    fold = {distinct[i]: n % folds for n, i in enumerate(order)}
    return np.asarray([fold[g] for g in groups])


def cross_validation_steps(folds: int) -> int:
    """The fits :func:`cross_validate` makes (one ``progress`` call each): every objective per fold."""
    return folds * len(OBJECTIVES)


def cross_validate(
    data: Measurements,
    folds: int = 5,
    seed: int = 0,
    plan_budgets: tuple[int, ...] = (),
    num_threads: int | None = None,
    progress: Callable[[str], None] | None = None,
) -> CrossValidation:
    """Out-of-fold scores; with ``plan_budgets``, the kernel-set plans of
    :mod:`ckspace.training.plan_evaluation` per budget, from the same out-of-fold predictions.
    ``num_threads``: LightGBM's threads for fitting and predicting (default
    :func:`~ckspace.training.boosters.default_threads`). ``progress`` is called once per fitted
    booster (:func:`cross_validation_steps` in all) with what was fitted, so a caller can show
    progress without this module knowing how; without it (no bar: stderr is not a terminal), each
    fold says a line when it is done (:func:`~ckspace.environment.progress.step_line`), so that a piped
    run of a minute is not silent."""
    started = time.monotonic()
    threads = thread_count(num_threads)
    per_problem = problem_features(data)
    fold = fold_of_groups(data.groups, folds, seed)
    n_problems, n_kernels = data.tflops.shape
    outputs = {obj: np.full((n_problems, n_kernels), np.nan) for obj in OBJECTIVES}
    single = np.full((n_problems, n_kernels), np.nan)
    relative = data.tflops / np.nanmax(data.tflops, axis=1, keepdims=True)
    for f in range(folds):
        train, test = np.flatnonzero(fold != f), np.flatnonzero(fold == f)
        rows = design(data.subset(train), [per_problem[i] for i in train])
        held_out = np.vstack([per_problem[p] for p in test])  # one call: a row's prediction is the same alone
        for objective, out in outputs.items():
            booster = fit(rows, objective, seed, num_threads=threads)
            out[test] = booster.predict(held_out, num_threads=threads).reshape(len(test), n_kernels)
            if progress is not None:
                progress(f"fold {f + 1}/{folds} {objective}")
        single[test] = _mean_efficiency(relative[train])
        if progress is None:
            done = f"folds, {len(train)} training and {len(test)} held-out problems"
            step_line(f"{data.cell.text()}: cross-validation", f + 1, folds, done, started)
    analytical = np.vstack([m[:, FEATURE_NAMES.index(ANALYTICAL_FEATURE)] for m in per_problem])
    random_scores, random_eff = random_expectation(data.tflops)
    scores = {obj: summarize(out, data.tflops) for obj, out in outputs.items()}
    winner = max(OBJECTIVES, key=lambda obj: (round(scores[obj].mean, 2), scores[obj].p10))
    scores = {
        "model": scores[winner],
        **scores,
        "single_best_kernel": summarize(single, data.tflops),
        "random": random_scores,
        "analytical": summarize(analytical, data.tflops),
    }
    efficiency = {
        name: per_problem_efficiency(out, data.tflops).tolist()
        for name, out in (("model", outputs[winner]), ("single_best_kernel", single), ("analytical", analytical))
    }
    efficiency["random"] = random_eff.tolist()
    measured = ~np.isnan(data.tflops)
    predicted, actual = outputs["regression"][measured], np.log(data.tflops[measured])
    plans = {str(k): _plans(k, fold, outputs[winner], outputs["regression"], data.tflops, seed) for k in plan_budgets}
    return CrossValidation(
        folds=folds,
        seed=seed,
        problems=n_problems,
        objective=winner,
        scores=scores,
        efficiency=efficiency,
        tflops_median_error=tflops_error(predicted, actual),
        predicted_log_tflops=predicted.tolist(),
        measured_log_tflops=actual.tolist(),
        plans=plans,
    )


def _mean_efficiency(relative: np.ndarray) -> np.ndarray:
    """Each kernel's mean efficiency over the training problems it was measured on, -inf where it
    was measured on none: the single-best-kernel baseline runs its best kernel everywhere that
    kernel was measured, its next best elsewhere (a 3D kernel never runs a 2D problem)."""
    measured = ~np.isnan(relative)
    counts = measured.sum(axis=0)
    totals = np.where(measured, relative, 0.0).sum(axis=0)
    return np.where(counts > 0, totals / np.maximum(counts, 1), -np.inf)


def _plans(
    budget: int, fold: np.ndarray, ranker: np.ndarray, log_tflops: np.ndarray, tflops: np.ndarray, seed: int
) -> BudgetResult:
    """Every fold's plans of ``budget`` kernels for its held-out problems, measured."""
    efficiency = {name: {"oracle": np.zeros(len(tflops)), "selector": np.zeros(len(tflops))} for name in PLANS}
    for f in range(int(fold.max()) + 1):
        train, test = np.flatnonzero(fold != f), np.flatnonzero(fold == f)
        chosen = fold_plans(budget, ranker[test], log_tflops[test], tflops[test], tflops[train], seed + f)
        for name, kernels in chosen.items():
            oracle, selector = measured_efficiency(kernels, ranker[test], tflops[test])
            efficiency[name]["oracle"][test] = oracle
            efficiency[name]["selector"][test] = selector
        log.info("fold %d, budget %d: %s", f, budget, {n: len(k) for n, k in chosen.items()})
    return summarize_plans(efficiency)
