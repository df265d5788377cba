"""Kernel-set plans judged on measurements, inside the grouped cross-validation.

Per fold and budget K, four plans of K kernels for the held-out problems (the workload):

* ``plan``: chosen by :func:`~ckspace.planning.plan.solve_plan` from the out-of-fold predictions,
  exactly as ``ckspace plan`` chooses: the ranker's scores order each problem's kernels, the
  regressor's predicted TFLOPS as the selector shows them (:func:`~ckspace.planning.plan.shown_tflops`,
  over the problem's best) value the pick;
* ``hindsight``: chosen the same way from the measurements themselves (order and value measured):
  the ceiling no prediction can beat;
* ``frequent_winners``: the K kernels that were a training problem's fastest most often;
* ``random``: K kernels drawn with the fold's seed.

Each plan is then measured: ``plan_oracle`` is the best measured kernel inside the plan over the
best measured overall, ``plan_selector`` the measured TFLOPS of the selector's pick inside the
plan (its highest out-of-fold score) over the best overall. Only measured kernels take part.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import numpy as np
from pydantic import BaseModel

from ckspace.planning.plan import PlanInstance, shown_tflops, solve_plan

log = logging.getLogger(__name__)

PLANS = ("plan", "hindsight", "frequent_winners", "random")
PLAN_TIME_LIMIT = 20.0


class PlanFigures(BaseModel):
    """Mean and P10 of per-problem efficiency, percent."""

    mean: float
    p10: float


class BudgetResult(BaseModel):
    """One budget: the plan's oracle-inside-plan and selector-inside-plan efficiencies, and the
    same two (``plan_oracle``, ``plan_selector``) for each baseline."""

    plan_oracle: PlanFigures
    plan_selector: PlanFigures
    hindsight: dict[str, PlanFigures]
    frequent_winners: dict[str, PlanFigures]
    random: dict[str, PlanFigures]

    def figures(self, name: str) -> dict[str, PlanFigures]:
        """``plan_oracle`` and ``plan_selector`` of one of :data:`PLANS`."""
        if name == "plan":
            return {"plan_oracle": self.plan_oracle, "plan_selector": self.plan_selector}
        return getattr(self, name)


def _instance(order_scores: np.ndarray, values: np.ndarray, measured: np.ndarray, capped: bool) -> PlanInstance:
    """Per problem: measured kernels ordered by ``order_scores`` (best first), valued by ``values``
    normalised to the problem's best."""
    order, value = [], []
    for p in range(len(values)):
        kernels = np.flatnonzero(measured[p])
        ranked = kernels[np.argsort(-order_scores[p, kernels], kind="stable")]
        order.append(ranked)
        shown = shown_tflops(values[p, ranked]) if capped else values[p, ranked]
        value.append(shown / shown.max())
    return PlanInstance(values.shape[1], tuple(order), tuple(value), np.ones(len(values)))


def measured_efficiency(chosen: Sequence[int], scores: np.ndarray, tflops: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(best measured inside ``chosen``, the best-scored measured kernel inside ``chosen``), each
    over the best measured overall, per problem; 0 where ``chosen`` holds no measured kernel."""
    inside = np.zeros(tflops.shape[1], dtype=bool)
    inside[list(chosen)] = True
    best = np.nanmax(tflops, axis=1)
    oracle, selector = np.zeros(len(tflops)), np.zeros(len(tflops))
    for p in range(len(tflops)):
        usable = inside & ~np.isnan(tflops[p])
        if usable.any():
            oracle[p] = np.nanmax(np.where(usable, tflops[p], np.nan)) / best[p]
            pick = int(np.argmax(np.where(usable, scores[p], -np.inf)))
            selector[p] = tflops[p, pick] / best[p]
    return oracle, selector


def fold_plans(
    budget: int, ranker: np.ndarray, log_tflops: np.ndarray, tflops: np.ndarray, train_tflops: np.ndarray, seed: int
) -> dict[str, tuple[int, ...]]:
    """The four plans of ``budget`` kernels for the held-out problems of one fold."""
    measured = ~np.isnan(tflops)
    kernels = tflops.shape[1]
    budget = min(budget, kernels)
    predicted = _instance(ranker, np.exp(log_tflops), measured, capped=True)
    hindsight = _instance(np.nan_to_num(tflops, nan=-np.inf), np.nan_to_num(tflops), measured, capped=False)
    winners = np.bincount(np.nanargmax(train_tflops, axis=1), minlength=kernels)
    frequent = tuple(sorted(np.argsort(-winners, kind="stable")[:budget].tolist()))
    drawn = tuple(sorted(np.random.default_rng(seed).choice(kernels, budget, replace=False).tolist()))
    return {
        "plan": solve_plan(predicted, budget=budget, top=None, time_limit=PLAN_TIME_LIMIT, seed=seed).chosen,
        "hindsight": solve_plan(hindsight, budget=budget, top=None, time_limit=PLAN_TIME_LIMIT, seed=seed).chosen,
        "frequent_winners": frequent,
        "random": drawn,
    }


def _figures(eff: np.ndarray) -> PlanFigures:
    pct = 100.0 * eff
    return PlanFigures(mean=float(pct.mean()), p10=float(np.percentile(pct, 10)))


def summarize_plans(efficiency: dict[str, dict[str, np.ndarray]]) -> BudgetResult:
    """``efficiency[plan]["oracle" | "selector"]`` per problem (all folds) -> the budget's figures."""

    def both(name: str) -> dict[str, PlanFigures]:
        return {
            "plan_oracle": _figures(efficiency[name]["oracle"]),
            "plan_selector": _figures(efficiency[name]["selector"]),
        }

    return BudgetResult(**both("plan"), **{name: both(name) for name in PLANS[1:]})
