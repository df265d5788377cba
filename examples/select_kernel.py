"""Pick a kernel for a convolution problem with ckspace's run-time selector.

    python3 select_kernel.py "N=8,C=256,K=256,Hi=56,Wi=56,Y=3,X=3,pad=1"
    python3 select_kernel.py "N=8,C=100,K=256,Hi=56,Wi=56,Y=3,X=3,pad=1" --arch gfx942 --top 5

The candidates are the kernels of a rule set for the problem's cell (a library's own kernels work
the same: pass their names). Where a candidate cannot run the problem only because of its vector
width, the selector runs a narrower variant of it and names the candidate it stands for. TFLOPS are
estimates: the shipped model's (gfx950 forward bf16), else the analytical model's.
"""

from __future__ import annotations

import argparse

from ckspace import ConvProblem, NoKernelError, Selector, Space


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("problem", help="N=..,C=..,K=..,Hi=..,Wi=..,Y=..,X=.. (stride, pad, dil, G optional)")
    parser.add_argument("--arch", default="gfx950")
    parser.add_argument("--variant", default="forward", choices=["forward", "bwd_data", "bwd_weight"])
    parser.add_argument("--dtype", default="bf16")
    parser.add_argument("--rule-set", default="default")
    parser.add_argument("--top", type=int, default=3)
    args = parser.parse_args()

    problem = ConvProblem.parse(args.problem)
    selector = Selector.load(args.arch, args.variant, args.dtype)
    candidates = Space(args.arch, args.variant, problem.ndim, args.dtype, rule_set=args.rule_set).names()
    try:
        choice = selector.select(problem, candidates, k=args.top)
    except NoKernelError as error:
        print(f"no kernel: {error}")
        return 1
    print(f"pick: {choice.pick}")
    if choice.family:
        print(f"  a narrower-vector variant of the candidate {choice.family}")
    print(f"  estimate from: {choice.pick_source}")
    print(f"{choice.feasible} of {choice.candidates} candidates (or their variants) run it; the top {len(choice.top)}:")
    for ranked in choice.top:
        print(f"  {ranked.predicted_tflops:8.1f} TFLOPS  {ranked.name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
