"""``ckspace rules``: every named rule, documented from the code that builds it.

For one cell (an arch and a dtype; every variant unless ``--variant`` says otherwise) it lists each
rule's name, predicate, kind, the config fields it reads, its words, its upstream source and the table
values it reads, with the cell's constants folded in: the validity rules of GEMM and depthwise configs,
the problem rules of one convolution (an example one unless ``--problem`` is given), the CK-revision
rules with ``--ck-root``, the rule revisions (upstream states ckspace reproduces, an unmerged one
marked; the rules are those of ``--rules-revision``, the newest merged one by default) and the upstream
quirks that rules and lint findings are tagged with.
``docs/rules.md`` is this command's markdown output for the defaults, so the words a user reads there
are the ones the code uses.
"""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING, TextIO

from ckspace.commands.common import (
    add_format_argument,
    add_rules_revision_argument,
    add_target_arguments,
    target_from_args,
    variants,
    write_report,
)
from ckspace.core.revisions import RulesRevision, default_rules_revision, rules_revision, rules_revision_names
from ckspace.core.vocab import Dtype, Variant, parse_arch
from ckspace.environment.files import banner

if TYPE_CHECKING:
    from ckspace.constraints.rulebook.catalogue import Entry
    from ckspace.core.ck import CkRevision
    from ckspace.workloads.problem import ConvProblem

NAME = "rules"
HELP = "document every named rule: predicate, words, upstream source and the table values it reads"
FORMATS = ("markdown", "json")
DEFAULT_ARCH = "gfx950"
DEFAULT_DTYPE = "bf16"
EXAMPLE_PROBLEM = "N=1,G=1,C=64,K=128,Hi=56,Wi=56,Y=3,X=3,stride=1,pad=1"
UPSTREAM = "ROCm/rocm-libraries `projects/composablekernel/dispatcher/codegen/`"
BANNER = banner("markdown", "python3 -m ckspace rules --format markdown --rules-only > docs/rules.md")
DOMAIN_SECTION = ("domain", "gemm", "Domains of rule set `open`")
"""Rule set ``open``'s domains: a rule set's proposals, documented after the catalogue's families."""


def configure(parser: argparse.ArgumentParser) -> None:
    add_format_argument(parser, FORMATS)
    parser.add_argument("--arch", default=DEFAULT_ARCH, help=f"the cell's arch (default: {DEFAULT_ARCH})")
    parser.add_argument(
        "--variant", nargs="+", action="extend", help="forward, bwd_data, bwd_weight or all (default: all)"
    )
    parser.add_argument("--dtype", default=DEFAULT_DTYPE, help=f"the cell's dtype (default: {DEFAULT_DTYPE})")
    parser.add_argument(
        "--problem", metavar="TEXT", help=f"the convolution of the problem rules (default: {EXAMPLE_PROBLEM})"
    )
    add_rules_revision_argument(parser)
    add_target_arguments(parser)


def run(args: argparse.Namespace, out: TextIO) -> int:
    arch = parse_arch(args.arch)
    chosen = list(dict.fromkeys(Variant.parse(v) for v in variants(args.variant) or list(Variant)))
    dtype = Dtype.parse(args.dtype)
    rules = rules_revision(args.rules_revision)
    from ckspace.workloads.problem import ConvProblem  # deferred: pydantic

    problem = ConvProblem.parse(args.problem or EXAMPLE_PROBLEM)
    target = target_from_args(args)
    revision = target.ck.revision() if target.ck is not None else None
    entries = _entries(arch, chosen, dtype, problem, revision, rules.name)
    from ckspace.constraints.linting.lint import QUIRKS  # deferred: numpy

    cell = {"arch": arch, "dtype": dtype.value, "variants": [v.value for v in chosen], "rules_revision": rules.name}
    ck = revision.label if revision else None
    revisions = [rules_revision(name) for name in rules_revision_names()]
    report = {
        "cell": cell,
        "problem": problem.text(),
        "ck": ck,
        "rules": [e.record() for e in entries],
        "revisions": [_revision_record(r) for r in revisions],
        "quirks": QUIRKS,
    }
    write_report(
        out, args.format, report, lambda _: _markdown(cell, problem.text(), ck, entries, QUIRKS, revisions), indent=1
    )
    return 0


def _revision_record(revision: RulesRevision) -> dict:
    return {
        "name": revision.name,
        "parent": revision.parent,
        "default": revision.name == default_rules_revision(),
        "upstream": revision.upstream,
        "merged": revision.merged,
        "summary": revision.summary,
        "fixes": list(revision.fixes),
        "rules": revision.rules,
        "tables": revision.tables,
    }


def _entries(
    arch: str, chosen: list[Variant], dtype: Dtype, problem: ConvProblem, revision: CkRevision | None, rules: str
) -> list[Entry]:
    """Every rule of the cell: the catalogue's families, then rule set ``open``'s domains."""
    from ckspace.constraints.generate.open_domains import domain_rules
    from ckspace.constraints.rulebook.catalogue import Entry, entries
    from ckspace.core.cells import Cell

    out = entries(arch, chosen, dtype, problem, revision, rules)
    out += [Entry("domain", "gemm", v.value, r) for v in chosen for r in domain_rules(arch, Cell(v, 2, dtype))]
    return out


def _markdown(
    cell: dict,
    problem: str,
    ck: str | None,
    entries: list[Entry],
    quirks: dict[str, str],
    revisions: list[RulesRevision],
) -> str:
    notes = {
        "problem": "The problem's numbers are folded in; `--problem TEXT` lists the rules for another convolution.",
        "known_wrong": (
            "Configs upstream documents as giving wrong results. The target every command answers "
            "for leaves them out; `--rules-only` (the upstream rule space, which emits them) keeps them."
        ),
        "ck_revision": (
            "What a CK revision cannot build depends on the CK headers of the target, so these rules "
            "are listed only when CK headers are found (`--ck-root PATH`, `CK_ROOT`, ROCm, the amd-aiter "
            "wheel) and not with `--rules-only`."
            if ck is None
            else "Built without an ndim: `ck_bwd_weight_1d`, which only 1D cells have, folds to true here."
        ),
        "domain": (
            "Rule set `open` proposes no table: each GEMM field ranges over the values below (the same in "
            "every ndim), and a config is valid when every other rule holds."
        ),
    }
    from ckspace.constraints.rulebook.catalogue import sections

    titles = {"problem": f" for `{problem}`", "ck_revision": f" of {ck}" if ck else ""}
    lines = [BANNER, "", "# The rules of ckspace", "", *_intro(cell), ""]
    for section, config, title in [*sections(), DOMAIN_SECTION]:
        lines += [f"## {title}{titles.get(section, '')}", ""]
        if section in notes:
            lines += [notes[section], ""]
        chosen = [e for e in entries if e.section == section and config in (None, e.config)]
        for name in dict.fromkeys(e.rule.name for e in chosen):
            lines += _rule_lines([e for e in chosen if e.rule.name == name])
    lines += _revision_lines(revisions, cell["rules_revision"])
    lines += [
        "## Upstream quirks",
        "",
        (
            "The upstream generator's inconsistencies that rules (*quirk*) and `ckspace lint` findings "
            "(`[quirk ID, docs/rules.md]`) are tagged with, in ckspace's words."
        ),
        "",
        "| id | what | fixed in rules revision | rules tagged with it here |",
        "|---|---|---|---|",
    ]
    for quirk, what in quirks.items():
        tagged = ", ".join(f"`{n}`" for n in dict.fromkeys(e.rule.name for e in entries if e.rule.quirk == quirk))
        fixed = ", ".join(r.name for r in revisions if quirk in r.fixes)
        lines.append(f"| {quirk} | {what} | {fixed or '-'} | {tagged or '-'} |")
    return "\n".join(lines) + "\n"


def _revision_lines(revisions: list[RulesRevision], shown: str) -> list[str]:
    """The rule revisions, oldest first, each as the delta it is on its parent."""
    lines = [
        "## Rule revisions",
        "",
        (
            "The upstream states of the rules ckspace reproduces, oldest first "
            "(`ckspace/data/tables/revisions.json`). "
            f"`--rules-revision R` (CLI) or `Space(..., rules_revision=R)` chooses one; the default is the newest "
            f"merged one, **{default_rules_revision()}**: a revision of an upstream change not merged yet is "
            f"used only when chosen. This page shows **{shown}**. Each revision is a delta on its parent: "
            "the formulation it gives each rule it changes and JSON merge patches on its parent's tables. "
            "`ckspace diff --against-rules-revision R` lists the kernels a revision adds or removes."
        ),
        "",
    ]
    for revision in revisions:
        unmerged = "" if revision.merged else " (unmerged upstream, opt-in)"
        lines += [f"### `{revision.name}`{unmerged}", "", f"{revision.summary}. Upstream: {revision.upstream}.", ""]
        if revision.parent is not None:
            lines.append(f"- parent: `{revision.parent}`")
        lines += [f"- rule `{rule}`: formulation `{form}`" for rule, form in revision.rules.items()]
        lines += [
            f"- table `{name}.json` patched with `{json.dumps(patch, sort_keys=True)}`"
            for name, patch in revision.tables.items()
        ]
        if revision.fixes:
            lines.append(f"- fixes quirk {', '.join(revision.fixes)}")
        lines.append("")
    return lines


def _intro(cell: dict) -> list[str]:
    what = (
        "Every constraint ckspace puts on a kernel config is a named rule: an expression over config fields "
        "that must hold. This page is generated from the code that builds the rules "
        "(`ckspace/constraints/rulebook/validity.py`, `problem_rules.py`, `ck_rules.py`). For each rule it gives its "
        "*predicate* (the check it belongs to), its *kind* (how `ckspace explain` classifies a failure), the "
        "config *fields* it reads, its words, its upstream *source*, and the table values it *reads* as "
        "`table key.path = value`; the words are built from those values."
    )
    which = (
        f"Rules are built per cell, with the cell's constants folded in. This page shows arch "
        f"**{cell['arch']}**, dtype **{cell['dtype']}**, variants {', '.join(cell['variants'])}, rules revision "
        f"**{cell['rules_revision']}** (see *Rule revisions* below). A rule marked *cannot fail here* folds to "
        "true in that cell and bites in others. `ckspace rules --arch A --dtype D [--variant V] [--problem TEXT] "
        "[--rules-revision R] [--ck-root PATH] [--format json]` lists another cell."
    )
    sources = (
        f"Upstream sources are files of {UPSTREAM} at the commits the shipped tables record under "
        "`_source_commits` (`ckspace/data/tables/*.json`), as the rule revision changes them. `is_config_valid` is "
        "`UnifiedGroupedConvCodegen.is_config_valid` in `unified_grouped_conv_codegen.py`: it runs "
        "`arch_filter.py ArchFilter.is_kernel_valid` in non-strict mode with wave_k forced to 1. Problem "
        "and CK-revision rules cite CK Tile headers (`include/ck_tile/...`) and their lines."
    )
    return [what, "", which, "", sources]


def _rule_lines(entries: list[Entry]) -> list[str]:
    """One rule: what is common to all its variants once, then its words per group of variants that
    see the same words, source and values, saying where it folds to true."""
    rule = entries[0].rule
    fields = ", ".join(f"`{f}`" for f in sorted({f for e in entries for f in e.rule.fields}))
    head = f"*predicate* `{rule.predicate.value}` · *kind* `{rule.predicate.kind.value}` · *fields* "
    head += fields or "none (a constant here)"
    quirks = sorted({e.rule.quirk for e in entries if e.rule.quirk})
    if quirks:
        head += " · *quirk* " + ", ".join(quirks)
    lines = [f"### `{rule.name}`", "", head, ""]
    groups: dict[tuple[str, str, tuple[str, ...]], list[Entry]] = {}
    for e in entries:
        groups.setdefault((e.rule.text, e.rule.source, tuple(str(r) for r in e.rule.reads)), []).append(e)
    for (text, source, reads), members in groups.items():
        labels = [e.variant or f"{e.config} configs" for e in members]
        folded = [label for label, e in zip(labels, members, strict=True) if e.rule.vacuous]
        note = (
            ""
            if not folded
            else " (*cannot fail here*)"
            if folded == labels
            else f" (*cannot fail for {', '.join(folded)}*)"
        )
        lines += [f"- **{', '.join(labels)}**{note}: {text}", f"  - source: {source}"]
        lines += [f"  - reads `{r}`" for r in reads]
    return [*lines, ""]
