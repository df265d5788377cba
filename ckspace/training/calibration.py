"""The analytical model's level: its predicted TFLOPS against measured ones, and the constant that
calibrates them.

The model counts the cycles of ideal hardware at its peak engine clock; a real kernel runs slower
(the clock under matrix load, instruction overheads the model leaves out), by a factor that barely
depends on the kernel: its *ranking* is good while its numbers are several times the measured
ones. Ranking needs no level, but a user comparing cells, or the model's numbers with a trained
model's, does. The level is fitted where it is read: at the model's pick of each problem (the
kernel whose TFLOPS ``select`` shows), as the median of measured / modelled TFLOPS -- the median,
so a few problems the model misjudges do not move it. It is one multiplicative constant, so it
never changes a pick (``performance.CONSTANTS['analytical_level']``).

The model's *fitted* constants (``bench/analytical_fit.py`` searches them) can be fitted from few
measurements: :func:`disagreement_pairs` chooses which (the kernels of problems spread over the
workload that plausible constants pick differently: the pairs whose measurement tells those constants
apart; :func:`design_pairs` is the simpler design of the model's close contenders at the start) and
:func:`centred_log_error` is a loss that every measured pair informs, where a pick's efficiency among
a problem's few measured kernels moves only when a pick changes.
"""

from __future__ import annotations

import numpy as np
from pydantic import BaseModel

from ckspace.training.evaluation import fold_of_groups


class LevelFigures(BaseModel):
    """Predicted over measured TFLOPS at the picks: the median and the spread (P10, P90)."""

    problems: int
    median: float
    p10: float
    p90: float

    def text(self) -> str:
        spread = f"median {self.median:.2f}, P10 {self.p10:.2f}, P90 {self.p90:.2f}"
        return f"predicted / measured TFLOPS at the picks: {spread} ({self.problems} problems)"


def picks(scores: np.ndarray, tflops: np.ndarray) -> np.ndarray:
    """Per problem, the best-scored kernel among the measured ones (``select``'s pick among them)."""
    return np.argmax(np.where(np.isnan(tflops), -np.inf, scores), axis=1)


def ratios(log2_tflops: np.ndarray, tflops: np.ndarray, level: float = 1.0) -> np.ndarray:
    """Predicted (``level`` x 2^score) over measured TFLOPS of each problem's pick."""
    rows = np.arange(len(tflops))
    chosen = picks(log2_tflops, tflops)
    return level * np.exp2(log2_tflops[rows, chosen]) / tflops[rows, chosen]


def fit_level(log2_tflops: np.ndarray, tflops: np.ndarray) -> float:
    """The level that centres the picks' ratios on 1: the median of measured over modelled."""
    return float(np.exp(-np.median(np.log(ratios(log2_tflops, tflops)))))


def design_pairs(log2_tflops: np.ndarray, flops: np.ndarray, problems: int = 20, per_problem: int = 3) -> list:
    """(problem, kernel) pairs to fit the model's constants on: the model's ``per_problem`` best-scored
    kernels of ``problems`` problems spread evenly over the FLOP counts (sorted, evenly spaced
    ranks). A constant matters to a pick where it reorders a problem's close contenders, and which
    constant binds (latency, bandwidth, epilogue) changes with the problem's size, so the pairs are
    the contenders, over the whole range of sizes; the kernels follow from the problems (each
    problem's contenders), so the families the model thinks matter are the ones measured."""
    order = np.argsort(flops, kind="stable")
    ranks = np.round(np.linspace(0, len(order) - 1, min(problems, len(order)))).astype(int)
    chosen = list(dict.fromkeys(order[ranks].tolist()))
    top = np.argsort(-log2_tflops, axis=1, kind="stable")[:, :per_problem]
    return [(p, int(k)) for p in chosen for k in top[p]]


def disagreement_pairs(
    grid_log2_tflops: np.ndarray, flops: np.ndarray, problems: int = 30, per_problem: int = 2
) -> list[tuple[int, int]]:
    """(problem, kernel) pairs where plausible constants disagree. ``grid_log2_tflops[g, p, k]`` is
    the model's score of kernel k on problem p under the g-th of a grid of constant values (every
    value the constants might take on this GPU). Each problem's picks over the grid say how split the
    plausible constants are about it (the entropy of the picks): a problem they all agree on tells
    nothing, one they split on is where a measurement moves the fit. One problem of each of
    ``problems`` bins of the FLOP counts (which constant binds changes with size), the most split in
    its bin (the first on a tie), with its ``per_problem`` most-picked kernels (then the best by mean
    score over the grid): the measured pair then decides between the constants that pick each."""
    votes, entropy = pick_split(np.argmax(grid_log2_tflops, axis=2), grid_log2_tflops.shape[2])
    mean_score = grid_log2_tflops.mean(axis=0)
    pairs = []
    for bin_ in np.array_split(np.argsort(flops, kind="stable"), min(problems, len(flops))):
        p = int(bin_[np.argmax(entropy[bin_])])
        order = np.lexsort((-mean_score[p], -votes[p]))
        pairs += [(p, int(k)) for k in order[:per_problem]]
    return pairs


def pick_split(grid_picks: np.ndarray, kernels: int) -> tuple[np.ndarray, np.ndarray]:
    """How split a grid of constant values is about each problem: ``grid_picks[g, p]`` is the kernel
    the g-th point picks for problem p; per problem, each kernel's votes and the entropy of the
    picks (0 when every point agrees)."""
    votes = np.stack([np.bincount(grid_picks[:, p], minlength=kernels) for p in range(grid_picks.shape[1])])
    return votes, np.array([_entropy(row[row > 0] / len(grid_picks)) for row in votes])


def _entropy(shares: np.ndarray) -> float:
    return float(-np.sum(shares * np.log(shares)))


def centred_log_error(log2_tflops: np.ndarray, tflops: np.ndarray) -> float | np.ndarray:
    """The mean squared error of the model's natural-log TFLOPS against the measured pairs', each
    problem's residuals less their mean (its level is no error: only the order within a problem
    matters to a pick). NaN pairs take no part; a problem with one measured pair adds nothing.
    ``log2_tflops`` may have leading axes (``[..., problem, kernel]``, one model per constant value
    of a grid): then one error per model, as an array."""
    rows = np.count_nonzero(~np.isnan(tflops), axis=1) >= 2
    if not rows.any():
        return np.zeros(log2_tflops.shape[:-2]) if log2_tflops.ndim > 2 else 0.0
    residual = np.log(tflops[rows]) - np.log(2.0) * log2_tflops[..., rows, :]
    centred = residual - np.nanmean(residual, axis=-1, keepdims=True)
    error = np.nanmean(centred**2, axis=(-2, -1))
    return error if log2_tflops.ndim > 2 else float(error)


def figures(values: np.ndarray) -> LevelFigures:
    return LevelFigures(
        problems=len(values),
        median=float(np.median(values)),
        p10=float(np.percentile(values, 10)),
        p90=float(np.percentile(values, 90)),
    )


def held_out_ratios(
    log2_tflops: np.ndarray, tflops: np.ndarray, groups: tuple[str, ...], folds: int = 5, seed: int = 0
) -> tuple[np.ndarray, list[float]]:
    """Each problem's ratio under the level fitted on the other folds (grouped by shape, as
    ``evaluate`` splits), and the folds' levels: how well one constant carries to unseen problems."""
    fold = fold_of_groups(groups, folds, seed)
    out = np.empty(len(tflops))
    levels = []
    for f in range(folds):
        train, test = fold != f, fold == f
        level = fit_level(log2_tflops[train], tflops[train])
        levels.append(level)
        out[test] = ratios(log2_tflops[test], tflops[test], level)
    return out, levels
