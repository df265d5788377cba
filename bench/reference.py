"""Cost of verification on the CPU: the reference convolution, the inputs and one comparison.

A bench run computes each problem's reference once and compares every kernel's output with it, so
per problem it pays ``random_operands`` + ``reference`` once and ``verify`` once per kernel. Shapes:
the 256x256 forward problem with C=52, K=156 and the largest forward problem (by FLOPs) of
the ``benchmark-forward-300`` data set whose tensors fit in MEMORY_BUDGET as float32 (the very
largest, 13 TFLOP over 9 GB of tensors, is estimated from the measured rate, not run on a shared
2-core machine), and the largest backward problems of the upstream validation lists (the
``validation-bwd-data`` and ``validation-bwd-weight`` data sets), in bf16. The baseline, in the
same run, is the element-loop implementation of ``tests/naive_conv.py`` on a small shape, as
multiply-adds per second. The last line times the sampled check a worker makes of that very largest forward problem
(``ckspace.verify.sampled``: operands, positions, ``reference_at``, ``verify_at`` of a whole
output) without ever computing its full reference.

    python3 bench/reference.py [--repeats N]
"""

from __future__ import annotations

import argparse
import functools
import math
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

import naive_conv  # noqa: E402  (tests/ holds the independent naive implementation)

from ckspace.core.vocab import Variant  # noqa: E402
from ckspace.planning.workload import read_workload  # noqa: E402
from ckspace.verify.comparison import tolerance, verify, verify_at  # noqa: E402
from ckspace.verify.reference import numpy_dtype, operand_shapes, random_operands, reference  # noqa: E402
from ckspace.verify.sampled import SAMPLES, reference_at, sample_positions  # noqa: E402
from ckspace.workloads.datasets import DATASETS  # noqa: E402
from ckspace.workloads.problem import ConvProblem  # noqa: E402

MEMORY_BUDGET = 1 << 30
SMALL = {"ndim": 2, "N": 1, "G": 1, "C": 8, "K": 8, "Hi": 8, "Wi": 8, "Y": 3, "X": 3, "pad_h": 1, "pad_w": 1}


def _problems(name: str, variant: Variant) -> list[ConvProblem]:
    return list(read_workload(DATASETS[name].path, variant).problems)


def shapes() -> list[tuple[str, ConvProblem]]:
    forward = _problems("benchmark-forward-300", Variant.FORWARD)
    first = next(p for p in forward if (p.C, p.K, p.Hi, p.Wi) == (52, 156, 256, 256))
    fits = [p for p in forward if 4 * sum(map(math.prod, operand_shapes(p, "forward"))) <= MEMORY_BUDGET]
    chosen = [("forward", first), ("forward", max(fits, key=lambda p: p.flops))]
    largest = max(forward, key=lambda p: p.flops)
    if largest not in fits:
        chosen.append(("forward (estimated)", largest))
    for variant in ("bwd_data", "bwd_weight"):
        problems = _problems(f"validation-{variant.replace('_', '-')}", Variant(variant))
        chosen.append((variant, max(problems, key=lambda p: p.flops)))
    return chosen


def timed(function, repeats: int) -> tuple[float, float, float, object]:
    times, result = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        result = function()
        times.append(time.perf_counter() - start)
    return statistics.median(times), min(times), max(times), result


def _sampled_reference(problem: ConvProblem) -> tuple[float, float, float, np.ndarray, np.ndarray]:
    """Times of the operands, the positions and reference_at, and the positions and values (the
    operands are freed on return: the check itself needs only the output)."""
    inputs, _, _, (a, b) = timed(lambda: random_operands(problem, "forward", "bf16", 0), 1)
    draw, _, _, positions = timed(lambda: sample_positions(problem, "forward", SAMPLES, 0), 1)
    at, _, _, values = timed(lambda: reference_at(problem, "forward", a, b, positions), 1)
    return inputs, draw, at, positions, values


def sampled_check(problem: ConvProblem) -> None:
    """Time the sampled check of a forward problem, as a worker makes it: bf16 operands, SAMPLES
    positions and their reference values, then verify_at of a whole output (the kernel's, here the
    sampled values written into a zeroed buffer, so that it passes)."""
    inputs, draw, at, positions, values = _sampled_reference(problem)
    c_out = np.zeros(math.prod(operand_shapes(problem, "forward").c), dtype=numpy_dtype("bf16"))
    c_out[positions] = values
    check, _, _, result = timed(lambda: verify_at(c_out, positions, values, tolerance(problem, "forward", "bf16")), 1)
    assert result.ok and result.sampled
    macs = positions.size * problem.gemm_mnk("forward")[2]
    print(
        f"sampled check, forward {problem.text()} bf16 ({problem.flops / 1e12:.1f} TFLOP, {c_out.size} outputs): "
        f"operands {inputs:.1f} s, {positions.size} positions {draw * 1e3:.0f} ms, reference_at {at * 1e3:.0f} ms "
        f"({macs / 1e6:.0f} M multiply-adds, {macs / at / 1e9:.2f} GMAC/s), verify_at {check * 1e3:.0f} ms "
        "(NaN/inf scan of every element included)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()

    small = ConvProblem(**SMALL)
    a, b = random_operands(small, "forward", "bf16", 0)
    macs = small.flops // 2
    naive, _, _, _ = timed(lambda: naive_conv.forward(SMALL, a, b), 1)
    ref, _, _, _ = timed(lambda: reference(small, "forward", a, b), args.repeats)
    print(
        f"baseline, {small.text()} forward bf16 ({macs} multiply-adds): naive loops {naive * 1e3:.0f} ms "
        f"({macs / naive / 1e6:.2f} M MAC/s), reference {ref * 1e3:.2f} ms ({macs / ref / 1e6:.0f} M MAC/s)"
    )
    print("| variant | problem | GFLOP | operands ms | reference ms (min-max) | GMAC/s | verify ms | c elements |")
    print("|---|---|---|---|---|---|---|---|")
    rate = None
    for variant, problem in shapes():
        if variant == "forward (estimated)":
            print(
                f"| forward | {problem.text()} | {problem.flops / 1e9:.0f} | - | "
                f"about {problem.flops / 2 / rate:.0f} s estimated at {rate / 1e9:.1f} GMAC/s | - | - | "
                f"{math.prod(operand_shapes(problem, 'forward').c)} |"
            )
            continue
        inputs, _, _, (a, b) = timed(functools.partial(random_operands, problem, variant, "bf16", 0), 1)
        med, low, high, c_ref = timed(functools.partial(reference, problem, variant, a, b), args.repeats)
        c_out = c_ref.astype(numpy_dtype("bf16"))
        tol = tolerance(problem, variant, "bf16")
        check, _, _, result = timed(functools.partial(verify, c_out, c_ref, tol), args.repeats)
        assert result.ok
        rate = problem.flops / 2 / med if variant == "forward" else rate
        print(
            f"| {variant} | {problem.text()} | {problem.flops / 1e9:.1f} | {inputs * 1e3:.0f} | "
            f"{med * 1e3:.0f} ({low * 1e3:.0f}-{high * 1e3:.0f}) | {problem.flops / 2 / med / 1e9:.1f} | "
            f"{check * 1e3:.0f} | {c_ref.size} |"
        )
    sampled_check(max(_problems("benchmark-forward-300", Variant.FORWARD), key=lambda p: p.flops))


if __name__ == "__main__":
    main()
