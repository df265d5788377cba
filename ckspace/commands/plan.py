"""``ckspace plan``: choose the kernel set a workload needs, with CP-SAT over the selector's
predictions (:mod:`ckspace.planning.plan`, :mod:`ckspace.planning.workload`). Several archs (a
fleet) get one plan each, from each arch's own target and scorer, with a budget per arch or one in
all (:mod:`ckspace.planning.fleet`); the ``names`` output then has a section per arch, which is
what ``ckspace emit --arch A B --kernels`` reads (:func:`planned_sections`)."""

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
arch, so ``emit --kernels`` reads the arch they were planned for here (:func:`planned_sections`)."""


def configure(parser: argparse.ArgumentParser) -> None:
    _add_workload_arguments(parser)
    _add_goal_arguments(parser)
    _add_registry_arguments(parser)
    _add_solver_arguments(parser)
    add_format_argument(
        parser,
        FORMATS,
        "; names: the kernels to emit, with the report as '#' comments (feeds `ckspace emit --kernels`)",
    )


def _add_workload_arguments(parser: argparse.ArgumentParser) -> None:
    """The cell and the problems to serve: what the plan's kernels must run, weighed as the user says."""
    parser.add_argument(
        "--arch",
        required=True,
        nargs="+",
        action="extend",
        metavar="ARCH",
        help="GPU target, e.g. gfx950; several (gfx942 gfx950): one plan per arch for a fleet, each from its own "
        "target and model, written as sections `ckspace emit --arch ... --kernels` takes",
    )
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


def _add_goal_arguments(parser: argparse.ArgumentParser) -> None:
    """How many kernels, or how good: exactly one goal, since a budget and an efficiency target pull
    the solve in opposite directions."""
    goal = parser.add_mutually_exclusive_group(required=True)
    goal.add_argument(
        "--budget", type=int, metavar="K", help="at most K kernels (for each arch): the best predicted efficiency"
    )
    goal.add_argument(
        "--total-budget",
        type=int,
        metavar="K",
        help="at most K kernels over all the archs, each arch's kernels counted apart: one solve gives them "
        "where they raise the mean of the archs' predicted efficiencies most (one arch: as --budget)",
    )
    goal.add_argument(
        "--min-efficiency",
        type=float,
        metavar="E",
        help="the fewest kernels whose weighted mean predicted efficiency reaches E percent (on each arch)",
    )


def _add_registry_arguments(parser: argparse.ArgumentParser) -> None:
    """Where the candidates come from and what ranks them: the registry, its target and the model."""
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
    parser.add_argument(
        "--model",
        type=Path,
        metavar="DIR",
        help="a model directory instead of the shipped one (several archs: of the arch its card names)",
    )


def _add_solver_arguments(parser: argparse.ArgumentParser) -> None:
    """The solve's size and time, traded against its optimality; the seed keeps plans reproducible."""
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


def _check(args: argparse.Namespace) -> None:
    from ckspace.planning.plan import BUDGET_MAX, SEED_RANGE, TIME_LIMIT_MAX

    for option, budget in (("--budget", args.budget), ("--total-budget", args.total_budget)):
        if budget is not None and not 1 <= budget <= BUDGET_MAX:
            raise CkspaceError(
                f"{option} {budget}: valid: at least 1 and at most {BUDGET_MAX:,} kernels (the solver's range)"
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


def _archs(args: argparse.Namespace) -> list[str]:
    """The archs of ``--arch``, each spelled as ckspace spells it; an unknown one, one named twice
    (in any spelling) or, in a fleet, one without the hardware facts scoring needs is bad input,
    named with the valid choices: a fleet's plan has one section per arch, and two of one arch
    would be two plans for the same machines."""
    from ckspace.core.vocab import arch_names, parse_arch

    archs = [parse_arch(a) for a in args.arch]
    twice = sorted({a for a in archs if archs.count(a) > 1})
    if twice:
        raise CkspaceError(
            f"--arch {' '.join(args.arch)}: {', '.join(twice)} named twice; valid: each of "
            f"{', '.join(arch_names())} at most once"
        )
    if len(archs) > 1:  # every arch is scored, so each needs the hardware facts: all asked before any work
        from ckspace.features.hardware import hardware_facts

        for arch in archs:
            hardware_facts(arch)
    return archs


def _space(args: argparse.Namespace, arch: str, ndims: list[int], target):
    """The rule set's space in ``target`` (None with --candidates), refused at once when too large to
    rank or when the rule set holds no kernel of the direction (before any model loads)."""
    if args.candidates is not None:
        return None
    from ckspace.commands.select import CANDIDATE_LIMIT, table_rule_sets
    from ckspace.space.rule_set_choice import refuse_rule_set_without_kernels
    from ckspace.space.space import Space

    space = Space(arch, args.variant, ndims, args.dtype, args.rule_set or "full", where=args.where, ck=target)
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
    from ckspace.commands.select import gemm_kernels

    empty = (
        f"the registry is empty: no {selector.variant.value} {selector.dtype.value} GEMM kernel "
        f"of rule set {args.rule_set or 'full'} for {selector.arch} "
        f"{'/'.join(f'{n}D' for n in ndims)}{' matches --where' if args.where else ''}"
    )
    return gemm_kernels(space, empty)


def run(args: argparse.Namespace, out: TextIO) -> int:
    _check(args)
    from ckspace.core.vocab import Variant
    from ckspace.planning.workload import read_workload

    archs = _archs(args)
    models = _fleet_models(args.model, archs) if len(archs) > 1 else {}  # a model for none of them: refused first
    workload = read_workload(args.problems, Variant.parse(args.variant), args.weights)
    target = target_from_args(args)  # one target for the registry and the selector's fallbacks
    if len(archs) > 1:
        return _run_fleet(args, archs, models, workload, target, out)
    if args.total_budget is not None:  # a fleet of one: its total budget is its budget
        args.budget, args.total_budget = args.total_budget, None
    selector, predictions, registry_size = _arch_predictions(args, archs[0], workload, target, args.model)
    result = _solve(args, predictions.instance)
    report = _report(args, selector, workload, predictions, result, registry_size)
    write_report(out, args.format, report, _names_text)
    return 0


def _arch_predictions(args: argparse.Namespace, arch: str, workload, target, model: Path | None):
    """``arch``'s selector (``model``, else the shipped one or the analytical model), its registry
    of candidates in ``target`` and its predictions for the workload: what its plan is solved on."""
    from ckspace.select.selector import Selector

    ndims = sorted({p.ndim for p in workload.problems})
    space = _space(args, arch, ndims, target)  # a registry too large to rank is refused before any model loads
    selector = Selector.load(arch, args.variant, args.dtype, model_dir=model, ck=target)
    candidates = _registry(args, selector, ndims, space)
    return selector, _predict(selector, candidates, workload), len(candidates)


def _predict(selector, candidates, workload):
    """The predictions, with a progress bar on a terminal (a 1,000-problem workload over a whole
    registry takes seconds)."""
    from ckspace.environment.progress import counting_bar
    from ckspace.planning.workload import predicted_instance

    with counting_bar(enabled=sys.stderr.isatty(), transient=True, stderr=True) as bar:
        task = bar.add_task(f"predicting for {selector.arch}", total=len(workload.problems))
        return predicted_instance(selector, candidates, workload, advance=lambda: bar.advance(task))


def _solving(args: argparse.Namespace) -> dict:
    """How every solve of this command runs: the kept candidates, the time limit, one worker, the seed."""
    from ckspace.planning.plan import DEFAULT_TIME_LIMIT, DEFAULT_TOP

    top = DEFAULT_TOP if args.top is None else (args.top or None)
    return {"top": top, "time_limit": args.time_limit or DEFAULT_TIME_LIMIT, "workers": 1, "seed": args.seed}


def _solve(args: argparse.Namespace, instance):
    """One arch's plan of ``instance`` for ``--budget`` or ``--min-efficiency``."""
    from ckspace.planning.plan import solve_plan

    return solve_plan(
        instance,
        budget=args.budget,
        min_efficiency=None if args.min_efficiency is None else args.min_efficiency / 100.0,
        **_solving(args),
    )


def _run_fleet(
    args: argparse.Namespace, archs: list[str], models: dict[str, Path], workload, target, out: TextIO
) -> int:
    """One plan per arch of ``archs``, each from its own target's candidates and its own scorer:
    apart for ``--budget`` and ``--min-efficiency`` (each arch's plan is its one-arch plan), or in
    one solve over all the archs for ``--total-budget`` (:mod:`ckspace.planning.fleet`)."""
    from ckspace.planning.fleet import solve_total
    from ckspace.planning.plan import PlanInfeasibleError

    planned = {arch: _arch_predictions(args, arch, workload, target, models.get(arch)) for arch in archs}
    joint = None
    try:
        if args.total_budget is None:
            results = {}
            for arch, (_, predictions, _) in planned.items():
                where = arch  # a negative answer names the arch it is for
                results[arch] = _solve(args, predictions.instance)
        else:
            where = f"{' + '.join(archs)} together"
            instances = [predictions.instance for _, predictions, _ in planned.values()]
            joint, shares = solve_total(instances, args.total_budget, **_solving(args))
            results = dict(zip(archs, shares, strict=True))
    except PlanInfeasibleError as exc:
        raise PlanInfeasibleError(f"{where}: {exc}") from None
    reports = {
        arch: _report(args, selector, workload, predictions, results[arch], size)
        for arch, (selector, predictions, size) in planned.items()
    }
    report = _fleet_report(args, reports, {arch: _estimates(planned[arch][0], models) for arch in archs}, joint)
    write_report(out, args.format, report, _fleet_names_text)
    return 0


def _fleet_models(model: Path | None, archs: list[str]) -> dict[str, Path]:
    """``--model`` as the model of the arch its card names (the others keep the shipped model or the
    analytical one, as ``emit --model`` does for a library of several archs); a model of none of
    ``archs`` is bad input."""
    if model is None:
        return {}
    from ckspace.select.store import load_model

    card = load_model(model)[2]
    if card.arch not in archs:
        raise CkspaceError(
            f"--model {model} is a {card.arch} model, for none of the archs {' '.join(archs)}: plan for "
            f"{card.arch} too, or leave --model out"
        )
    return {card.arch: model}


def _estimates(selector, models: dict[str, Path]) -> str:
    """Where an arch's estimates come from, in words: the model ``--model`` named, the shipped model
    of its cell, or the analytical performance model where it has none."""
    from ckspace.core.vocab import ScoreSource

    cell = f"{selector.arch} {selector.variant.value} {selector.dtype.value}"
    if selector.source is not ScoreSource.MODEL:
        return f"the analytical performance model (no model for {cell})"
    if selector.arch in models:
        return f"the model at {models[selector.arch]} ({cell})"
    return f"the shipped model of {cell}"


def _goal(args: argparse.Namespace) -> dict:
    """What the plan was asked, as its report's one key: ``budget``, ``total_budget`` or ``min_efficiency``."""
    if args.budget is not None:
        return {"budget": args.budget}
    if args.total_budget is not None:
        return {"total_budget": args.total_budget}
    return {"min_efficiency": args.min_efficiency}


def _report(args, selector, workload, predictions, result, registry_size: int) -> dict:
    """Everything the plan says, JSON-friendly and deterministic (no timings)."""
    instance = predictions.instance
    problems, unrunnable = _problem_rows(workload, predictions, result)
    chosen = sorted(result.chosen)
    extrapolated = {
        predictions.kernels[c]: predictions.extrapolated[c]
        for c in chosen
        if predictions.extrapolated and predictions.extrapolated[c] is not None
    }
    return {
        "arch": selector.arch,
        "variant": selector.variant.value,
        "dtype": selector.dtype.value,
        **_goal(args),
        "target": selector.target.record(),
        "source": predictions.source,
        "what_drives_what": _what_drives_what(predictions.source),
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
        "kernels": sorted(predictions.kernels[c] for c in result.chosen),
        "vector_variants": sorted(predictions.kernels[c] for c in result.chosen if c >= predictions.registry),
        "configs": {predictions.kernels[c]: predictions.configs[c].fields() for c in chosen},
        "unrunnable": unrunnable,
        "problems": problems,
    }


def _problem_rows(workload, predictions, result) -> tuple[list[dict], list[str]]:
    """Each problem's pick inside the chosen set and its efficiency against the whole registry's
    best, and apart the problems no chosen kernel runs: the plan's promise, checked row by row."""
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
    return problems, unrunnable


def _what_drives_what(source) -> str:
    """Which numbers order the candidates and which value them, so a reader of the efficiencies
    knows whether a model or the analytical estimate stands behind them."""
    from ckspace.core.vocab import ScoreSource

    if source is ScoreSource.MODEL:
        return (
            "the ranker's score orders the candidates of each problem (the pick inside the set "
            "is the first of that order, as the selector picks); the regressor's predicted "
            "TFLOPS, capped at the kernel ranked above as the selector shows them, give the "
            "efficiency: the pick's over the best of the whole registry"
        )
    return "no model: the analytical performance model both orders and values the candidates"


def _names_text(report: dict) -> str:
    goal = (
        f"budget {report['budget']}"
        if "budget" in report
        else f"total budget {report['total_budget']} ({len(report['kernels'])} kernels here)"
        if "total_budget" in report
        else f"min efficiency {report['min_efficiency']:g} %"
    )
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


def _fleet_report(args, reports: dict[str, dict], estimates: dict[str, str], joint) -> dict:
    """A fleet's plan: each arch's plan (as its one-arch plan reports it), what each arch gets, where
    its estimates come from, and the kernels chosen for several archs (one kernel by its config, the
    arch aside: emitted once, compiled for each)."""
    from ckspace.core.config import GemmConfig

    first = next(iter(reports.values()))
    holders: dict[tuple, list[str]] = {}
    names: dict[tuple, str] = {}
    for arch, report in reports.items():
        for name, fields in report["configs"].items():
            key = GemmConfig.from_fields(fields).kernel_key()._replace(arch="")
            holders.setdefault(key, []).append(arch)
            names[key] = name
    shared = {names[key]: archs for key, archs in holders.items() if len(archs) > 1}
    serving = [r for r in reports.values() if r["problems"]]  # an arch that runs none of the workload counts not
    return {
        "archs": list(reports),
        "variant": first["variant"],
        "dtype": first["dtype"],
        **_goal(args),
        "how": (
            "one solve over every arch's candidates gives each arch the kernels where they raise the mean of the "
            "archs' weighted mean predicted efficiencies most (each arch weighs the same; a kernel of two archs "
            "counts for each)"
            if joint is not None
            else "each arch planned apart, as its one-arch plan"
        ),
        **(
            {"status": joint.status, "gap": round(100.0 * joint.gap, 4), "kernels": len(joint.chosen)}
            if joint is not None
            else {"kernels": sum(len(r["kernels"]) for r in reports.values())}
        ),
        "mean_efficiency": round(sum(r["efficiency"] for r in serving) / max(len(serving), 1), 4),
        "per_arch": {
            arch: {
                "kernels": len(report["kernels"]),
                "efficiency": report["efficiency"],
                "source": report["source"],
                "estimates": estimates[arch],
                "status": report["status"],
            }
            for arch, report in reports.items()
        },
        "shared": dict(sorted(shared.items())),
        "plans": reports,
    }


def _fleet_names_text(report: dict) -> str:
    """The fleet's summary as ``#`` comments, then each arch's plan as its one-arch ``names`` output
    (a section per arch, its header naming the arch: what ``emit --kernels`` reads,
    :func:`planned_sections`)."""
    goal = (
        f"budget {report['budget']} per arch"
        if "budget" in report
        else f"total budget {report['total_budget']}"
        if "total_budget" in report
        else f"min efficiency {report['min_efficiency']:g} % on each arch"
    )
    joint = (
        f": {report['status']}" + (f" (gap {report['gap']:.2f} %)" if report["status"] != "optimal" else "")
        if "status" in report
        else ""
    )
    lines = [
        f"{FLEET_HEADER} {' '.join(report['archs'])} {report['variant']} {report['dtype']}, {goal}{joint}",
        f"# {report['how']}",
        f"# {report['kernels']} kernels in all; mean of the archs' predicted efficiencies "
        f"{report['mean_efficiency']:.2f} %",
    ]
    lines += [
        f"#   {arch}: {a['kernels']} kernels, weighted mean predicted efficiency {a['efficiency']:.2f} %, "
        f"estimated by {a['estimates']}"
        for arch, a in report["per_arch"].items()
    ]
    idle = [arch for arch, plan in report["plans"].items() if not plan["problems"]]
    if idle:
        lines.append(f"# {' '.join(idle)}: no candidate runs any problem of the workload (left out of the mean)")
    if report["shared"]:
        lines.append(f"# {len(report['shared'])} kernels chosen for several archs (emitted once, compiled for each):")
        lines += [f"#   {name}: {' '.join(archs)}" for name, archs in report["shared"].items()]
    else:
        lines.append("# no kernel is chosen for several archs")
    return "\n".join(lines) + "\n" + "".join(_names_text(plan) for plan in report["plans"].values())


FLEET_HEADER = "# ckspace fleet plan"
"""How a fleet plan's ``names`` output begins; each arch's section follows under its own :data:`HEADER`."""


def planned_sections(text: str) -> dict[str, list[str]] | None:
    """The kernels of a plan's ``names`` output, per arch it was planned for, in its order (a fleet
    plan has a section per arch, a one-arch plan one); None when the text is no plan's (a list of
    names). Names carry no arch: the section they stand in says which arch's kernels they are."""
    sections: dict[str, list[str]] = {}
    arch = None
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if line.startswith(f"{HEADER} "):
            arch = line.removeprefix(f"{HEADER} ").split(" ", 1)[0].rstrip(",")
            sections.setdefault(arch, [])
        elif line and not line.startswith("#"):
            if arch is None:  # a list of names, unless a plan's header follows
                if any(other.strip().startswith(f"{HEADER} ") for other in text.splitlines()[number:]):
                    raise CkspaceError(f"line {number} names a kernel before any plan's header ({line})")
                return None
            sections[arch].append(line)
    return sections or None
