"""Benchmark: warm latency of the query API.

Each figure is the median (and max) over ``--repeat`` calls after one warm-up call, on a space
whose cells are cached: ``explain`` of a kernel name (valid, and invalid), ``explain`` of a partial
config, a ``where``-filtered count and a ``for_problem`` count. Target: explain <= 100 ms.

Usage: python bench/query.py [--arch gfx950] [--repeat 20]
"""

from __future__ import annotations

import argparse
import atexit
import os
import shutil
import statistics
import sys
import tempfile
import time


def _time(fn, repeat: int) -> tuple[float, float]:
    fn()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3, max(times) * 1e3


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arch", default="gfx950")
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()
    if "CKSPACE_CACHE_DIR" not in os.environ:  # a cold cache of its own, removed at exit
        cache = tempfile.mkdtemp(prefix="ckspace-bench-")
        atexit.register(shutil.rmtree, cache, ignore_errors=True)
        os.environ["CKSPACE_CACHE_DIR"] = cache
    from ckspace import Space

    space = Space(args.arch, "bwd_weight", 2, "bf16", rule_set="full")
    valid = space.names()[len(space.names()) // 2]
    invalid = valid.replace("_mem_", "_compv4_", 1) if "_mem_" in valid else valid.replace("_compv3_", "_compv4_", 1)
    problem = "N=32,G=1,C=256,K=256,Hi=28,Wi=28,Y=3,X=3,stride=1,pad=1"
    cases = [
        ("explain name (valid)", lambda: space.explain(valid)),
        ("explain name (invalid)", lambda: space.explain(invalid)),
        ("explain partial (pipeline=compv4, tile_k=32)", lambda: space.explain({"pipeline": "compv4", "tile_k": 32})),
        ("explain partial (pipeline=mem)", lambda: space.explain({"pipeline": "mem"})),
        (
            "where-filtered count (all variants, ndims, dtypes)",
            lambda: Space(args.arch).where("tile_m * tile_n >= 8192", "pipeline in [compv3, mem]").count(),
        ),
        ("for_problem count (all variants, ndims, dtypes)", lambda: Space(args.arch).for_problem(problem).count()),
        ("plain count (all variants, ndims, dtypes)", lambda: Space(args.arch).count()),
    ]
    print(f"{'query':52} {'median ms':>10} {'max ms':>8}")
    for label, fn in cases:
        median, worst = _time(fn, args.repeat)
        print(f"{label:52} {median:10.2f} {worst:8.2f}")
    print("target: explain <= 100 ms (warm)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
