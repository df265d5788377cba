"""Selection quality against the measured per-problem oracle.

Efficiency of a pick = its measured TFLOPS / the best measured TFLOPS of the problem. Top-1 is the
share of problems where the pick is the oracle; top-5 comes in both definitions the issue asks
for: the oracle within the selector's five best-scored kernels (``top5``) and the pick within the
five best measured kernels (``top5_pick_in_oracle_top5``). Only measured kernels take part.

``ties`` is the share of problems where the selector's best score among the measured kernels is
held by two or more of them (exact equality): there the pick is decided by kernel order, not by
the selector, so a high tie rate makes the other figures partly an accident of that order (the
old roofline score, which priced many kernels alike, tied on two thirds of the problems).
"""

from __future__ import annotations

import numpy as np
from pydantic import BaseModel


class Scores(BaseModel):
    """Summary of one selector over a set of problems (efficiencies and rates in percent)."""

    problems: int
    mean: float
    median: float
    p10: float
    min: float
    top1: float
    top5: float
    top5_pick_in_oracle_top5: float
    ties: float
    """Percent of problems whose best score is shared by two or more measured kernels. Required:
    figures written before it existed lack it, and 0.0 would claim "no ties" for them (model cards
    keep their figures as plain dicts, so old cards still load)."""

    def row(self, label: str) -> str:
        return (
            f"{label:<22} {self.mean:7.2f} {self.median:7.2f} {self.p10:7.2f} {self.min:7.2f} "
            f"{self.top1:6.1f} {self.top5:6.1f} {self.top5_pick_in_oracle_top5:6.1f} {self.ties:6.1f}"
        )


HEADER = (
    f"{'selector':<22} {'mean':>7} {'median':>7} {'P10':>7} {'min':>7} {'top1':>6} {'top5':>6} {'top5b':>6} {'ties':>6}"
)
LEGEND = (
    "top5 = measured best within the selector's top 5; top5b = the pick within the measured top 5; "
    "ties = problems whose best score two or more kernels share (kernel order picks there)"
)


def table(scores: dict[str, Scores], objective: str) -> str:
    """The legend, :data:`HEADER` and a row per selector, as train and evaluate print them. The model
    is the winning objective's booster: its row is labelled ``model=<objective>`` and that objective
    has no row of its own (it would repeat the model's figures)."""
    rows = [scores["model"].row(f"model={objective}")]
    rows += [s.row(name) for name, s in scores.items() if name not in ("model", objective)]
    return "\n".join([LEGEND, HEADER, *rows]) + "\n"


def _top(values: np.ndarray, k: int) -> np.ndarray:
    """Indices of the k largest finite values (NaN last)."""
    order = np.argsort(-np.where(np.isnan(values), -np.inf, values), kind="stable")
    return order[:k]


def per_problem_efficiency(scores: np.ndarray, tflops: np.ndarray) -> np.ndarray:
    """Efficiency of the best-scored measured kernel, per problem (fraction; the first of tied best
    scores). ``scores`` may have leading axes (``[..., problem, kernel]``, e.g. one selector per
    constant value of a grid): the result has them too, each selector judged on the same ``tflops``."""
    masked = np.where(np.isnan(tflops), -np.inf, scores)
    pick = np.argmax(masked, axis=-1)
    chosen = np.take_along_axis(np.broadcast_to(tflops, masked.shape), pick[..., None], axis=-1)[..., 0]
    return chosen / np.nanmax(tflops, axis=1)


def tied_best(scores: np.ndarray, measured: np.ndarray) -> bool:
    """Whether the best of ``scores`` over the ``measured`` kernels is held by two or more of them
    (exact equality: a tie is what makes the pick depend on kernel order, however close others are)."""
    values = scores[measured]
    return bool(np.count_nonzero(values == values.max()) >= 2)


def summarize(scores: np.ndarray, tflops: np.ndarray) -> Scores:
    """Scores of a selector whose score of kernel k on problem p is ``scores[p, k]`` (higher wins)."""
    eff = per_problem_efficiency(scores, tflops)
    top1 = top5 = top5b = ties = 0
    for p in range(len(tflops)):
        measured = ~np.isnan(tflops[p])
        masked = np.where(measured, scores[p], np.nan)
        pick = int(_top(masked, 1)[0])
        oracle = int(np.nanargmax(tflops[p]))
        top1 += pick == oracle
        top5 += oracle in _top(masked, 5)
        top5b += pick in _top(tflops[p], 5)
        ties += tied_best(scores[p], measured)
    n = len(eff)
    return _scores(eff, 100.0 * top1 / n, 100.0 * top5 / n, 100.0 * top5b / n, 100.0 * ties / n)


def _scores(eff: np.ndarray, top1: float, top5: float, top5b: float, ties: float) -> Scores:
    pct = 100.0 * eff
    return Scores(
        problems=len(eff),
        mean=float(pct.mean()),
        median=float(np.median(pct)),
        p10=float(np.percentile(pct, 10)),
        min=float(pct.min()),
        top1=top1,
        top5=top5,
        top5_pick_in_oracle_top5=top5b,
        ties=ties,
    )


def random_expectation(tflops: np.ndarray) -> tuple[Scores, np.ndarray]:
    """The expected scores of a uniformly random pick among the measured kernels (no fitting).

    Its tie rate is 0.0: a uniformly random pick scores no kernel above another, it draws one, so
    kernel order never decides for it (its figures are already expectations over every pick)."""
    eff = np.nanmean(tflops / np.nanmax(tflops, axis=1, keepdims=True), axis=1)
    counts = np.sum(~np.isnan(tflops), axis=1)
    top1 = float(np.mean(1.0 / counts)) * 100.0
    top5 = float(np.mean(np.minimum(5, counts) / counts)) * 100.0
    return _scores(eff, top1, top5, top5, 0.0), eff


def tflops_error(predicted_log: np.ndarray, measured_log: np.ndarray) -> float:
    """Median absolute relative error (percent) of TFLOPS predictions given as natural logs."""
    return float(np.median(np.abs(np.exp(predicted_log - measured_log) - 1.0)) * 100.0)
