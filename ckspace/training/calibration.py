"""Calibrating the analytical model to a GPU: its level, and its fitted constants from 60 pairs.

**The level.** The model counts the cycles of ideal hardware at its peak engine clock; a real kernel
runs slower (the clock under matrix load, instruction overheads the model leaves out), by a factor
that barely depends on the kernel: its *ranking* is good while its numbers are several times the
measured ones. Ranking needs no level, but a user comparing cells, or the model's numbers with a
trained model's, does. The level is fitted where it is read: at the model's pick of each problem
(the kernel whose TFLOPS ``select`` shows), as the median of measured / modelled TFLOPS -- the
median, so a few problems the model misjudges do not move it. It is one multiplicative constant, so
it never changes a pick (``performance.CONSTANTS['analytical_level']``).

**The fitted constants.** Three constants of the model (:data:`FITTED`: memory latency, L2 reuse,
epilogue cost per byte) were fitted on one GPU's measurements (:data:`SHIPPED_FROM`); another GPU
(or another clock, driver, CK) has its own. They are fitted from few measurements by asking the
model which pairs tell plausible values apart:

* a :class:`PlausibleGrid` scores every (problem, kernel) under every plausible value of the three
  (the start times 2^(i / ``per_octave``), within a factor of :data:`SPAN` each way) -- a
  computation that needs no measurement;
* :func:`sequential_pairs` chooses at most 60 pairs in rounds: a spread of problems first
  (:func:`design_pairs`), then where the points that still fit the pairs so far pick differently
  (:func:`pick_split`: the version space's disagreement);
* :func:`fit_constants` takes the grid point whose scores fit those pairs best by
  :func:`centred_log_error`, a loss every measured pair informs (a pick's efficiency among a
  problem's few measured kernels moves only when a pick changes).

On the MI355X data, from a start about a factor of 2 off, these 60 pairs recover the every-pair
fit's held-out mean and P10 on average over 20 fold seeds (``tests/test_calibration.py``,
docs/results.md). ``ckspace learn`` measures them first (:mod:`ckspace.training.learning`) and its
model card carries the result; ``bench/calibration_designs.py`` compares other designs
(:func:`disagreement_pairs` is one) and searches (``bench/analytical_fit.py``).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence

import numpy as np
from pydantic import BaseModel

from ckspace.features import matrix as features
from ckspace.features import performance
from ckspace.features.hardware import hardware_facts
from ckspace.features.matrix import ConfigTable, feature_column
from ckspace.training.evaluation import fold_of_groups
from ckspace.training.metrics import per_problem_efficiency
from ckspace.workloads.problem import ConvProblem


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


FITTED = ("memory_latency_cycles", "l2_reuse", "epilogue_cycles_per_byte")
"""The constants a GPU's measurements fit (names of ``performance.CONSTANTS``)."""
SHIPPED_FROM = "gfx950"
"""The arch whose GPU (the MI355X of the shipped measurements) the shipped constants were fitted on,
from 6,930 pairs: there 60 pairs tell nothing they do not (``ckspace learn`` calibrates elsewhere by
default; docs/results.md has the figures)."""
DESIGN_PAIRS = 60
"""The most pairs :func:`sequential_pairs` chooses (fewer once the constants agree): the target's budget."""
SPAN = 4.0
"""How far a :class:`PlausibleGrid`'s constants go from the start, each way (a factor)."""
CHUNK = 256
"""Grid points a :meth:`PlausibleGrid.objectives` scores at once (bounds the memory: 256 points of
185 problems x 30 kernels are 11 MB an array)."""
SLACK = 0.5
"""Points of the mixed objective a point of the version space may fall short of the best by."""
LOSSES = ("picks", "centred", "mixed", "level")
"""What a fit maximises: ``picks``, mean + P10/2 of the pick's efficiency among each problem's
measured kernels (every pair measured: the figures the model is judged by); ``centred``, minus
:func:`centred_log_error` (every pair informs it, where the picks among
a problem's two or three measured kernels move only when one changes); ``mixed``, the picks
objective less :data:`CENTRED_WEIGHT` times the centred error (few pairs: the picks decide, the
error breaks their ties and keeps a search off the flats a few picks leave); ``level``, as
``mixed`` with the error about one level for all problems instead of each problem's own."""
CENTRED_WEIGHT = 50.0
"""Points of the picks objective one unit of mean squared centred log error is worth in ``mixed``:
an error of 0.02 (residuals of about 14 % within a problem) weighs a point."""

Pairs = list[tuple[int, int]]


def scores(data, values: dict[str, float], column: str = features.ANALYTICAL_FEATURE) -> np.ndarray:
    """The model's log2 TFLOPS of every (problem, kernel) of ``data`` with the constants ``values``
    (measured on the data's GPU: its hardware facts carry them, ``performance.calibrated_facts``)."""
    hw = performance.calibrated_facts(hardware_facts(data.arch), values)
    table = ConfigTable.build(data.configs, hw)
    return feature_column(column, data.problems, data.variant, data.dtype, table, hw)


def objective_of(modelled: np.ndarray, measured: np.ndarray, loss: str = "picks") -> float | np.ndarray:
    """The ``loss`` objective (:data:`LOSSES`, higher is better) of the model's log2 TFLOPS
    ``modelled`` against the ``measured`` pairs (NaN: not measured); ``modelled`` may have leading
    axes (one model per point of a grid: one objective each)."""
    if loss == "centred":
        return -centred_log_error(modelled, measured)
    efficiency = 100.0 * per_problem_efficiency(modelled, measured)
    value = efficiency.mean(axis=-1) + 0.5 * np.percentile(efficiency, 10, axis=-1)
    error = {"mixed": centred_log_error, "level": _one_level_error}.get(loss)
    return value - CENTRED_WEIGHT * error(modelled, measured) if error else value


def _one_level_error(log2_tflops: np.ndarray, tflops: np.ndarray) -> float | np.ndarray:
    """The mean squared log error about one level for every pair, each problem's level not free:
    how fast small problems run beside big ones is what latency and bandwidth decide."""
    residual = np.log(tflops) - np.log(2.0) * log2_tflops
    centred = residual - np.nanmean(residual, axis=(-2, -1), keepdims=True)
    return np.nanmean(centred**2, axis=(-2, -1))


class PlausibleGrid:
    """The model's scores of every (problem, kernel) of ``data`` under every plausible constants (each
    of :data:`FITTED` the start times 2^(i / ``per_octave``), within a factor of :data:`SPAN`: 9^3
    points at 2 per octave, 17^3 at 4): one computation per data set (the model needs no
    measurement), which a design and a fit read rows of. ``runs``: which pairs can run at all (a
    GPU measurer's support checks); the others score -inf, so no design asks them and no point
    picks them."""

    def __init__(self, data, start: dict[str, float], per_octave: int, runs: np.ndarray | None = None) -> None:
        steps = _steps(per_octave)
        self.points = [
            {name: start[name] * f for name, f in zip(FITTED, factors, strict=True)}
            for factors in itertools.product(steps, repeat=len(FITTED))
        ]
        self.centre = len(self.points) // 2  # the start itself
        self.scores = np.stack([scores(data, values) for values in self.points])
        if runs is not None:
            self.scores[:, ~runs] = -np.inf
        self.picks = np.argmax(self.scores, axis=2)

    def objectives(self, rows: np.ndarray, measured: np.ndarray, loss: str) -> np.ndarray:
        """Each point's ``loss`` objective of its scores of ``rows`` against ``measured`` (NaN: not measured)."""
        chunks = np.array_split(np.arange(len(self.points)), max(1, len(self.points) // CHUNK))
        return np.concatenate([objective_of(self.scores[chunk][:, rows], measured, loss) for chunk in chunks])

    def best(self, rows: np.ndarray, measured: np.ndarray, loss: str) -> dict[str, float]:
        """The point whose scores of ``rows`` best fit ``measured`` under ``loss`` (the first on a tie)."""
        return self.points[int(np.argmax(self.objectives(rows, measured, loss)))]


def _steps(per_octave: int) -> np.ndarray:
    """The factors of the start a grid takes for each constant: 2^(i / per_octave) within SPAN."""
    reach = round(np.log2(SPAN) * per_octave)
    return 2.0 ** (np.arange(-reach, reach + 1) / per_octave)


def grid_size(per_octave: int) -> int:
    """The points of a :class:`PlausibleGrid` of ``per_octave``, known before it is built."""
    return len(_steps(per_octave)) ** len(FITTED)


GRID_SCORES = 2**26
"""The most scores a calibration's grid holds (constant values x problems x kernels: 512 MB of
float64): a larger workload is designed on as many of its problems as fit, spread over its FLOP
counts (the design measures about 30 problems, spread over the same)."""


def design_problems(problems: Sequence[ConvProblem], kernels: int, points: int) -> np.ndarray:
    """The workload's problems (indices, in order) the calibration designs on: all of them, or as
    many as :data:`GRID_SCORES` allows at evenly spaced FLOP ranks."""
    cap = max(DESIGN_PAIRS, GRID_SCORES // (points * max(1, kernels)))
    if len(problems) <= cap:
        return np.arange(len(problems))
    order = np.argsort([p.flops for p in problems], kind="stable")
    return np.sort(order[np.round(np.linspace(0, len(order) - 1, cap)).astype(int)])


def sequential_pairs(
    grid: PlausibleGrid,
    rows: np.ndarray,
    flops: Sequence[float],
    measure: Callable[[Pairs], np.ndarray],
    batch: int = 2,
    max_kernels: int | None = None,
) -> Pairs:
    """:data:`DESIGN_PAIRS` pairs chosen in rounds, where the constants that still fit disagree;
    ``(p, k)`` with p a position in ``rows`` (the grid's problems a design may take, ``flops`` theirs).
    First the model's top 3 kernels (at the grid's start) of 10 problems spread over the FLOP counts;
    then, until 60 pairs, each round takes the grid points whose mixed objective on the pairs so far
    is within :data:`SLACK` of the best (the version space), and adds the top 3 kernels by their
    votes of the ``batch`` problems not measured yet whose picks split those points most (entropy).
    ``max_kernels``: the most distinct kernels the pairs may take (building is the cost on a GPU):
    a pair of another kernel is passed over once that many are taken.

    ``measure(pairs)`` measures the pairs (those it has not measured before) and returns the
    measurements of exactly those pairs: the rows of their problems (``np.unique`` order), NaN
    elsewhere and where a pair has no measurement. The pairs chosen depend only on those answers, so
    a design rerun over recorded answers chooses the same pairs."""
    kernels = grid.scores.shape[2]
    taken_kernels: set[int] = set()

    def admit(k: int) -> bool:
        if max_kernels is not None and k not in taken_kernels and len(taken_kernels) >= max_kernels:
            return False
        taken_kernels.add(k)
        return True

    start = grid.scores[grid.centre][rows]
    first = design_pairs(start, np.asarray(flops), problems=10)
    pairs = [(p, k) for p, k in first if np.isfinite(start[p, k]) and admit(k)]  # fewer than 3 may run
    while len(pairs) < DESIGN_PAIRS:
        values = measure(pairs)
        measured = np.unique([p for p, _ in pairs])
        answered = ~np.all(np.isnan(values), axis=1)  # a problem whose pairs all failed tells nothing
        if not answered.any():
            break
        fits = grid.objectives(rows[measured[answered]], values[answered], "mixed")
        votes, entropy = pick_split(grid.picks[fits >= fits.max() - SLACK][:, rows], kernels)
        if max_kernels is not None and len(taken_kernels) >= max_kernels:
            votes[:, sorted(set(range(kernels)) - taken_kernels)] = 0
        taken = set(measured.tolist())
        split = [p for p in range(len(rows)) if p not in taken and np.count_nonzero(votes[p]) > 1]
        if not split:
            break
        for p in sorted(split, key=lambda q: -entropy[q])[:batch]:  # votes go to pairs that run
            order = np.argsort(-votes[p], kind="stable")[: np.count_nonzero(votes[p])]
            chosen = [int(k) for k in order if admit(int(k))][: min(3, DESIGN_PAIRS - len(pairs))]
            pairs += [(p, k) for k in chosen]
    return pairs


def fit_constants(grid: PlausibleGrid, rows: np.ndarray, pairs: Pairs, measured_values: np.ndarray) -> dict[str, float]:
    """The grid point that fits ``pairs`` best by the centred log error; ``measured_values`` as
    :func:`sequential_pairs`' ``measure`` returns them (the rows of the pairs' problems). The start
    (the grid's centre) where it fits as well as the best: pairs that tell nothing (no problem with
    two answers: the error is 0 everywhere) leave the constants where they were, not at a corner."""
    if not pairs:
        return grid.points[grid.centre]
    measured = np.unique([p for p, _ in pairs])
    fits = grid.objectives(rows[measured], measured_values, "centred")  # problems of < 2 answers add nothing
    best = grid.centre if fits[grid.centre] >= fits.max() else int(np.argmax(fits))
    return grid.points[best]
