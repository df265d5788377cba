"""The learning loop against random sampling at equal pairs, on problems neither saw.

The recorded MI355X data (``mi355x-forward-bf16``) are split as cross-validation splits them
(:func:`~ckspace.training.evaluation.fold_of_groups`, fold 0 held out). The loop learns on the other
folds' shapes by replaying the recording; the baseline times as many pairs drawn uniformly from
the same problems' recorded pairs; each trains its model as ``ckspace train`` does, and both pick
among the recording's kernels for the held-out problems through the selector, scored against the
held-out measurements. Run as a script for the figures at several budgets and seeds::

    python tests/learning_study.py --seeds 0 1 2 --fractions 0.05 0.1 0.2
"""

from __future__ import annotations

import argparse
import csv
import tempfile
from pathlib import Path

import numpy as np

from ckspace.core.datasets import DATASETS
from ckspace.core.measurement import problem_cells
from ckspace.features.matrix import ConfigTable
from ckspace.planning.workload import read_workload
from ckspace.run.results import ResultsFile
from ckspace.select.selector import Selector
from ckspace.training.dataset import Measurements, load_measurements
from ckspace.training.evaluation import fold_of_groups
from ckspace.training.learning import RECORD_FILE, Budget, LearnReport, learn
from ckspace.training.measurer import ReplayMeasurer
from ckspace.training.metrics import Scores, summarize
from ckspace.training.trainer import train_model

RECORDING = DATASETS["mi355x-forward-bf16"].path
FOLDS = 5


def recording() -> Measurements:
    return load_measurements([RECORDING], "gfx950", "forward", "bf16")


def split(data: Measurements, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Training and held-out problem indices: fold 0 of the grouped split held out."""
    fold = fold_of_groups(data.groups, FOLDS, seed)
    return np.flatnonzero(fold != 0), np.flatnonzero(fold == 0)


def write_problems(data: Measurements, index: np.ndarray, path: Path) -> Path:
    """The problems at ``index`` as a problems CSV (the columns a measurement row gives them)."""
    rows = [problem_cells(data.problems[i]) for i in index]
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return path


def run_loop(
    problems_csv: Path, budget: Budget, seed: int, out: Path, measurer: ReplayMeasurer | None = None
) -> LearnReport:
    """``ckspace learn``'s loop, called as the command calls it."""
    measurer = measurer or ReplayMeasurer.load(RECORDING, "gfx950", "forward", "bf16")
    workload = read_workload(problems_csv, measurer.kernels()[0].variant)
    out.mkdir(parents=True, exist_ok=True)
    path = out / RECORD_FILE
    record = ResultsFile.open(path, path.exists(), workload.problems)
    try:
        return learn(measurer, record, workload.problems, workload.weights, budget, out, seed, num_threads=1)
    finally:
        record.close()


def random_model(data: Measurements, train: np.ndarray, pairs: int, seed: int, out: Path) -> int:
    """A model trained on ``pairs`` recorded pairs of the training problems drawn uniformly (problems
    left with fewer than two kernels dropped, as the reader drops them); returns the kernels touched."""
    sub = data.subset(train)
    measured = np.argwhere(~np.isnan(sub.tflops))
    chosen = measured[np.random.default_rng(seed).choice(len(measured), size=pairs, replace=False)]
    tflops = np.full(sub.tflops.shape, np.nan)
    tflops[chosen[:, 0], chosen[:, 1]] = sub.tflops[chosen[:, 0], chosen[:, 1]]
    keep = np.flatnonzero((~np.isnan(tflops)).sum(axis=1) >= 2)
    drawn = Measurements(
        sub.arch, sub.variant, sub.dtype, sub.problems, sub.groups, sub.kernel_names, sub.configs, tflops, sub.report
    )
    train_model(drawn.subset(keep), out, seed=seed, num_threads=1)
    return len(set(chosen[:, 1].tolist()))


def held_out(model: Path, data: Measurements, test: np.ndarray) -> Scores:
    """The model's picks among the recording's kernels on the held-out problems, as select scores."""
    selector = Selector.load("gfx950", "forward", "bf16", model, engine="lightgbm")
    table = ConfigTable.build(data.configs)
    scores = np.vstack([selector.score_table(data.problems[i], table).scores for i in test])
    return summarize(scores, data.tflops[test])


def compare(seed: int, fraction: float, kernels: int, workdir: Path) -> dict[str, object]:
    """Loop and random at ``fraction`` of the training problems' recorded pairs, held-out figures."""
    data = recording()
    train, test = split(data, seed)
    pairs = round(fraction * int(np.count_nonzero(~np.isnan(data.tflops[train]))))
    problems = write_problems(data, train, workdir / "problems.csv")
    report = run_loop(problems, Budget(kernels=kernels, pairs=pairs), seed, workdir / "loop")
    touched = random_model(data, train, pairs, seed, workdir / "random")
    return {
        "seed": seed,
        "pairs": pairs,
        "loop": held_out(workdir / "loop", data, test),
        "loop_kernels": report.kernels_built,
        "random": held_out(workdir / "random", data, test),
        "random_kernels": touched,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--fractions", type=float, nargs="+", default=[0.05, 0.1, 0.2])
    parser.add_argument("--kernels", type=int, default=30, help="the loop's kernel budget")
    args = parser.parse_args()
    for fraction in args.fractions:
        for seed in args.seeds:
            with tempfile.TemporaryDirectory() as tmp:
                r = compare(seed, fraction, args.kernels, Path(tmp))
            loop, rand = r["loop"], r["random"]
            print(
                f"{100 * fraction:4.0f} % of pairs ({r['pairs']}), seed {seed}: "
                f"loop mean {loop.mean:.2f} P10 {loop.p10:.2f} ({r['loop_kernels']} kernels); "
                f"random mean {rand.mean:.2f} P10 {rand.p10:.2f} ({r['random_kernels']} kernels)",
                flush=True,
            )


if __name__ == "__main__":
    main()
