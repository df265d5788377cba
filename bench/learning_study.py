"""The learning loop against random sampling and the analytical model alone, on problems none saw.

The recorded MI355X data (``mi355x-forward-bf16``, 231 problems x 30 kernels) are split as
cross-validation splits them (:func:`~ckspace.training.evaluation.fold_of_groups`, five folds by
shape, fold 0 held out; the seed shuffles the shapes, so each seed holds out other problems). On the
other folds' problems, at each budget (a fraction of their recorded pairs):

* **loop**: ``ckspace learn``'s loop, replaying the recording (every kernel may be built; a build
  costs :data:`~ckspace.training.measurer.REPLAY_BUILD_SECONDS`, a pair
  :data:`~ckspace.training.measurer.REPLAY_PAIR_SECONDS`), and the model it writes;
* **random + train**: as many recorded pairs drawn uniformly, and the model ``ckspace train`` fits;
* **random + anchored**: the same pairs, and the loop's model (:mod:`ckspace.training.anchored`),
  which tells the loop's choice of pairs apart from its model;
* **analytical**: the analytical model alone (shipped constants, no pair measured);
* **all pairs + train**: every training pair, ``ckspace train``'s model (the ceiling).

``--start far`` plays a GPU unlike the MI355X: the loop (and the random + anchored arm) start from
the shipped constants each off by about 2 (``calibration_designs.far_start``), and
``--calibration on`` lets the loop measure them first as ``ckspace learn`` does on other archs::

    python bench/learning_study.py --start far --calibration on --fractions 0.02 0.05 0.1

Each model picks among the recording's 30 kernels for the held-out problems through the selector,
scored against their measurements (mean and P10 efficiency of the pick, top-1), with the kernels
each needed built. Run::

    python bench/learning_study.py --seeds 0 1 2 --plot docs/learning_study.png

or a seed per process, then the table and the plot of all of them::

    python bench/learning_study.py --seeds 0 --json seed0.json   # and 1, 2 beside it
    python bench/learning_study.py --merge seed0.json seed1.json seed2.json --plot docs/learning_study.png
"""

from __future__ import annotations

import argparse
import csv
import json
import tempfile
from pathlib import Path

import numpy as np
from calibration_designs import far_start

from ckspace.commands.learn import CALIBRATION
from ckspace.features import performance
from ckspace.features.hardware import hardware_facts
from ckspace.features.matrix import ConfigTable
from ckspace.planning.workload import read_workload
from ckspace.run.results import ResultsFile
from ckspace.select.selector import Selector
from ckspace.training.anchored import analytical, train_anchored
from ckspace.training.boosters import problem_features
from ckspace.training.dataset import Measurements, load_measurements
from ckspace.training.evaluation import fold_of_groups
from ckspace.training.learning import RECORD_FILE, Budget, LearnReport, LearnSettings, learn
from ckspace.training.measurer import REPLAY_BUILD_SECONDS, REPLAY_PAIR_SECONDS, ReplayMeasurer
from ckspace.training.metrics import Scores, summarize
from ckspace.training.trainer import train_model
from ckspace.workloads.datasets import DATASETS
from ckspace.workloads.measurement import problem_cells

RECORDING = DATASETS["mi355x-forward-bf16"].path
FOLDS = 5
FRACTIONS = (0.02, 0.05, 0.1, 0.2, 0.5)
ARMS = ("loop", "random + train", "random + anchored", "analytical", "all pairs + train")


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
    problems_csv: Path,
    budget: Budget,
    seed: int,
    out: Path,
    measurer: ReplayMeasurer | None = None,
    settings: LearnSettings | None = None,
) -> LearnReport:
    """``ckspace learn``'s loop, called as the command calls it."""
    measurer = measurer or ReplayMeasurer.load(RECORDING, "gfx950", "forward", "bf16")
    workload = read_workload(problems_csv, measurer.kernels()[0].variant)
    out.mkdir(parents=True, exist_ok=True)
    path = out / RECORD_FILE
    record = ResultsFile.open(path, path.exists(), workload.problems)
    try:
        return learn(measurer, record, workload.problems, workload.weights, budget, out, seed, settings, 1)
    finally:
        record.close()


def drawn(data: Measurements, train: np.ndarray, pairs: int, seed: int) -> Measurements:
    """``pairs`` recorded pairs of the training problems drawn uniformly (the others NaN)."""
    sub = data.subset(train)
    measured = np.argwhere(~np.isnan(sub.tflops))
    chosen = measured[np.random.default_rng(seed).choice(len(measured), size=pairs, replace=False)]
    tflops = np.full(sub.tflops.shape, np.nan)
    tflops[chosen[:, 0], chosen[:, 1]] = sub.tflops[chosen[:, 0], chosen[:, 1]]
    return Measurements(
        sub.arch, sub.variant, sub.dtype, sub.problems, sub.groups, sub.kernel_names, sub.configs, tflops, sub.report
    )


def random_model(data: Measurements, train: np.ndarray, pairs: int, seed: int, out: Path) -> int:
    """``ckspace train``'s model on ``pairs`` drawn pairs (problems left with fewer than two kernels
    dropped, as the reader drops them); returns the kernels the draw touched."""
    sample = drawn(data, train, pairs, seed)
    keep = np.flatnonzero((~np.isnan(sample.tflops)).sum(axis=1) >= 2)
    train_model(sample.subset(keep), out, seed=seed, num_threads=1)
    return int(np.count_nonzero((~np.isnan(sample.tflops)).any(axis=0)))


def random_anchored(
    data: Measurements, train: np.ndarray, pairs: int, seed: int, out: Path, start: dict[str, float] | None = None
) -> None:
    """The loop's model (:func:`~ckspace.training.anchored.train_anchored`) on the same drawn pairs,
    its features priced with the loop's ``start`` constants (no calibration: the pairs are drawn)."""
    sample = drawn(data, train, pairs, seed)
    hw = performance.calibrated_facts(hardware_facts(sample.arch), start or {})
    train_anchored(sample, sample, problem_features(sample, hw=hw), out, seed, num_threads=1, calibrated=start)


def held_out(model: Path, data: Measurements, test: np.ndarray) -> Scores:
    """The model's picks among the recording's kernels on the held-out problems, as select scores."""
    selector = Selector.load("gfx950", "forward", "bf16", model, engine="lightgbm")
    table = ConfigTable.build(data.configs, selector.hw)  # priced with the constants the model measured
    scores = np.vstack([selector.score_table(data.problems[i], table).scores for i in test])
    return summarize(scores, data.tflops[test])


def compare(
    seed: int, fraction: float, kernels: int, workdir: Path, settings: LearnSettings | None = None
) -> dict[str, object]:
    """Every arm but the two that need no budget at ``fraction`` of the training problems' pairs
    (``settings``: the loop's, ``learn``'s defaults when None)."""
    data = recording()
    train, test = split(data, seed)
    pairs = round(fraction * int(np.count_nonzero(~np.isnan(data.tflops[train]))))
    problems = write_problems(data, train, workdir / "problems.csv")
    report = run_loop(problems, Budget(kernels=kernels, pairs=pairs), seed, workdir / "loop", settings=settings)
    touched = random_model(data, train, pairs, seed, workdir / "random")
    random_anchored(data, train, pairs, seed, workdir / "anchored", settings.start if settings else None)
    return {
        "seed": seed,
        "fraction": fraction,
        "pairs": pairs,
        "loop": held_out(workdir / "loop", data, test),
        "loop_kernels": report.kernels_built,
        "random": held_out(workdir / "random", data, test),
        "random_kernels": touched,
        "random_anchored": held_out(workdir / "anchored", data, test),
    }


def references(seed: int, workdir: Path) -> dict[str, Scores]:
    """The analytical model alone and ``ckspace train`` on every training pair, held out."""
    data = recording()
    train, test = split(data, seed)
    train_model(data.subset(train), workdir / "all", seed=seed, num_threads=1)
    log2_model = analytical(problem_features(data.subset(test)))
    return {"analytical": summarize(log2_model, data.tflops[test]), "all": held_out(workdir / "all", data, test)}


def _row(label: str, figures: list[Scores], kernels: list[int]) -> str:
    def span(values: list[float]) -> str:
        return f"{np.mean(values):5.2f} ({min(values):5.2f}-{max(values):5.2f})"

    return (
        f"| {label} | {span([s.mean for s in figures])} | {span([s.p10 for s in figures])} | "
        f"{span([s.top1 for s in figures])} | {np.mean(kernels):4.1f} |"
    )


def table(results: list[dict], refs: dict[int, dict[str, Scores]]) -> str:
    """Markdown: per budget and arm, the mean over seeds of each figure (min-max in brackets)."""
    lines = ["| budget | arm | mean % | P10 % | top-1 % | kernels built |", "|---|---|---|---|---|---|"]
    seeds = sorted(refs)
    for fraction in sorted({r["fraction"] for r in results}):
        runs = [r for r in results if r["fraction"] == fraction]
        head = f"{100 * fraction:g} % ({round(np.mean([r['pairs'] for r in runs]))} pairs)"
        arms = [
            ("loop", [r["loop"] for r in runs], [r["loop_kernels"] for r in runs]),
            ("random + train", [r["random"] for r in runs], [r["random_kernels"] for r in runs]),
            ("random + anchored", [r["random_anchored"] for r in runs], [r["random_kernels"] for r in runs]),
        ]
        for arm, figures, kernels in arms:
            lines.append(f"| {head} " + _row(arm, figures, kernels))
    for name, label, kernels in (("analytical", "analytical alone", 0), ("all", "all pairs + train", 30)):
        lines.append("| — " + _row(label, [refs[s][name] for s in seeds], [kernels]))
    return "\n".join(lines) + "\n"


def plot(results: list[dict], refs: dict[int, dict[str, Scores]], path: Path) -> None:
    """Mean and P10 against the budget, each arm's seeds' mean with their range shaded."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fractions = sorted({r["fraction"] for r in results})
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    for ax, figure in zip(axes, ("mean", "p10"), strict=True):
        for key, label in (("loop", "loop"), ("random", "random + train"), ("random_anchored", "random + anchored")):
            values = np.array([[getattr(r[key], figure) for r in results if r["fraction"] == f] for f in fractions])
            x = 100 * np.asarray(fractions)
            ax.plot(x, values.mean(axis=1), marker="o", label=label)
            ax.fill_between(x, values.min(axis=1), values.max(axis=1), alpha=0.15)
        for name, label, style in (("analytical", "analytical alone", "--"), ("all", "all pairs + train", ":")):
            ax.axhline(np.mean([getattr(r[name], figure) for r in refs.values()]), color="k", ls=style, label=label)
        ax.set_xscale("log")
        ax.set_xticks(100 * np.asarray(fractions), [f"{100 * f:g}" for f in fractions])
        ax.set_xlabel("measured pairs, % of the training problems' recorded pairs")
        ax.set_ylabel(f"{'mean' if figure == 'mean' else 'P10'} efficiency of the pick, held out (%)")
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=8)
    fig.suptitle(f"mi355x-forward-bf16, fold 0 of 5 held out, seeds {', '.join(map(str, sorted(refs)))}")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--fractions", type=float, nargs="+", default=list(FRACTIONS))
    parser.add_argument("--kernels", type=int, default=30, help="the loop's kernel budget")
    parser.add_argument(
        "--calibration", choices=CALIBRATION, default="auto", help="as ckspace learn's (auto keeps a --start far)"
    )
    parser.add_argument(
        "--start",
        choices=("shipped", "far"),
        default="shipped",
        help="far: the loop starts from the shipped constants each off by about 2 (calibration_designs.far_start): "
        "a GPU unlike the MI355X, whose constants the shipped ones are not",
    )
    parser.add_argument("--plot", type=Path, help="write the plot here (PNG)")
    parser.add_argument("--json", type=Path, help="write every run's figures here")
    parser.add_argument("--merge", type=Path, nargs="+", help="--json files to tabulate (and plot): no run")
    args = parser.parse_args()
    if args.merge:
        refs, results = {}, []
        for path in args.merge:
            dump = json.loads(path.read_text())
            refs.update({int(s): {k: Scores(**v) for k, v in r.items()} for s, r in dump["references"].items()})
            scored = ("loop", "random", "random_anchored")
            results += [{k: Scores(**v) if k in scored else v for k, v in r.items()} for r in dump["runs"]]
        print(table(results, refs))
        if args.plot:
            plot(results, refs, args.plot)
        return
    settings = LearnSettings(calibrate=CALIBRATION[args.calibration], start=far_start() if args.start == "far" else {})
    print(f"replay costs: a build {REPLAY_BUILD_SECONDS:g} s, a pair {REPLAY_PAIR_SECONDS:g} s", flush=True)
    print(f"the loop: calibration {args.calibration}, start {args.start} {settings.start}", flush=True)
    refs, results = {}, []
    for seed in args.seeds:
        with tempfile.TemporaryDirectory() as tmp:
            refs[seed] = references(seed, Path(tmp))
        print(f"seed {seed}: " + ", ".join(f"{k} {v.mean:.2f}/{v.p10:.2f}" for k, v in refs[seed].items()), flush=True)
    for fraction in args.fractions:
        for seed in args.seeds:
            with tempfile.TemporaryDirectory() as tmp:
                r = compare(seed, fraction, args.kernels, Path(tmp), settings)
            results.append(r)
            print(
                f"{100 * fraction:4g} % ({r['pairs']} pairs), seed {seed}: "
                + "; ".join(f"{k} {r[k].mean:.2f}/{r[k].p10:.2f}" for k in ("loop", "random", "random_anchored"))
                + f" ({r['loop_kernels']} kernels built by the loop)",
                flush=True,
            )
    print(table(results, refs))
    if args.json:
        dump = [{k: v.model_dump() if isinstance(v, Scores) else v for k, v in r.items()} for r in results]
        refs_dump = {s: {k: v.model_dump() for k, v in r.items()} for s, r in refs.items()}
        args.json.write_text(json.dumps({"runs": dump, "references": refs_dump}, indent=1) + "\n")
    if args.plot:
        plot(results, refs, args.plot)


if __name__ == "__main__":
    main()
