"""Emit rate: sources per second for the whole ``full`` set of an arch (plus default bwd_data).

    python3 bench/emit.py [--arch gfx942 ...] [--ck-root PATH]

Times a cold emit into an empty folder and a re-emit (nothing changes, nothing is rewritten).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from ckspace.emit.emitter import emit
from ckspace.environment.ck_header_cache import find_revision
from ckspace.space.space import Space


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--arch", nargs="+", default=["gfx942", "gfx950"])
    parser.add_argument("--ck-root")
    args = parser.parse_args()
    revision = find_revision(args.ck_root)
    print(f"CK {revision.label}")
    for arch in args.arch:
        kernels = Space(arch, rule_set="full").kernels()
        kernels += Space(arch, "bwd_data", rule_set="default").kernels()
        with tempfile.TemporaryDirectory() as folder:
            start = time.perf_counter()
            result = emit(kernels, Path(folder), revision, arch=arch, request={"bench": arch})
            cold = time.perf_counter() - start
            start = time.perf_counter()
            emit(kernels, Path(folder), revision, arch=arch, request={"bench": arch})
            warm = time.perf_counter() - start
        files = len(result.written)
        sources = 3 * len(result.manifest.kernels)
        print(
            f"{arch}: {len(kernels)} listed, {len(result.manifest.kernels)} emitted, "
            f"{len(result.manifest.excluded)} excluded by CK rules; {files} files in {cold:.2f} s "
            f"({sources / cold:.0f} kernel sources/s, {files / cold:.0f} files/s); re-emit {warm:.2f} s"
        )


if __name__ == "__main__":
    main()
