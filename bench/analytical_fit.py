"""Where the analytical model's fitted constants come from, and whether fitting them overfits.

The analytical performance model (``ckspace/features/performance.py``) has three constants fit once
on the MI355X measurements (the ``mi355x-forward-bf16`` data set): ``memory_latency_cycles``, ``l2_reuse`` and
``epilogue_cycles_per_byte``. This script

1. scores the model with the shipped constants on the measurements (mean, P10 and ties of the
   pick's efficiency, as ``ckspace evaluate`` reports them), beside the old roofline feature that
   was the analytical fallback before it (the baseline, in the same run);
2. refits the three constants by coordinate search (factors 0.25..4 of each in turn, three sweeps,
   objective mean + P10/2) on all problems, printing the fitted values;
3. repeats the fit inside grouped 5-fold cross-validation (fit on four folds, score the fifth),
   so the held-out figures say how much the three constants learned the data rather than the
   physics;
4. states the model's *level*: predicted over measured TFLOPS at its picks, uncalibrated (the
   baseline) and with ``analytical_level`` fitted on four folds and applied to the fifth
   (``ckspace/training/calibration.py``), for several fold seeds, beside the shipped value.

    python3 bench/analytical_fit.py [--data CSV] [--sweeps N]

Nothing it fits is written anywhere: changing a constant is an edit of ``performance.CONSTANTS``
(with its new source), and the shipped model is retrained after it (the constants shape a feature).
"""

from __future__ import annotations

import argparse
import itertools
import time
from pathlib import Path

import numpy as np

from ckspace.features import performance
from ckspace.training import calibration
from ckspace.training.calibration import FITTED, objective_of, scores
from ckspace.training.dataset import load_cells
from ckspace.training.evaluation import fold_of_groups
from ckspace.training.metrics import per_problem_efficiency, summarize
from ckspace.workloads.datasets import DATASETS

DATA = DATASETS["mi355x-forward-bf16"].path
FACTORS = (0.25, 0.5, 0.7, 0.85, 0.95, 1.05, 1.2, 1.4, 2.0, 4.0)


def objective(data, values: dict[str, float], rows: np.ndarray, loss: str = "picks") -> float:
    return objective_of(scores(data, values)[rows], data.tflops[rows], loss)


def fit(
    data,
    rows: np.ndarray,
    sweeps: int,
    start: dict[str, float] | None = None,
    loss: str = "picks",
    within: float | None = None,
) -> dict[str, float]:
    """Coordinate search from ``start`` (default: the shipped constants) on the measured pairs of
    ``rows`` (a pair without a measurement takes no part), maximising ``loss`` (``calibration.LOSSES``);
    with ``within``, no constant leaves [start / within, start x within]."""
    origin = start or {name: performance.CONSTANTS[name].value for name in FITTED}
    best, value = origin, objective(data, origin, rows, loss)
    for _ in range(sweeps):
        for name in FITTED:
            for factor in FACTORS:
                trial = {**best, name: best[name] * factor}
                if within and not origin[name] / within <= trial[name] <= origin[name] * within:
                    continue
                score = objective(data, trial, rows, loss)
                if score > value + 1e-9:
                    best, value = trial, score
    return best


GRID = (0.25, 0.5, 1.0, 2.0, 4.0)
"""Factors of the start a :func:`grid_start` tries for each constant (5^3 points)."""


def grid_start(data, rows: np.ndarray, start: dict[str, float], loss: str = "picks") -> dict[str, float]:
    """The best point of a coarse grid around ``start`` (:data:`GRID` on every constant at once): the
    coordinate search moves one constant at a time, so from a start far off it stops at the first
    local optimum on its way, which a joint step of two constants would have left."""
    best, value = start, -np.inf
    for factors in itertools.product(GRID, repeat=len(FITTED)):
        trial = {name: start[name] * f for name, f in zip(FITTED, factors, strict=True)}
        score = objective(data, trial, rows, loss)
        if score > value + 1e-9:
            best, value = trial, score
    return best


def line(label: str, s) -> str:
    return f"{label:<34} mean {s.mean:6.2f} %  P10 {s.p10:6.2f} %  top-1 {s.top1:5.1f} %  ties {_ties(s):5.1f} %"


def _ties(s) -> float:
    return getattr(s, "ties", float("nan"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--sweeps", type=int, default=3)
    args = parser.parse_args()
    if not args.data.is_file():
        raise SystemExit(f"{args.data}: no such file")
    data = load_cells([str(args.data)], None, None, None)[0]
    shipped = {name: performance.CONSTANTS[name].value for name in FITTED}
    everything = np.arange(len(data.problems))
    print(f"{data.cell.text()}: {len(data.problems)} problems x {len(data.configs)} kernels")
    print(line("roofline (baseline, old fallback)", summarize(scores(data, {}, "log2_roofline_tflops"), data.tflops)))
    print(line("analytical, shipped constants", summarize(scores(data, shipped), data.tflops)))
    print("shipped: " + ", ".join(f"{k} = {v:g}" for k, v in shipped.items()))
    start = time.perf_counter()
    refit = fit(data, everything, args.sweeps)
    print(
        f"refit on every problem ({time.perf_counter() - start:.1f} s): "
        + ", ".join(f"{k} = {v:g}" for k, v in refit.items())
    )
    print(line("analytical, refit", summarize(scores(data, refit), data.tflops)))
    fold = fold_of_groups(data.groups, 5, 0)
    held_out = np.zeros(len(data.problems))
    for f in range(5):
        train, test = np.flatnonzero(fold != f), np.flatnonzero(fold == f)
        values = fit(data, train, args.sweeps)
        held_out[test] = per_problem_efficiency(scores(data, values)[test], data.tflops[test])
        print(f"  fold {f}: " + ", ".join(f"{k} = {v:g}" for k, v in values.items()))
    pct = 100.0 * held_out
    print(
        f"{'analytical, fit inside 5-fold CV':<34} mean {pct.mean():6.2f} %  P10 {np.percentile(pct, 10):6.2f} % "
        "(held-out problems only)"
    )
    level(data, scores(data, shipped))


def level(data, log2_tflops: np.ndarray) -> None:
    """The model's level at its picks: uncalibrated, then calibrated inside grouped 5-fold CV."""
    shipped = performance.constant("analytical_level")
    print("uncalibrated:", calibration.figures(calibration.ratios(log2_tflops, data.tflops)).text())
    fitted = calibration.fit_level(log2_tflops, data.tflops)
    print(f"analytical_level fit on every problem: {fitted:.4f} (shipped {shipped})")
    for seed in (0, 1, 2):
        ratios, levels = calibration.held_out_ratios(log2_tflops, data.tflops, data.groups, 5, seed)
        folds = ", ".join(f"{value:.3f}" for value in levels)
        print(f"held out, fold seed {seed} (levels {folds}):", calibration.figures(ratios).text())


if __name__ == "__main__":
    main()
