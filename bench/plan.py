"""Whole-process time of ``ckspace plan`` on 1,000 real problems over a whole registry.

The workload: 1,000 rows drawn (seeded) from the forward problem lists ckspace ships (data sets
miopen-forward-300, benchmark-forward-300, synthetic-forward and holdout-300: MIOpen production
shapes, the benchmark set, upstream's synthetic and holdout shapes), each with
a weight from 1 to 10 in a ``count`` column. The registry: every GEMM kernel of the ``full`` rule set
for gfx950 forward bf16 (2D; the 3D rows of the lists are dropped, as a 2D library cannot run
them), plus the vector variants their fallbacks reach. Prints, per run, the wall time, the solver's
status and gap, the kernels and the predicted efficiency; runs twice to show the plan is the same.

    python3 bench/plan.py [--budget K] [--min-efficiency E] [--seed S]
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from ckspace.workloads.datasets import DATASETS

FILES = ("miopen-forward-300", "benchmark-forward-300", "synthetic-forward", "holdout-300")
"""The data sets drawn from (:mod:`ckspace.workloads.datasets`)."""
COLUMNS = ("N", "C", "K", "G", "Hi", "Wi", "Y", "X", "stride_h", "stride_w", "pad_h", "pad_w", "dil_h", "dil_w")


def draw(count: int, seed: int) -> list[dict[str, str]]:
    """``count`` 2D forward rows drawn without replacement from the lists, with a weight each."""
    rows = []
    for name in FILES:
        with DATASETS[name].path.open(newline="") as handle:
            for row in csv.DictReader(handle):
                three_d = row.get("ndim", "2") == "3" or row.get("Di", "1") != "1" or row.get("Z", "1") != "1"
                if not three_d and row.get("direction", "forward") == "forward":
                    rows.append({c: row[c] for c in COLUMNS})
    rng = random.Random(seed)
    chosen = rng.sample(rows, count)
    return [{**row, "count": str(rng.randint(1, 10))} for row in chosen]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    goal = parser.add_mutually_exclusive_group()
    goal.add_argument("--budget", type=int, default=None)
    goal.add_argument("--min-efficiency", type=float, default=None)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--problems", type=int, default=1000)
    args = parser.parse_args()
    goals = (
        [("--budget", str(args.budget))]
        if args.budget
        else [("--min-efficiency", str(args.min_efficiency))]
        if args.min_efficiency
        else [("--budget", "8"), ("--budget", "16"), ("--min-efficiency", "97")]
    )
    with tempfile.TemporaryDirectory() as tmp:
        workload = Path(tmp) / "workload.csv"
        rows = draw(args.problems, args.seed)
        with workload.open("w", newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=[*COLUMNS, "count"])
            writer.writeheader()
            writer.writerows(rows)
        env = {**os.environ, "CKSPACE_CACHE_DIR": os.environ.get("CKSPACE_CACHE_DIR", str(Path(tmp) / "cache"))}
        print(
            f"workload: {len(rows)} rows drawn from {', '.join(FILES)} (seed {args.seed}); registry: gfx950 "
            f"forward bf16 2D 'full'; {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}"
        )
        for option, value in goals:
            answers = []
            for run in (1, 2):
                command = [
                    sys.executable,
                    "-m",
                    "ckspace",
                    "plan",
                    "--arch",
                    "gfx950",
                    "--variant",
                    "forward",
                    "--dtype",
                    "bf16",
                    "--problems",
                    str(workload),
                    "--weights",
                    "count",
                    option,
                    value,
                    "--format",
                    "json",
                ]
                started = time.perf_counter()
                done = subprocess.run(command, capture_output=True, text=True, env=env)
                seconds = time.perf_counter() - started
                if done.returncode != 0:
                    print(f"{option} {value}: exit {done.returncode}: {done.stderr.strip()}")
                    break
                report = json.loads(done.stdout)
                answers.append(done.stdout)
                status = (
                    report["status"]
                    if report["status"] == "optimal"
                    else f"{report['status']} (gap {report['gap']:.2f} %, limit {report['time_limit']:g} det. s)"
                )
                print(
                    f"{option} {value} run {run}: {seconds:5.1f} s wall, {status}; {len(report['kernels'])} kernels "
                    f"({len(report['vector_variants'])} vector variants) of {report['registry']} + "
                    f"{report['fallback_variants']} variants; {report['distinct_problems']} distinct problems, "
                    f"{len(report['unrunnable'])} unrunnable; predicted efficiency {report['efficiency']:.2f} % "
                    f"(model lower bound {report['model_efficiency']:.2f} %, pruned to {report['pruned_to']})"
                )
            if len(answers) == 2:
                print(f"{option} {value}: same plan both runs: {answers[0] == answers[1]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
