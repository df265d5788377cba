"""``ckspace plan``: choose the kernel set a workload needs, with CP-SAT over the selector's
predictions (:mod:`ckspace.planning.plan`, :mod:`ckspace.planning.workload`)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TextIO

from ckspace.commands.common import (
    add_format_argument,
    add_target_arguments,
    data_set_help,
    problems_file,
    target_from_args,
    write_report,
)
from ckspace.core.errors import CkspaceError
from ckspace.workloads.datasets import Kind
from ckspace.workloads.problem_keys import COLUMNS_HELP

NAME = "plan"
HELP = "choose the kernels a workload needs: best predicted efficiency for a budget, or fewest for an efficiency"
FORMATS = ("names", "json")
HEADER = "# ckspace plan"
"""How a plan's ``names`` output begins: ``# ckspace plan ARCH VARIANT DTYPE, ...``; names carry no
arch, so ``emit --kernels`` reads the arch they were planned for here (:func:`planned_arch`)."""


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--arch", required=True, help="GPU target, e.g. gfx950")
    parser.add_argument("--variant", required=True, help="forward, bwd_data or bwd_weight")
    parser.add_argument("--dtype", required=True, help="fp16, bf16 or fp32")
    parser.add_argument(
        "--problems",
        required=True,
        type=problems_file,
        metavar="CSV",
        help=f"the workload: a problems CSV, the format of MIOpen's and upstream's problem lists ({COLUMNS_HELP}; "
        "C and K are totals over the groups), " + data_set_help(Kind.PROBLEMS),
    )
    parser.add_argument("--weights", metavar="COLUMN", help="the column saying how much each problem counts")
    goal = parser.add_mutually_exclusive_group(required=True)
    goal.add_argument("--budget", type=int, metavar="K", help="at most K kernels: the best predicted efficiency")
    goal.add_argument(
        "--min-efficiency",
        type=float,
        metavar="E",
        help="the fewest kernels whose weighted mean predicted efficiency reaches E percent",
    )
    registry = parser.add_mutually_exclusive_group()
    registry.add_argument(
        "--candidates",
        type=Path,
        metavar="PATH",
        help="the registry: kernel names (one per line), a build manifest or a tree ckspace emit "
        "wrote (its manifest.json); default: the rule set's kernels",
    )
    registry.add_argument("--rule-set", help="the registry: every GEMM kernel of this rule set (default: full)")
    parser.add_argument(
        "--where",
        action="append",
        default=[],
        metavar="EXPR",
        help="with --rule-set: filter on config fields (repeatable)",
    )
    add_target_arguments(parser)
    parser.add_argument("--model", type=Path, metavar="DIR", help="a model directory instead of the shipped one")
    parser.add_argument(
        "--top",
        type=int,
        default=None,
        metavar="T",
        help="keep each problem's T best-ranked candidates in the model (default: 64; 0: all)",
    )
    parser.add_argument(
        "--time-limit",
        type=float,
        default=None,
        metavar="S",
        help="CP-SAT deterministic time per solve (about seconds; default: 20)",
    )
    parser.add_argument("--seed", type=int, default=0, help="the solver's seed, a 32-bit integer (default: 0)")
    add_format_argument(
        parser,
        FORMATS,
        "; names: the kernels to emit, with the report as '#' comments (feeds `ckspace emit --kernels`)",
    )


def _check(args: argparse.Namespace) -> None:
    from ckspace.planning.plan import BUDGET_MAX, SEED_RANGE, TIME_LIMIT_MAX

    if args.budget is not None and not 1 <= args.budget <= BUDGET_MAX:
        raise CkspaceError(
            f"--budget {args.budget}: valid: at least 1 and at most {BUDGET_MAX:,} kernels (the solver's range)"
        )
    if not SEED_RANGE[0] <= args.seed <= SEED_RANGE[1]:
        raise CkspaceError(
            f"--seed {args.seed}: valid: an integer from {SEED_RANGE[0]:,} to {SEED_RANGE[1]:,} "
            "(the solver's 32-bit seed)"
        )
    if args.min_efficiency is not None and not 0 < args.min_efficiency <= 100:
        raise CkspaceError(f"--min-efficiency is a percentage in (0, 100], not {args.min_efficiency:g}")
    if args.top is not None and args.top < 0:
        raise CkspaceError(f"--top must be 0 (keep all) or more, not {args.top}")
    if args.time_limit is not None and not 0 < args.time_limit <= TIME_LIMIT_MAX:
        raise CkspaceError(
            f"--time-limit {args.time_limit:g}: valid: more than 0 and at most {TIME_LIMIT_MAX:g} deterministic seconds"
        )
    if args.candidates is not None and args.where:
        raise CkspaceError("--where narrows a rule set: not with --candidates")


def _space(args: argparse.Namespace, ndims: list[int], target):
    """The rule set's space in ``target`` (None with --candidates), refused at once when too large to
    rank or when the rule set holds no kernel of the direction (before any model loads)."""
    if args.candidates is not None:
        return None
    from ckspace.commands.select import CANDIDATE_LIMIT, table_rule_sets
    from ckspace.space.rule_set_choice import refuse_rule_set_without_kernels
    from ckspace.space.space import Space

    space = Space(args.arch, args.variant, ndims, args.dtype, args.rule_set or "full", where=args.where, ck=target)
    space.refuse_beyond(
        CANDIDATE_LIMIT,
        "plan ranks",
        f"--where EXPR, a rule set with a table ({table_rule_sets()}) or --candidates FILE",
    )
    refuse_rule_set_without_kernels(space)
    return space


def _registry(args: argparse.Namespace, selector, ndims: list[int], space) -> list:
    if space is None:
        from ckspace.commands.select import of_cell, read_candidates

        return of_cell(read_candidates(args.candidates, selector.arch), selector, args.candidates)
    candidates = [c for c in space if c.kind == "gemm"]
    if not candidates:
        raise CkspaceError(
            f"the registry is empty: no {selector.variant.value} {selector.dtype.value} GEMM kernel "
            f"of rule set {args.rule_set or 'full'} for {selector.arch} "
            f"{'/'.join(f'{n}D' for n in ndims)}{' matches --where' if args.where else ''}"
        )
    return candidates


def run(args: argparse.Namespace, out: TextIO) -> int:
    _check(args)
    from ckspace.core.vocab import Variant
    from ckspace.planning.plan import DEFAULT_TIME_LIMIT, DEFAULT_TOP, solve_plan
    from ckspace.planning.workload import read_workload
    from ckspace.select.selector import Selector

    workload = read_workload(args.problems, Variant.parse(args.variant), args.weights)
    ndims = sorted({p.ndim for p in workload.problems})
    target = target_from_args(args)  # one target for the registry and the selector's fallbacks
    space = _space(args, ndims, target)  # a registry too large to rank is refused before any model loads
    selector = Selector.load(args.arch, args.variant, args.dtype, model_dir=args.model, ck=target)
    candidates = _registry(args, selector, ndims, space)
    predictions = _predict(selector, candidates, workload)
    top = DEFAULT_TOP if args.top is None else (args.top or None)
    result = solve_plan(
        predictions.instance,
        budget=args.budget,
        min_efficiency=None if args.min_efficiency is None else args.min_efficiency / 100.0,
        top=top,
        time_limit=args.time_limit or DEFAULT_TIME_LIMIT,
        workers=1,
        seed=args.seed,
    )
    report = _report(args, selector, workload, predictions, result, len(candidates))
    write_report(out, args.format, report, _names_text)
    return 0


def _predict(selector, candidates, workload):
    """The predictions, with a progress bar on a terminal (a 1,000-problem workload over a whole
    registry takes seconds)."""
    from ckspace.environment.progress import counting_bar
    from ckspace.planning.workload import predicted_instance

    with counting_bar(enabled=sys.stderr.isatty(), transient=True, stderr=True) as bar:
        task = bar.add_task("predicting", total=len(workload.problems))
        return predicted_instance(selector, candidates, workload, advance=lambda: bar.advance(task))


def _report(args, selector, workload, predictions, result, registry_size: int) -> dict:
    """Everything the plan says, JSON-friendly and deterministic (no timings)."""
    from ckspace.core.vocab import ScoreSource

    instance = predictions.instance
    picks = instance.picks(result.chosen)
    efficiencies = instance.efficiencies(result.chosen)
    problems, unrunnable = [], []
    for p, problem in enumerate(workload.problems):
        if picks[p] < 0:
            unrunnable.append(problem.text())
            continue
        problems.append(
            {
                "problem": problem.text(),
                "weight": float(workload.weights[p]),
                "kernel": predictions.kernels[int(instance.order[p][picks[p]])],
                "predicted_tflops": float(predictions.tflops[p][picks[p]]),
                "best_predicted_tflops": float(predictions.best_tflops[p]),
                "efficiency": round(100.0 * float(efficiencies[p]), 4),
            }
        )
    kernels = sorted(predictions.kernels[c] for c in result.chosen)
    extrapolated = {
        predictions.kernels[c]: predictions.extrapolated[c]
        for c in sorted(result.chosen)
        if predictions.extrapolated and predictions.extrapolated[c] is not None
    }
    variants = sorted(predictions.kernels[c] for c in result.chosen if c >= predictions.registry)
    mode = {"budget": args.budget} if args.budget is not None else {"min_efficiency": args.min_efficiency}
    return {
        "arch": selector.arch,
        "variant": selector.variant.value,
        "dtype": selector.dtype.value,
        **mode,
        "target": selector.target.record(),
        "source": predictions.source,
        "what_drives_what": (
            "the ranker's score orders the candidates of each problem (the pick inside the set "
            "is the first of that order, as the selector picks); the regressor's predicted "
            "TFLOPS, capped at the kernel ranked above as the selector shows them, give the "
            "efficiency: the pick's over the best of the whole registry"
            if predictions.source is ScoreSource.MODEL
            else "no model: the analytical performance model both orders and values the candidates"
        ),
        "extrapolated": dict(sorted(extrapolated.items())),
        "status": result.status,
        "gap": round(100.0 * result.gap, 4),
        "time_limit": result.time_limit,
        "pruned_to": result.pruned_to,
        "registry": registry_size,
        "fallback_variants": predictions.instance.items - predictions.registry,
        "rows": workload.rows,
        "distinct_problems": len(workload.problems),
        "skipped_rows": list(workload.skipped),
        "efficiency": round(100.0 * instance.value_of(result.chosen), 4),
        "model_efficiency": round(100.0 * result.model_value, 4),
        "kernels": kernels,
        "vector_variants": variants,
        "configs": {predictions.kernels[c]: predictions.configs[c].fields() for c in sorted(result.chosen)},
        "unrunnable": unrunnable,
        "problems": problems,
    }


def _names_text(report: dict) -> str:
    goal = f"budget {report['budget']}" if "budget" in report else f"min efficiency {report['min_efficiency']:g} %"
    status = (
        "optimal"
        if report["status"] == "optimal"
        else f"feasible (gap {report['gap']:.2f} %, time limit {report['time_limit']:g} deterministic s)"
    )
    pruning = (
        f"each problem pruned to its {report['pruned_to']} best-ranked candidates (the model's value "
        f"{report['model_efficiency']:.2f} % is a lower bound)"
        if report["pruned_to"]
        else "no pruning"
    )
    lines = [
        f"{HEADER} {report['arch']} {report['variant']} {report['dtype']}, {goal}: {status}",
        f"# target: {report['target']['note']}",
        f"# {len(report['kernels'])} kernels of {report['registry']} candidates and {report['fallback_variants']} "
        f"vector variants their fallbacks reach ({len(report['vector_variants'])} chosen); "
        f"weighted mean predicted efficiency {report['efficiency']:.2f} % over "
        f"{len(report['problems'])} problems; {pruning}",
        f"# {report['what_drives_what']}",
    ]
    if report["extrapolated"]:
        lines.append(
            f"# {len(report['extrapolated'])} of the {len(report['kernels'])} chosen kernels are extrapolated "
            "(outside the model's training domain: its estimate of the nearest kernel it saw, scaled by the "
            "analytical model):"
        )
        lines += [f"#   {name}: {why}" for name, why in report["extrapolated"].items()]
    elif report["source"] == "model":
        lines.append("# every chosen kernel is inside the model's training domain")
    if report["unrunnable"]:
        lines.append(f"# {len(report['unrunnable'])} problems nothing can run: " + "; ".join(report["unrunnable"]))
    if report["skipped_rows"]:
        lines.append(
            f"# {len(report['skipped_rows'])} rows describe no convolution: " + "; ".join(report["skipped_rows"])
        )
    lines += [
        f"# {p['efficiency']:7.2f} %  {p['predicted_tflops']:8.2f} TFLOPS  {p['problem']}  -> {p['kernel']}"
        for p in report["problems"]
    ]
    lines += report["kernels"]
    return "\n".join(lines) + "\n"


def planned_arch(text: str) -> str | None:
    """The arch the kernels of a ``names`` output were planned for (None: the text is no plan's)."""
    header = next((line for line in text.splitlines() if line.startswith(f"{HEADER} ")), None)
    return None if header is None else header.removeprefix(f"{HEADER} ").split(" ", 1)[0]
