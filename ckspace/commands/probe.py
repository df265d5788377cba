"""``ckspace probe``: compile a sample of a space and report what the rules accept but the compiler
rejects, grouped by the first error.

Soundness of the rules against the compiler: a config the rules (validity, and the CK revision's
rules) accept must compile. The probe draws ``--sample`` configs spread evenly over the requested
cells, uniformly inside each (seeded; for ``open`` from the exact counts), emits them, builds them
one per translation unit (so every failure is its own) and groups the failures by the first
compiler error: its header and line, and its words with numbers blanked, since one static_assert
failing with different values is one missing rule. Each group is then a missing rule (add it to
:mod:`ckspace.constraints.rulebook.ck_rules`, named, citing the header and line) or a documented CK defect.
The groups are written to ``probe.json`` in the output directory; the exit status is 0 whatever
they hold (findings are not failures of the command).
"""

from __future__ import annotations

import argparse
import json
import re
from math import ceil
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from ckspace.commands.common import add_space_arguments, space_from_args
from ckspace.core.errors import CkspaceError

if TYPE_CHECKING:
    from ckspace.space.listing import Kernel

NAME = "probe"
HELP = "compile a sample of a space; report configs the rules accept but the compiler rejects, by first error"
REPORT = "probe.json"
SAMPLE_LIMIT = 100_000
"""Most configs one probe compiles (each is its own translation unit; the sample is held in memory)."""
LOCATION = re.compile(r"^(?P<file>[^:\s]+):(?P<line>\d+):(?:\d+:)?\s*(?:fatal )?error:\s*(?P<text>.*)$")


def configure(parser: argparse.ArgumentParser) -> None:
    add_space_arguments(parser, variant_required=False)
    parser.set_defaults(rule_set="open")
    parser.add_argument(
        "--sample",
        type=int,
        required=True,
        metavar="N",
        help="configs to compile, spread evenly over the cells, uniform inside each "
        f"(1 to {SAMPLE_LIMIT:,}; a space holding fewer gives all it holds)",
    )
    parser.add_argument("--seed", type=int, default=0, help="sampling seed (default: 0)")
    parser.add_argument("--out", type=Path, required=True, help="directory for the emitted tree, build and probe.json")
    parser.add_argument("--jobs", type=int, default=1, help="parallel compiles (default: 1)")


def _words(text: str) -> str:
    """An error's words with every template instance collapsed, with the member a failed requirement
    names (``GemmPipelineAgBgCrMem<...>::kPadM`` reads ``T<...>``), and numbers blanked."""
    collapsed, depth = [], 0
    for char in text:
        if char == "<":
            depth += 1
            if depth == 1:
                collapsed.append("<...>")
        elif char == ">" and depth:
            depth -= 1
        elif not depth:
            collapsed.append(char)
    words = re.sub(r"[\w:]*<\.\.\.>(::\w+)?", "T<...>", "".join(collapsed))
    return re.sub(r"\d+", "N", words)


def signature(error: str) -> tuple[str, str]:
    """Where a first error was raised (header path from ``ck_tile/`` on, and line) and its words
    (:func:`_words`): what makes two failures the same finding (one static_assert failing with
    different template arguments is one missing rule)."""
    match = LOCATION.match(error.strip())
    if match is None:
        return "", _words(error.strip())
    path = match["file"]
    path = path[path.index("ck_tile/") :] if "ck_tile/" in path else Path(path).name
    return f"{path}:{match['line']}", _words(match["text"])


def run(args: argparse.Namespace, out: TextIO) -> int:
    from ckspace.environment.ck_header_cache import find_revision

    _check_arguments(args)
    revision = find_revision(args.ck_root)
    space = space_from_args(args)
    cells = [(request, cell) for request in space.requests for cell in request.cells]
    kernels = _draw(args, cells)
    emitted = _emit(args, kernels, cells, space.requests[0], revision)
    report = _compile_one_per_unit(args, space.requests[0].arch)
    findings = _findings(report, kernels)
    summary = _summary(space.requests[0], revision, kernels, emitted, report, findings)
    _write_report(args.out, summary)
    _print(out, args.out, revision, kernels, report, findings)
    return 0


def _check_arguments(args: argparse.Namespace) -> None:
    """Refuse a sample the probe cannot hold, and ``--rules-only``: the rules the probe tests always
    include the CK revision's, so a rule space alone has nothing to compile against."""
    if not 1 <= args.sample <= SAMPLE_LIMIT:
        raise CkspaceError(f"--sample {args.sample}: valid: 1 to {SAMPLE_LIMIT:,} configs to compile")
    if args.rules_only:
        raise CkspaceError("probe compiles what the CK headers of the target can build: not with --rules-only")


def _draw(args: argparse.Namespace, cells: list) -> list[Kernel]:
    """``--sample`` configs spread evenly over the cells and uniform inside each (seeded), so a
    finding's count says how common it is in the space, not which cell happened to be listed first."""
    from ckspace.space.listing import Kernel

    per_cell = ceil(args.sample / len(cells))
    kernels: list[Kernel] = []
    for request, cell in cells:
        one = space_from_args(args, variant=[cell.variant.value], ndim=[cell.ndim], dtype=[cell.dtype.value])
        kernels.extend(
            Kernel(request.arch, cell, False, config.row(), True)
            for config in one.sample(per_cell, seed=args.seed, stratify_by=())
        )
    return kernels


def _emit(args: argparse.Namespace, kernels: list[Kernel], cells: list, request, revision):
    """The sample as an emitted tree whose manifest records how it was drawn, so a probe's tree says
    which sample it holds (and a second probe of the same arguments finds nothing to rewrite)."""
    from ckspace.emit.emitter import emit

    return emit(
        kernels,
        args.out,
        revision,
        arch=request.arch,
        request={
            "probe": True,
            "rule_set": request.rule_set,
            "sample": args.sample,
            "seed": args.seed,
            "cells": [cell.label() for _, cell in cells],
            "where": list(args.where),
        },
    )


def _compile_one_per_unit(args: argparse.Namespace, arch: str):
    """Build the tree one kernel per translation unit (``batch=1``), so every failure is its own
    kernel's and its first error is that kernel's first error."""
    from ckspace.compiling.builder import build, stderr_is_terminal

    return build(args.out, arch, jobs=args.jobs, batch=1, ck_root=args.ck_root, progress=stderr_is_terminal())


def _findings(report, kernels: list[Kernel]) -> list[dict]:
    """The failed kernels grouped by their first error's :func:`signature`, largest group first,
    each with the fields of its first few kernels: one group is one missing rule or CK defect."""
    by_name = {k.name: k for k in kernels}
    groups: dict[tuple[str, str], list[str]] = {}
    for kernel in report.kernels:
        if kernel.status == "failed":
            groups.setdefault(signature(kernel.error or ""), []).append(kernel.name)
    return [
        {
            "where": where,
            "error": text,
            "count": len(names),
            "kernels": sorted(names),
            "fields": [by_name[n].record() for n in sorted(names)[:3] if n in by_name],
        }
        for (where, text), names in sorted(groups.items(), key=lambda item: -len(item[1]))
    ]


def _summary(request, revision, kernels: list[Kernel], emitted, report, findings: list[dict]) -> dict:
    """What ``probe.json`` holds: the target, how many configs went through each stage (drawn,
    emitted, left out by the CK rules, compiled, rejected) and the findings."""
    return {
        "arch": request.arch,
        "rule_set": request.rule_set,
        "ck_revision": revision.label,
        "sampled": len(kernels),
        "emitted": len(emitted.manifest.kernels),
        "excluded_by_ck_rules": len(emitted.manifest.excluded),
        "compiled_ok": report.ok,
        "rejected": report.failed,
        "seconds": report.seconds,
        "groups": findings,
    }


def _write_report(directory: Path, summary: dict) -> None:
    """``probe.json`` written atomically: an interrupted probe leaves the last whole report or none."""
    from ckspace.environment.files import write_atomic

    write_atomic(directory / REPORT, (json.dumps(summary, indent=1) + "\n").encode())


def _print(out: TextIO, directory: Path, revision, kernels: list[Kernel], report, findings: list[dict]) -> None:
    """The counts, then one line per finding with an example kernel, then where the report is."""
    out.write(
        f"{len(kernels)} sampled, {report.ok} compiled, {report.failed} rejected by the compiler "
        f"in {report.seconds} s (CK {revision.label})\n"
    )
    for finding in findings:
        out.write(f"{finding['count']:4d}  {finding['where'] or '?'}: {finding['error']}\n")
        out.write(f"      e.g. {finding['kernels'][0]}\n")
    out.write(f"report: {directory / REPORT}\n")
