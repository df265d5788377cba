"""Latency of one ``Selector.select`` call with the shipped model loaded.

Registries: the model's 30 measured kernels, and every GEMM kernel of the ``full`` rule set for
gfx950 forward 2D bf16. Problems: the 300 forward shapes of the benchmark set when ``../shared`` is
there, else a fixed list. Each select sees a new problem (nothing per-problem is cached); the
candidate columns are prepared once per registry, as a long-lived selector does. Also reported:
LightGBM's own ``Booster.predict`` on the same feature matrix, against the direct C-API call the
selector makes.

    python3 bench/selection.py [--repeats N]

(Not named select.py: a script's folder comes first on the import path, and a select.py there would
shadow the standard library's select module that subprocess and asyncio import.)
"""

from __future__ import annotations

import argparse
import csv
import itertools
import time
from pathlib import Path

import numpy as np

from ckspace.core.problem import ConvProblem
from ckspace.select.features import feature_matrix
from ckspace.select.selector import Selector
from ckspace.space.space import Space

PROBLEMS_CSV = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "problems" / "forward_bench300_problems.csv"
FALLBACK = ["N=1,C=64,K=128,Hi=56,Wi=56,Y=3,X=3,stride=1,pad=1", "N=4,C=256,K=64,Hi=28,Wi=28,Y=1,X=1",
            "N=8,C=128,K=128,Hi=14,Wi=14,Y=3,X=3,stride=2,pad=1", "N=1,C=512,K=512,Hi=7,Wi=7,Y=3,X=3,pad=1"]


def problems() -> list[ConvProblem]:
    if not PROBLEMS_CSV.is_file():
        return [ConvProblem.parse(t) for t in FALLBACK]
    keys = ("N", "G", "C", "K", "Hi", "Wi", "Y", "X", "stride_h", "stride_w", "pad_h", "pad_w", "dil_h", "dil_w")
    with PROBLEMS_CSV.open(newline="") as handle:
        return [ConvProblem.from_values({k: int(row[k]) for k in keys}) for row in csv.DictReader(handle)]


def timed(call, inputs, repeats: int) -> np.ndarray:
    samples = []
    for item in itertools.islice(itertools.cycle(inputs), repeats):
        start = time.perf_counter()
        call(item)
        samples.append(time.perf_counter() - start)
    return np.asarray(samples) * 1e3


def report(label: str, ms: np.ndarray) -> None:
    print(f"{label:<44} p50 {np.percentile(ms, 50):7.3f} ms   p99 {np.percentile(ms, 99):7.3f} ms   (n={ms.size})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3000)
    args = parser.parse_args()
    start = time.perf_counter()
    selector = Selector.load("gfx950", "forward", "bf16")
    print(f"load shipped model: {(time.perf_counter() - start) * 1e3:.1f} ms (source: {selector.source})")
    shapes = problems()
    registries = {"30-kernel registry (measured kernels)": list(selector.default_candidates),
                  "full rule set (forward 2D bf16)": [c for c in Space("gfx950", "forward", 2, "bf16", "full")
                                                      if c.kind == "gemm"]}
    for label, candidates in registries.items():
        prepared = selector.prepare(candidates)
        counts = [int(selector.feasible(p, prepared).sum()) for p in shapes]
        runnable = [p for p, n in zip(shapes, counts) if n]
        print(f"{label}: {len(candidates)} kernels; {len(runnable)} of {len(shapes)} problems have a feasible "
              f"kernel ({np.mean([n for n in counts if n]):.1f} feasible on average)")
        selector.select(runnable[0], candidates)  # warm-up
        report("  select, k=5", timed(lambda p: selector.select(p, candidates, k=5), runnable, args.repeats))
    prepared = selector.prepare(registries["30-kernel registry (measured kernels)"])
    shapes = [p for p in shapes if selector.feasible(p, prepared).all()]
    matrices = [feature_matrix(p, selector.variant, selector.dtype, prepared.table, selector.hw) for p in shapes]
    ranker = selector.ranker
    report("30 kernels: features only", timed(lambda p: feature_matrix(p, selector.variant, selector.dtype,
                                                                       prepared.table, selector.hw),
                                              shapes, args.repeats))
    report("30 kernels: feasibility (problem rules)", timed(lambda p: selector.feasible(p, prepared), shapes,
                                                            args.repeats))
    report("30 kernels: ranker, Booster.predict", timed(ranker.predict, matrices, args.repeats))
    report("30 kernels: ranker, Booster.predict(num_threads=1)",
           timed(lambda m: ranker.predict(m, num_threads=1), matrices, args.repeats))
    report("30 kernels: ranker, compiled trees", timed(selector.scores, matrices, args.repeats))


if __name__ == "__main__":
    main()
