"""Benchmark: rule set ``open`` counted, listed and sampled without enumeration, beside Kernel Tuner.

In one run:

1. **One cell** (``--arch``, forward 2D bf16) and **the whole arch** (every variant, ndim and dtype):
   the exact count of ``open`` and the time to get it (cold: no tally memo), with ``--ck-root`` the
   CK revision's rules too.
2. **Listing**: the rate of ``Tally.iter_rows`` (int64 rows) over the first ``--list-rows`` configs of
   the cell, and of kernel names (``Space.iter_kernels``), and the time a whole listing would take.
3. **The same space built by Kernel Tuner**, on a narrowed cell (:data:`COMPARED`, about 1.4 M
   configs): ckspace's count and full listing beside Kernel Tuner 1.5's ``Searchspace``
   (python-constraint2 builder, ``PC_OptimizedBacktrackingSolver``) over the same domains with the
   same rules as restriction strings, printed from the very rule expressions.
4. **Brute force on a reduced domain** (:data:`REDUCED` on top): every assignment of the domains'
   product classified by the rules with numpy in chunks, beside ckspace and Kernel Tuner.

5. **The target beside the rule space**: the exact count of the whole arch for the target every
   command answers for (the CK headers found, less the known-wrong kernels) and for the rule space
   (``ck=None``), cold, in alternation (``--paired`` pairs), in wall and CPU time, with the paired
   ratio and the machine's load (``--paired-only`` runs this part alone).

Counts must be equal (the exit status says whether they are); times are the median of ``--repeat``
runs with min..max as the noise (brute force: one run).

Kernel Tuner is an optional dependency (``pip install ".[bench]"``); without it part 3 reports it
absent. Usage: ``python bench/open_space.py [--arch gfx942] [--ck-root PATH] [--repeat 3] [--paired 5]
[--paired-only]``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable
from itertools import islice
from math import prod

import numpy as np

from ckspace import Space
from ckspace.constraints.evaluators.count import domain_of
from ckspace.constraints.language.expr import (
    And,
    Arith,
    Cmp,
    Const,
    Expr,
    Field,
    In,
    Lookup,
    Not,
    Or,
    evaluate,
    fields_of,
)
from ckspace.core.fields import GEMM_FIELD_NAMES
from ckspace.space import counted as open_space

COMPARED = (
    "tile_m in [16, 32, 48, 64, 96, 128, 192, 256] and tile_n in [16, 32, 64, 128, 256]",
    "tile_k in [16, 32, 48, 64] and pipeline in [compv3, compv4, mem] and epilogue == cshuffle",
    "pad_m and pad_n and pad_k and not double_smem_buffer and num_groups_to_merge == 1 and not split_image",
    "specialization == default and not streamk_enabled and num_wave_groups == 1",
)
"""The narrowed forward 2D bf16 cell ckspace and Kernel Tuner construct (about 1.4 M configs)."""
REDUCED = "tile_m in [32, 64] and tile_n in [32, 64] and tile_k in [32, 64] and pipeline in [compv3, mem]"
"""Narrower still, for brute force: about 2 * 10^7 assignments."""


def python_text(expr: Expr) -> str:
    """A rule expression as a Python expression over the field names: Kernel Tuner's restriction
    strings. Division and modulo clamp the divisor to 1 as ckspace's evaluator does."""
    if isinstance(expr, Field):
        return expr.name
    if isinstance(expr, Const):
        return str(expr.value)
    if isinstance(expr, Arith):
        right = python_text(expr.right)
        if expr.op in ("//", "%") and not (isinstance(expr.right, Const) and expr.right.value >= 1):
            right = f"({right} + ({right} < 1) * (1 - {right}))"  # max(d, 1) without a call
        return f"({python_text(expr.left)} {expr.op} {right})"
    if isinstance(expr, Cmp):
        return f"({python_text(expr.left)} {expr.op} {python_text(expr.right)})"
    if isinstance(expr, In):
        if len(expr.items) == 1:
            return f"({python_text(expr.items[0])} in {sorted(v for (v,) in expr.table)})"
        items = ", ".join(python_text(i) for i in expr.items)
        return f"(({items}) in {sorted(expr.table)})"
    if isinstance(expr, Lookup):
        key = python_text(expr.key)  # as a sum of guarded terms: the restriction parser takes no calls
        keys = [k for k, _ in expr.mapping]
        terms = [f"{v} * ({key} == {k})" for k, v in expr.mapping]
        return "(" + " + ".join([*terms, f"{expr.default} * ({key} not in {keys})"]) + ")"
    if isinstance(expr, And):
        return "(" + " and ".join(python_text(p) for p in expr.parts) + ")"
    if isinstance(expr, Or):
        return "(" + " or ".join(python_text(p) for p in expr.parts) + ")"
    if isinstance(expr, Not):
        return f"(not {python_text(expr.part)})"
    raise TypeError(f"not an expression node: {expr!r}")


def timed(fn: Callable[[], object], repeat: int) -> tuple[object, float, float, float]:
    """The result and the median, min and max seconds of ``repeat`` runs."""
    times, result = [], None
    for _ in range(repeat):
        start = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - start)
    return result, statistics.median(times), min(times), max(times)


def cold_count(space: Space) -> int:
    open_space._tally.cache_clear()
    return space.count()


def show(label: str, median: float, low: float, high: float, extra: str = "") -> None:
    print(f"  {label:<44} {median:9.3f} s  ({low:.3f}..{high:.3f}){extra}")


def _conjuncts(expr: Expr) -> list[Expr]:
    return [c for part in expr.parts for c in _conjuncts(part)] if isinstance(expr, And) else [expr]


def domains_and_rules(space: Space) -> tuple[dict[str, list[int]], list[Expr]]:
    """The one cell's domains, narrowed by every conjunct of a rule that reads one field only (a
    filter's ``tile_k in [..]``, ``pad_m``), and the other conjuncts: what each builder starts from."""
    ((request, cell),) = open_space.places(space)
    domains: dict[str, list[int]] = {}
    conjuncts = []
    for rule in open_space.cell_rules(space, request, cell):
        found = domain_of(rule)
        if found is None:
            conjuncts += [c for c in _conjuncts(rule.expr) if c != Const(1)]
            continue
        field, values = found
        domains[field] = sorted(set(values) & set(domains.get(field, values)))
    others = []
    for c in conjuncts:
        fields = fields_of(c)
        if len(fields) == 1:
            (field,) = fields
            column = np.asarray(domains[field], dtype=np.int64)
            keep = np.broadcast_to(np.asarray(evaluate(c, {field: column}), dtype=bool), column.shape)
            domains[field] = column[keep].tolist()
        else:
            others.append(c)
    return domains, others


def brute_force(space: Space, chunk: int = 1 << 20) -> int:
    """Count by enumeration: every assignment of the domains' product, classified by the rules with
    numpy, ``chunk`` assignments at a time."""
    domains, rules = domains_and_rules(space)
    values = [np.asarray(domains[f], dtype=np.int64) for f in GEMM_FIELD_NAMES]
    shape = [len(v) for v in values]
    total, valid = prod(shape), 0
    for start in range(0, total, chunk):
        index = np.unravel_index(np.arange(start, min(total, start + chunk)), shape)
        cols = {f: v[i] for f, v, i in zip(GEMM_FIELD_NAMES, values, index, strict=True)}
        keep = np.ones(len(index[0]), dtype=bool)
        for expr in rules:
            keep &= np.broadcast_to(np.asarray(evaluate(expr, cols), dtype=bool), keep.shape)
        valid += int(keep.sum())
    return valid


def kernel_tuner(space: Space) -> int | None:
    """Build the space with Kernel Tuner's Searchspace (python-constraint2); its size."""
    try:
        from kernel_tuner.searchspace import Searchspace
    except ImportError:
        return None
    domains, rules = domains_and_rules(space)
    restrictions = [python_text(expr) for expr in rules]
    built = Searchspace(
        {f: domains[f] for f in GEMM_FIELD_NAMES},
        restrictions,
        1 << 30,
        block_size_names=[],
        framework="PythonConstraint",
        solver_method="PC_OptimizedBacktrackingSolver",
    )
    return built.size


def paired_target(arch: str, pairs: int) -> None:
    """The whole arch counted cold for the target and for the rule space, in alternation (the order
    inside a pair alternates too), wall and CPU time, with each pair's ratio target / rule space."""
    spaces = {"target": Space(arch, rule_set="open"), "rule space": Space(arch, rule_set="open", ck=None)}
    wall: dict[str, list[float]] = {name: [] for name in spaces}
    cpu: dict[str, list[float]] = {name: [] for name in spaces}
    counts: dict[str, int] = {}
    loads = []
    for i in range(pairs):
        for name in list(spaces) if i % 2 == 0 else list(spaces)[::-1]:
            start, start_cpu = time.perf_counter(), time.process_time()
            counts[name] = cold_count(spaces[name])
            wall[name].append(time.perf_counter() - start)
            cpu[name].append(time.process_time() - start_cpu)
        loads.append(os.getloadavg()[0])
    print(f"5. the target beside the rule space: whole {arch} counted cold, {pairs} pairs in alternation")
    print(f"  ({spaces['target'].target.describe()})")
    for clock, measured in (("wall", wall), ("CPU", cpu)):
        for name in spaces:
            show(f"{clock}, {name}: {counts[name]:,}", statistics.median(measured[name]), *_range(measured[name]))
        ratios = [a / b for a, b in zip(measured["target"], measured["rule space"], strict=True)]
        median = statistics.median(ratios)
        print(f"  {clock} ratio target / rule space: {median:.2f} ({min(ratios):.2f}..{max(ratios):.2f})")
    print(f"  load average (1 min) during the pairs: {min(loads):.1f}..{max(loads):.1f} on {os.cpu_count()} CPUs")


def _range(values: list[float]) -> tuple[float, float]:
    return min(values), max(values)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arch", default="gfx942")
    parser.add_argument("--ck-root", default=None, help="apply this CK revision's rules too")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--list-rows", type=int, default=2_000_000)
    parser.add_argument("--paired", type=int, default=5, help="pairs of part 5 (target beside the rule space)")
    parser.add_argument("--paired-only", action="store_true", help="run part 5 alone")
    args = parser.parse_args()
    if args.paired_only:
        paired_target(args.arch, args.paired)
        return 0

    def narrowed(space: Space) -> Space:
        if args.ck_root is None:
            return space
        from ckspace.environment.ck_header_cache import find_revision

        return space.for_ck(find_revision(args.ck_root))

    cell = narrowed(Space(args.arch, "forward", 2, "bf16", rule_set="open", ck=None))  # the rule space unless --ck-root
    arch = narrowed(Space(args.arch, rule_set="open", ck=None))
    print(f"1. exact counts of rule set open on {args.arch}{' with CK rules' if args.ck_root else ''} (cold)")
    count, *t = timed(lambda: cold_count(cell), args.repeat)
    show(f"one cell forward/2d/bf16: {count:,}", *t)
    whole, *t = timed(lambda: cold_count(arch), args.repeat)
    show(f"whole arch (27 cells): {whole:,}", *t)

    print("2. listing the cell (rank order, constant memory)")
    ((request, one),) = open_space.places(cell)
    tally = open_space.tally(cell, request, one)
    rows = min(args.list_rows, tally.count)
    _, *t = timed(lambda: sum(len(r) for r in tally.iter_rows(0, rows)), args.repeat)
    per = t[0] / rows
    show(f"{rows:,} rows", *t, f"  = {per * 1e9:.0f} ns/config; whole cell ~{per * tally.count / 3600:,.1f} h")
    names = min(200_000, tally.count)
    _, *t = timed(lambda: sum(1 for k in islice(cell.iter_kernels(), names) if k.name), args.repeat)
    show(f"{names:,} kernel names", *t, f"  = {t[0] / names * 1e9:.0f} ns/config")

    print("3. the same narrowed cell (forward/2d/bf16 with --where " + " / ".join(COMPARED) + ")")
    small = cell.where(*COMPARED)
    domains, rules = domains_and_rules(small)
    print(f"  domain product {prod(len(v) for v in domains.values()):,}; {len(rules)} rule conjuncts on several fields")
    counted, *t = timed(lambda: cold_count(small), args.repeat)
    show(f"ckspace count: {counted:,}", *t)
    ((request, one),) = open_space.places(small)
    listed, *t_list = timed(lambda: sum(len(r) for r in open_space.tally(small, request, one).iter_rows()), args.repeat)
    show(f"ckspace list all: {listed:,}", *t_list, f"  = {t_list[0] / max(listed, 1) * 1e9:.0f} ns/config")
    tuned, *t_kt = timed(lambda: kernel_tuner(small), args.repeat)
    if tuned is None:
        print("  Kernel Tuner: not installed (pip install '.[bench]')")
    else:
        show(f"Kernel Tuner 1.5 Searchspace: {tuned:,}", *t_kt, f"  = {t_kt[0] / max(tuned, 1) * 1e9:.0f} ns/config")
        print(
            f"  counts equal: {counted == listed == tuned}; listing is "
            f"{(t_kt[0] / max(tuned, 1)) / (t_list[0] / max(listed, 1)):.0f}x faster per config than Kernel "
            f"Tuner's construction (slowest listing vs fastest construction: "
            f"{(t_kt[1] / max(tuned, 1)) / (t_list[2] / max(listed, 1)):.0f}x)"
        )

    print("4. brute force on a reduced domain (3. with --where " + REDUCED + ")")
    reduced = small.where(REDUCED)
    domains, _ = domains_and_rules(reduced)
    print(f"  domain product {prod(len(v) for v in domains.values()):,}")
    counted_r, *t = timed(lambda: cold_count(reduced), args.repeat)
    show(f"ckspace count: {counted_r:,}", *t)
    brute, *t = timed(lambda: brute_force(reduced), 1)
    show(f"brute force (numpy, chunked; one run): {brute:,}", *t)
    tuned_r, *t = timed(lambda: kernel_tuner(reduced), args.repeat)
    if tuned_r is not None:
        show(f"Kernel Tuner 1.5 Searchspace: {tuned_r:,}", *t)
    equal = counted == listed and tuned in (None, counted) and counted_r == brute and tuned_r in (None, brute)
    print(f"  counts equal: {equal}")
    paired_target(args.arch, args.paired)
    return 0 if equal else 1


if __name__ == "__main__":
    raise SystemExit(main())
