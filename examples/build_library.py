"""Plan, emit and build a ckspace kernel library for a workload, then ask it for a kernel.

    python3 build_library.py --out kernels                 # the dispatcher alone: no HIP compiler
    python3 build_library.py --out kernels --arch-build    # the kernels too (a HIP toolchain)

1. ``ckspace plan`` chooses the fewest-kernels-for-the-budget set for a workload (here MIOpen's
   forward shapes, a data set that ships with ckspace; a CSV of your own works the same);
2. ``emit_tree`` writes those kernels' CK Tile sources and the generated C dispatcher;
3. ``build_library`` compiles them: ``host_only`` builds the dispatcher alone (what a machine
   without a HIP compiler can build, and all ``select`` needs), else the kernel library with its
   CMake package (examples/cmake_consumer/ links it);
4. the library picks a kernel for a problem through its own C API.

Nothing here touches a GPU. Running a kernel (``library.run``) needs an AMD GPU: docs/dispatcher.md.
"""

from __future__ import annotations

import argparse
import subprocess
import sys

from ckspace import ConvProblem, Space, build_library, emit_tree


def plan(arch: str, variant: str, dtype: str, problems: str, budget: int) -> list[str]:
    """The kernel names ``ckspace plan`` chooses (its output is names, with its report as # lines)."""
    command = [sys.executable, "-m", "ckspace", "plan", "--arch", arch, "--variant", variant, "--dtype", dtype]
    command += ["--problems", problems, "--rule-set", "default", "--budget", str(budget)]
    printed = subprocess.run(command, check=True, capture_output=True, text=True).stdout
    return [line for line in printed.splitlines() if line and not line.startswith("#")]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="the directory to emit the library's sources to")
    parser.add_argument("--arch", default="gfx950")
    parser.add_argument("--problems", default="miopen-forward-300", help="a problems CSV or data set name")
    parser.add_argument("--budget", type=int, default=4, help="at most this many kernels")
    parser.add_argument("--arch-build", action="store_true", help="compile the kernels (needs a HIP compiler)")
    args = parser.parse_args()

    names = plan(args.arch, "forward", "bf16", args.problems, args.budget)
    print(f"plan: {len(names)} kernels")
    for name in names:
        print(f"  {name}")

    space = Space(args.arch, "forward", 2, "bf16", rule_set="default")
    emitted = emit_tree(space, args.out, names=names)  # the dispatcher too (ckspace emit --kernels)
    print(f"emitted: {len(emitted.manifest.kernels)} kernels to {args.out}")

    # host_only: the dispatcher alone; else the kernels compiled for the arch (executor="ray" on a cluster)
    library = build_library(args.out, args.arch) if args.arch_build else build_library(args.out, host_only=True)
    print(f"library: {library.path}")

    text = "N=8,C=256,K=256,Hi=56,Wi=56,Y=3,X=3,pad=1"
    choice = library.select(ConvProblem.parse(text), "forward", "bf16")  # the library's ckspace_select
    print(f"pick for {text}: {choice.name} (predicted {choice.predicted_tflops:.1f} TFLOPS, an estimate)")


if __name__ == "__main__":
    main()
