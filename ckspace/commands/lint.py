"""``ckspace lint``: what a rule set proposes that the generator throws away, and why."""

from __future__ import annotations

import argparse
from collections.abc import Iterable, Sequence
from typing import TextIO

from ckspace.commands.common import add_format_argument, add_rules_revision_argument, write_report
from ckspace.constraints.rulesets import get_rule_set, rule_set_names
from ckspace.core.errors import InvalidChoiceError
from ckspace.core.revisions import rules_revision
from ckspace.core.vocab import arch_names, parse_arch

NAME = "lint"
HELP = "report empty cells, removed proposals, dead table entries and duplicates of rule sets"
FORMATS = ("text", "json")


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--rule-set", nargs="+", action="extend", help="rule sets (default: all)")
    parser.add_argument("--arch", nargs="+", action="extend", help="archs (default: all)")
    add_rules_revision_argument(parser)
    add_format_argument(parser, FORMATS)
    parser.add_argument("--strict", action="store_true", help="exit with status 1 when there are findings")


def run(args: argparse.Namespace, out: TextIO) -> int:
    tabled = [r for r in rule_set_names() if get_rule_set(r).has_table]  # lint reads proposal tables
    rule_sets = _unique(get_rule_set(r).name for r in args.rule_set or tabled)
    if any(not get_rule_set(r).has_table for r in rule_sets):
        raise InvalidChoiceError(
            "rule set to lint", next(r for r in rule_sets if not get_rule_set(r).has_table), tabled
        )
    archs = _unique(parse_arch(a) for a in args.arch or arch_names())
    revision = rules_revision(args.rules_revision).name
    from ckspace.constraints.linting.lint import lint  # deferred: numpy

    findings = [f for rs in rule_sets for arch in archs for f in lint(rs, arch, revision)]
    write_report(
        out,
        args.format,
        [f.model_dump() for f in findings],
        lambda _: _text(findings, revision, rule_sets, archs),
        indent=1,
    )
    return 1 if args.strict and findings else 0


def _text(findings: Sequence, revision: str, rule_sets: list[str], archs: list[str]) -> str:
    lines, current = [], None
    for f in findings:
        if (f.rule_set, f.arch) != current:
            current = (f.rule_set, f.arch)
            lines.append(f"{f.rule_set} on {f.arch} (rules {revision}):")
        spec = f" [quirk {f.spec}, docs/rules.md]" if f.spec else ""
        lines.append(f"  {f.code}: {f.message}{spec}")
    lines.append(f"{len(findings)} finding(s) in {len(rule_sets)} rule set(s) x {len(archs)} arch(s)")
    return "".join(f"{line}\n" for line in lines)


def _unique(names: Iterable[str]) -> list[str]:
    """``names`` (canonical spellings) without repeats, in order of first occurrence: naming a rule
    set or an arch twice, or in two spellings, asks what naming it once asks, and must not report
    every finding twice."""
    return list(dict.fromkeys(names))
