"""What ``ckspace bench``'s supervision costs: a supervised sweep against the same pairs run in one
process, on a stand-in library (``tests/standin/standin_run.c``: a naive convolution on host memory).

Per configuration it prints the pairs, the wall time and pairs/s of the supervised sweep (worker
processes, pipes, CSV rows, resume bookkeeping), the same pairs run in-process through the worker's
own loop (the baseline: operands, references, verification and the kernel calls, nothing else), and
the overhead per pair and per worker process. A last line times the replacement of a crashed
worker (one kernel that dereferences NULL on every problem).

    python3 bench/sweep.py [--problems N] [--kernels K]

Needs a C compiler (the tree is emitted against the tests' fake CK headers; nothing is compiled for a GPU).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # the stand-in libraries live there
from standin_library import build_standin

from ckspace.compiling.builder import build_host
from ckspace.core.config import GemmConfig
from ckspace.emit.manifest import Manifest
from ckspace.run.library import KernelLibrary
from ckspace.run.sweep import SweepOptions, batches, plan_pairs, run_sweep
from ckspace.run.worker import BatchJob, serve
from ckspace.workloads.problem import ConvProblem


def standin(root: Path, crash: int) -> tuple[Path, Path, dict[str, GemmConfig]]:
    tree = build_standin(root, crash=crash)
    manifest = Manifest.model_validate_json((tree / "manifest.json").read_bytes())
    configs = {k.name: k.gemm_config() for k in manifest.kernels}
    return tree / "build" / "gfx950" / "libckspace_kernels_gfx950.so", build_host(tree), configs


def problems(count: int) -> tuple[ConvProblem, ...]:
    shapes = [(1, 16, 16, 6, 3), (2, 32, 16, 5, 3), (1, 16, 32, 8, 1), (2, 16, 16, 4, 3), (1, 32, 32, 6, 1)]
    return tuple(
        ConvProblem.parse(f"N={n},C={c},K={k},Hi={h},Wi={h + i % 3},Y={f},X={f},pad={f // 2}")
        for i, (n, c, k, h, f) in ((i, shapes[i % len(shapes)]) for i in range(count))
    )


def in_process(
    library: Path,
    host: Path,
    configs: dict[str, GemmConfig],
    shapes: tuple[ConvProblem, ...],
    names: list[str],
    options: SweepOptions,
) -> float:
    pairs = plan_pairs(KernelLibrary(host), configs, shapes, names)
    started = time.perf_counter()
    for batch in batches(pairs, options.batch):
        serve(
            BatchJob(
                library=str(library),
                backend="host",
                device=0,
                pairs=batch,
                warmup=options.warmup,
                repeat=options.repeat,
                verify=True,
                seed=0,
            ),
            lambda message: None,
        )
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--problems", type=int, default=12)
    parser.add_argument("--kernels", type=int, default=8)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        library, host, configs = standin(root, crash=args.kernels)
        names = sorted(configs)[: args.kernels]
        shapes = problems(args.problems)
        print(f"stand-in library: {len(names)} kernels x {len(shapes)} problems (gfx950 bwd_weight bf16 2D)")
        print(
            f"{'batch':>6} {'pairs':>6} {'supervised s':>13} {'pairs/s':>8} {'in-process s':>13} "
            f"{'overhead/pair ms':>17} {'workers':>8} {'overhead/worker ms':>19}"
        )
        for batch in sorted({1, 4, args.kernels}):
            options = SweepOptions(backend="host", warmup=1, repeat=3, batch=batch, timeout=60)
            baseline = in_process(library, host, configs, shapes, names, options)
            out = root / f"sweep-{batch}.csv"
            summary = run_sweep(library, host, configs, shapes, out, options, kernels=names)
            pairs = sum(summary.counts.values())
            workers = -(-len(names) // batch)
            extra = summary.seconds - baseline
            print(
                f"{batch:>6} {pairs:>6} {summary.seconds:>13.2f} {pairs / summary.seconds:>8.1f} {baseline:>13.2f} "
                f"{1e3 * extra / pairs:>17.1f} {workers:>8} {1e3 * extra / workers:>19.0f}"
            )
        crash_names = sorted(configs)[args.kernels : args.kernels + 1]
        options = SweepOptions(backend="host", warmup=1, repeat=3, batch=1, timeout=60)
        summary = run_sweep(library, host, configs, shapes, root / "crash.csv", options, kernels=crash_names)
        print(
            f"a kernel that crashes on all {summary.counts.get('crash', 0)} problems: {summary.seconds:.2f} s, "
            f"{1e3 * summary.seconds / max(summary.counts.get('crash', 1), 1):.0f} ms per replaced worker"
        )


if __name__ == "__main__":
    main()
