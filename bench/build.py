"""Compile cost per kernel: one kernel per translation unit versus batched units.

    python3 bench/build.py [--arch gfx942] [--count 4] [--ck-root PATH]

Emits the first ``count`` kernels of the CI sample, then compiles them once with ``--batch 1`` and
once with ``--batch count`` (one job, empty object cache each time) and prints seconds per kernel.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # the CI compile sample lives there
from compile_sample import sample_kernels  # noqa: E402

from ckspace.emit.emitter import emit
from ckspace.hip_runtime.build import build
from ckspace.hip_runtime.ck_headers import find_revision


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--arch", default="gfx942")
    parser.add_argument("--count", type=int, default=4)
    parser.add_argument("--ck-root")
    args = parser.parse_args()
    revision = find_revision(args.ck_root)
    kernels = sample_kernels(args.arch, revision)[0][: args.count]
    for batch in (1, len(kernels)):
        with tempfile.TemporaryDirectory() as folder:
            os.environ["CKSPACE_BUILD_CACHE"] = str(Path(folder) / "cache")
            emit(kernels, Path(folder) / "tree", revision, arch=args.arch, request={"bench": "build"})
            report = build(Path(folder) / "tree", args.arch, jobs=1, batch=batch, ck_root=args.ck_root)
        print(f"{args.arch} batch={batch}: {report.ok} ok, {report.failed} failed, {report.units} units, "
              f"{report.seconds:.1f} s = {report.seconds / len(kernels):.1f} s/kernel ({report.toolchain.version})")


if __name__ == "__main__":
    main()
