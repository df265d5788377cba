"""``ckspace select``: the fastest feasible kernel of a registry for one convolution."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TextIO

from ckspace.commands.common import (
    add_format_argument,
    add_target_arguments,
    constants_text,
    json_text,
    target_from_args,
    write_report,
)
from ckspace.core.errors import CkspaceError, NoKernelError

NAME = "select"
HELP = "pick the kernel of a registry predicted fastest for a convolution problem"
FORMATS = ("text", "json")
CANDIDATE_LIMIT = 100_000
"""Most kernels of a rule set ``select`` and ``plan`` rank (each costs ~6 KB and ~30 us to rank: ``open``
holds hundreds of millions per cell); a larger space is refused at once, by its exact count."""


def table_rule_sets() -> str:
    """The rule sets a too-large ``open`` registry can be narrowed to: those with a table."""
    from ckspace.constraints.rulesets import get_rule_set, rule_set_names

    return ", ".join(n for n in rule_set_names() if get_rule_set(n).has_table)


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--arch", required=True, help="GPU target, e.g. gfx950")
    parser.add_argument("--variant", required=True, help="forward, bwd_data or bwd_weight")
    parser.add_argument("--dtype", required=True, help="fp16, bf16 or fp32")
    parser.add_argument(
        "--problem",
        required=True,
        metavar="TEXT",
        help="the convolution, e.g. 'N=1,G=1,C=64,K=128,Hi=56,Wi=56,Y=3,X=3,stride=1,pad=1'",
    )
    registry = parser.add_mutually_exclusive_group()
    registry.add_argument(
        "--candidates",
        type=Path,
        metavar="PATH",
        help="the registry: a file of kernel names (ckspace or tile-engine benchmark names, one "
        "per line, '#' comments), a build manifest (JSON with a 'kernels' list) or a tree "
        "ckspace emit wrote (its manifest.json); default: the GEMM kernels of rule set full "
        "in the target",
    )
    registry.add_argument(
        "--rule-set",
        help="the registry: every GEMM kernel of this rule set in the target for the problem's cell (default: full)",
    )
    add_target_arguments(parser)
    parser.add_argument("--model", type=Path, metavar="DIR", help="a model directory instead of the shipped one")
    parser.add_argument("--top", type=int, default=5, metavar="K", help="how many to list (default: 5)")
    add_format_argument(parser, FORMATS)


def read_registry(path: Path, arch: str) -> tuple[list, list | None]:
    """(candidates, pool) of ``--candidates``: kernel names from a names file, with no pool (a
    family falls back to any variant of the target); or, from a build manifest (given as the file or
    as the emitted tree that holds it), the configs of its ``kernels`` with all of them as the pool,
    so that the fallbacks are kernels the tree holds, as its C dispatcher's are. Kernels a tree holds
    only as fallbacks (``emit --fallbacks``) are in the pool, not among the candidates, as in C. A
    library of several archs gives ``arch``'s kernels (a shared kernel's record names its first arch)."""
    from ckspace.core.config import GemmConfig
    from ckspace.emit.manifest import MANIFEST_NAME
    from ckspace.environment.inputs import parse_json, read_input_text

    if path.is_dir() and (path / MANIFEST_NAME).is_file():  # an emitted tree: the kernels its manifest lists
        path = path / MANIFEST_NAME
    text = read_input_text(path, "--candidates")
    if not text.lstrip().startswith("{"):
        return [line.strip() for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")], None
    manifest = parse_json(text, path, "--candidates")
    archs = manifest.get("archs") if isinstance(manifest, dict) else None
    if archs and arch not in archs:
        raise CkspaceError(f"{path}: a library of {' '.join(map(str, archs))}, with no {arch} kernel")
    try:
        if archs:  # a library of several archs: ``arch``'s kernels, those whose record names it
            entries = [e for e in manifest["kernels"] if arch in e.get("archs", ())]
            configs = [GemmConfig.from_fields({**e["config"], "arch": arch}) for e in entries]
        else:
            configs = [GemmConfig.from_fields(entry["config"]) for entry in manifest["kernels"]]
        fallback_only = set((manifest.get("dispatcher") or {}).get("fallback_only", ()))
    except (ValueError, KeyError, TypeError, AttributeError) as exc:  # AttributeError: a config not an object
        raise CkspaceError(f"{path}: not a build manifest with a 'kernels' list of configs ({exc})") from None
    if any(c.arch != arch for c in configs):
        raise CkspaceError(f"{path}: the manifest's kernels are not all {arch} kernels")
    return [c for c in configs if c.name not in fallback_only], configs


def read_candidates(path: Path, arch: str) -> list:
    """The candidates of ``--candidates`` (:func:`read_registry`), without the pool."""
    return read_registry(path, arch)[0]


def of_cell(candidates: list, selector, path: Path) -> list:
    """A manifest's kernels of the selector's variant and dtype: an emitted tree often holds several
    cells (``emit --variant all``), and the others are not candidates, not a mistake. Names are
    kept as given (a names file is the user's list: a kernel of another cell in it is refused)."""
    if not candidates or isinstance(candidates[0], str):
        return candidates
    mine = [c for c in candidates if (c.variant, c.dtype) == (selector.variant, selector.dtype)]
    if not mine:
        held = sorted({f"{c.variant.value} {c.dtype.value}" for c in candidates})
        raise CkspaceError(
            f"--candidates {path}: no {selector.variant.value} {selector.dtype.value} kernel "
            f"(it holds {', '.join(held)})"
        )
    return mine


def run(args: argparse.Namespace, out: TextIO) -> int:
    from ckspace.select.selector import Selector
    from ckspace.workloads.problem import ConvProblem

    if args.top < 1:
        raise CkspaceError(f"--top {args.top}: valid: how many kernels to list, at least 1")
    problem = ConvProblem.parse(args.problem)
    target = target_from_args(args)  # one target for the registry and the selector's fallbacks
    space = None if args.candidates else _checked_space(args, problem, target)
    selector = Selector.load(args.arch, args.variant, args.dtype, model_dir=args.model, ck=target)
    candidates, pool = _candidates(args, problem, selector, space)
    try:
        selection = selector.select(problem, candidates, k=args.top, pool=pool)
    except NoKernelError as exc:
        if args.format != "json":
            raise
        out.write(json_text(_no_kernel_report(exc, candidates, selector)))
        return 1
    write_report(out, args.format, _report(selection, selector), _text)
    return 0


def _checked_space(args: argparse.Namespace, problem, target):
    """The rule set's registry, refused at once if too large to rank or empty of kernels: a refusal
    costs one line and no wait, so it comes before any model loads (and before its warnings)."""
    from ckspace.space.rule_set_choice import refuse_rule_set_without_kernels
    from ckspace.space.space import Space

    space = Space(args.arch, args.variant, problem.ndim, args.dtype, args.rule_set or "full", ck=target)
    space.refuse_beyond(
        CANDIDATE_LIMIT, "select ranks", f"a rule set with a table ({table_rule_sets()}) or --candidates FILE"
    )
    refuse_rule_set_without_kernels(space)  # before any model loads: one line, no warning
    return space


def _candidates(args: argparse.Namespace, problem, selector, space) -> tuple[list, object]:
    """The kernels to rank and their vector-width pool: a ``--candidates`` file narrowed to the
    selector's cell (a registry may hold several), else the rule set's GEMM kernels."""
    if args.candidates:
        candidates, pool = read_registry(args.candidates, selector.arch)
        return of_cell(candidates, selector, args.candidates), pool
    empty = (
        f"no {selector.variant.value} {selector.dtype.value} {problem.ndim}D GEMM kernel of rule "
        f"set {args.rule_set or 'full'} for {selector.arch} in the target "
        f"({selector.target.describe().removeprefix('target: ')})"
    )
    return gemm_kernels(space, empty), None


def gemm_kernels(space, empty: str) -> list:
    """A rule set's GEMM kernels, the only kind ranked; none is refused with ``empty``, since an empty
    registry would answer "no kernel" and hide a registry mismatch behind the problem."""
    candidates = [c for c in space if c.kind == "gemm"]
    if not candidates:
        raise CkspaceError(empty)
    return candidates


def _no_kernel_report(exc: NoKernelError, candidates: list, selector) -> dict:
    """JSON readers get an answer too when no kernel serves: no pick, why, and the target (exit 1,
    as in text), so a script can tell "none" from a failure without parsing stderr."""
    return {
        "pick": None,
        "no_kernel": str(exc),
        "blocking": exc.blocking,
        "candidates": len(candidates),
        "target": selector.target.record(),
    }


def _report(selection, selector) -> dict:
    """The selection as one JSON-friendly record, the single source both formats render from."""
    return {
        "pick": selection.pick,
        "family": selection.family,
        "top": [
            {
                "name": r.name,
                "family": r.family,
                "score": r.score,
                "predicted_tflops": r.predicted_tflops,
                "source": r.source,
                "config": r.config.fields(),
            }
            for r in selection.top
        ],
        "source": selection.source,
        "pick_source": selection.pick_source,
        "feasible": selection.feasible,
        "fallbacks": selection.fallbacks,
        "candidates": selection.candidates,
        "target": selector.target.record(),
        "calibrated": dict(selector.hw.calibrated),
    }


def _text(report: dict) -> str:
    through = f" ({report['fallbacks']} through a narrower-vector variant)" if report["fallbacks"] else ""
    lines = [
        f"target: {report['target']['note']}",
        f"{report['feasible']} of {report['candidates']} candidates can run the problem{through}",
        "TFLOPS are estimates, each row says of what: [model], [model, extrapolated] (outside the model's "
        "training domain, why below) or [analytical]",
    ]
    if report["calibrated"]:  # a model learn calibrated: its features are this GPU's, not the shipped constants'
        lines.append(
            f"the model's analytical constants were measured on its GPU: {constants_text(report['calibrated'])}"
        )
    for rank, ranked in enumerate(report["top"], 1):  # each row says what its numbers come from (no model:
        # the analytical model, which Selector.load has warned of once on stderr)
        stands_for = f"  (vector fallback of {ranked['family']})" if ranked["family"] else ""
        source, _, why = ranked["source"].partition(": ")
        lines.append(
            f"{rank:>2}  {ranked['predicted_tflops']:9.2f} TFLOPS  score {ranked['score']:7.3f}  "
            f"[{source}]  {ranked['name']}{stands_for}"
        )
        if why:
            lines.append(f"      extrapolated: {why}")
    return "".join(f"{line}\n" for line in lines)
