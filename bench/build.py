"""Compile cost per kernel and units per minute: batching, and ninja against Ray on this machine.

    python3 bench/build.py [--arch gfx942] [--count 4] [--jobs 1] [--address ADDR] [--ck-root PATH]

Emits the first ``count`` kernels of the CI sample, then compiles them, empty object cache each
time and ``jobs`` compiles at once: with ninja at ``--batch 1`` and at ``--batch count``, and with
the Ray executor at ``--batch 1`` (the cluster at ``--address``, else a private Ray instance on this
machine, started before the clock starts: its start-up is printed apart). Prints seconds per kernel
and translation units per minute for each.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # the CI compile sample lives there
from compile_sample import sample_kernels

from ckspace.compiling.builder import build
from ckspace.compiling.cluster import connected, describe
from ckspace.emit.emitter import emit
from ckspace.environment.ck_header_cache import find_revision


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--arch", default="gfx942")
    parser.add_argument("--count", type=int, default=4)
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--address", help="a Ray cluster (default: a private instance on this machine)")
    parser.add_argument("--ck-root")
    args = parser.parse_args()
    revision = find_revision(args.ck_root)
    kernels = sample_kernels(args.arch, revision)[0][: args.count]
    print(f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at the start")
    started = time.monotonic()
    with connected(args.address, purpose="bench/build.py") as ray:
        print(f"Ray: {describe(ray)}, connected in {time.monotonic() - started:.1f} s")
        for executor, batch in (("local", 1), ("local", len(kernels)), ("ray", 1)):
            with tempfile.TemporaryDirectory() as folder:
                os.environ["CKSPACE_BUILD_CACHE"] = str(Path(folder) / "cache")
                emit(kernels, Path(folder) / "tree", revision, arch=args.arch, request={"bench": "build"})
                report = build(
                    Path(folder) / "tree",
                    args.arch,
                    jobs=args.jobs,
                    batch=batch,
                    ck_root=args.ck_root,
                    executor=executor,
                )
            print(
                f"{args.arch} {executor} batch={batch} jobs={args.jobs}: {report.ok} ok, {report.failed} failed, "
                f"{report.units} units, {report.seconds:.1f} s = {report.seconds / len(kernels):.1f} s/kernel, "
                f"{60 * report.units / report.seconds:.2f} units/min ({report.toolchain.version})"
            )


if __name__ == "__main__":
    main()
