"""The rule catalogue: every family of rules the rulebook states, in the order they are checked and
documented, and the one statement of which of them a target adds to a cell.

Before it, the families were listed by the ``rules`` command, and the target's rules were gathered
again by the space (its models and ``violated_rules``), by the enumerator (a target's listing), by
emit (what a CK revision cannot build) and by selection's vector fallbacks; a new family had to be
added in each place. Now the command documents :func:`entries`, and every other reader asks
:func:`target_rules` (or, for the CK revision alone, :func:`ck_revision_rules`), so the space a
command lists, the kernels ``emit`` writes and the fallbacks a selector takes cannot drift apart.

The families (:data:`FAMILIES`): the validity rules of GEMM and depthwise configs (the upstream
generator's checks, per rules revision), the problem rules (CK Tile's ``IsSupportedArgument``, for one
convolution), the known-wrong kernels (upstream documents them as giving wrong results) and what a CK
revision cannot build. The last two are the *target's* rules: the rule space keeps them out of its
answer, and the target (:mod:`ckspace.environment.target`) applies them. Rule set ``open``'s domains
are a rule set's proposals, not a family of the rulebook: the ``rules`` command appends them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, NamedTuple

from ckspace.constraints.language.rule import Rule
from ckspace.constraints.rulebook.ck_rules import ck_depthwise_rules, ck_rules
from ckspace.constraints.rulebook.known_wrong import known_wrong_rules
from ckspace.core.cells import Cell
from ckspace.core.vocab import Dtype, Variant

if TYPE_CHECKING:
    from ckspace.core.ck import CkRevision
    from ckspace.environment.target import Target
    from ckspace.workloads.problem import ConvProblem


class Family(NamedTuple):
    """One family of rules: its section (the rules' grouping in ``ckspace rules``), the kind of config
    it constrains, its title there, and whether a target adds it (rather than the rule space).

    This module's records are named tuples, not dataclasses: every cold listing of a target imports
    it, and a named tuple's class costs a fraction of a frozen dataclass's to create."""

    section: str
    config: str
    title: str
    target: bool = False


FAMILIES: tuple[Family, ...] = (
    Family("validity", "gemm", "Validity rules of GEMM configs"),
    Family("validity", "depthwise", "Validity rules of depthwise configs"),
    Family("problem", "gemm", "Problem rules"),
    Family("problem", "depthwise", "Problem rules"),
    Family("known_wrong", "gemm", "Known-wrong rules", target=True),
    Family("ck_revision", "gemm", "CK-revision rules", target=True),
    Family("ck_revision", "depthwise", "CK-revision rules", target=True),
)
"""Every family, in the order the rules are built and documented."""


def sections() -> list[tuple[str, str | None, str]]:
    """The families grouped as ``ckspace rules`` prints them: (section, config kind or None for
    both kinds, title), in :data:`FAMILIES` order."""
    kinds: dict[tuple[str, str], list[str]] = {}
    for family in FAMILIES:
        kinds.setdefault((family.section, family.title), []).append(family.config)
    return [(section, configs[0] if len(configs) == 1 else None, title) for (section, title), configs in kinds.items()]


class Entry(NamedTuple):
    """One rule as built for one variant (None: the rule does not depend on it) of one config kind."""

    section: str
    config: str
    variant: str | None
    rule: Rule

    def record(self) -> dict:
        """The rule as ``ckspace rules --format json`` writes it."""
        rule = self.rule
        return {
            "section": self.section,
            "config": self.config,
            "variant": self.variant,
            "name": rule.name,
            "predicate": rule.predicate.value,
            "kind": rule.predicate.kind.value,
            "text": rule.text,
            "source": rule.source,
            "fields": list(rule.fields),
            "vacuous": rule.vacuous,
            "quirk": rule.quirk,
            "reads": [{"table": r.table, "path": r.path, "value": r.value} for r in rule.reads],
        }


def entries(
    arch: str,
    variants: Sequence[Variant],
    dtype: Dtype,
    problem: ConvProblem,
    revision: CkRevision | None,
    rules_revision: str,
) -> list[Entry]:
    """Every rule of every family for one cell (an arch, a dtype, ``variants``), in :data:`FAMILIES`
    order: the validity rules of ``rules_revision``, the problem rules of ``problem``, the known-wrong
    rules and, with a CK ``revision``, what it cannot build (built without an ndim)."""
    from ckspace.constraints.rulebook.problem_rules import depthwise_problem_rules, gemm_problem_rules
    from ckspace.constraints.rulebook.validity import depthwise_rules, gemm_rules

    built = {
        ("validity", "gemm"): lambda v: gemm_rules(arch, v, dtype, rules_revision),
        ("validity", "depthwise"): lambda v: depthwise_rules(),
        ("problem", "gemm"): lambda v: gemm_problem_rules(problem, v, problem.ndim, dtype),
        ("problem", "depthwise"): lambda v: depthwise_problem_rules(problem),
        ("known_wrong", "gemm"): lambda v: known_wrong_rules(v, dtype),
        ("ck_revision", "gemm"): lambda v: ck_rules(revision, v, dtype, arch),
        ("ck_revision", "depthwise"): lambda v: ck_depthwise_rules(revision),
    }
    out: list[Entry] = []
    for family in FAMILIES:
        if family.section == "ck_revision" and revision is None:
            continue
        build = built[family.section, family.config]
        if family.config == "depthwise":  # the depthwise rules depend on no variant
            out += [Entry(family.section, family.config, None, r) for r in build(None)]
        else:
            out += [Entry(family.section, family.config, v.value, r) for v in variants for r in build(v)]
    return out


class TargetRules(NamedTuple):
    """The rules a target adds to one cell of the rule space: the known-wrong GEMM kernels, and what
    its CK headers cannot build, for GEMM and depthwise configs. Empty for the rule space itself."""

    known_wrong: tuple[Rule, ...] = ()
    ck_revision: tuple[Rule, ...] = ()
    depthwise: tuple[Rule, ...] = ()

    @property
    def gemm(self) -> tuple[Rule, ...]:
        """The GEMM configs' rules, in check order (known-wrong first, as ``explain`` lists them)."""
        return self.known_wrong + self.ck_revision

    def of_kind(self, depthwise: bool) -> tuple[Rule, ...]:
        """The rules of one kind of config."""
        return self.depthwise if depthwise else self.gemm


def ck_revision_rules(revision: CkRevision, arch: str, cell: Cell) -> tuple[Rule, ...]:
    """What ``revision`` cannot build in ``cell`` of ``arch`` (GEMM configs), the rules that fold to
    TRUE there left out: what ``emit`` checks a listed kernel against before it writes it."""
    return tuple(r for r in ck_rules(revision, cell.variant, cell.dtype, arch=arch, ndim=cell.ndim) if not r.vacuous)


def target_rules(target: Target, arch: str, cell: Cell) -> TargetRules:
    """The rules ``target`` adds in ``cell`` of ``arch``: none for rules only; the known-wrong ones,
    and with CK headers found what they cannot build. The one statement the listing (through the
    cell cache), each cell's CP-SAT model (so ``explain`` names them), ``violated_rules`` and
    selection's vector fallbacks read."""
    if target.rules_only:
        return TargetRules()
    known_wrong = known_wrong_rules(cell.variant, cell.dtype)
    if target.ck is None:
        return TargetRules(known_wrong=known_wrong)
    revision = target.ck.revision()
    return TargetRules(
        known_wrong=known_wrong,
        ck_revision=ck_rules(revision, cell.variant, cell.dtype, arch=arch, ndim=cell.ndim),
        depthwise=ck_depthwise_rules(revision),
    )
