"""Rule set ``open``: no proposal table, every config of the documented domains that the rules allow.

Each GEMM field ranges over a domain stated as a named rule (:mod:`ckspace.constraints.generate.open_domains`)
and validity is exactly the rules: the validity predicates, and with a CK revision, a problem or
filters, their rules too. The spaces are far too large to list up front (about 10^11 configs a
cell), so the enumerator never sees them: :mod:`ckspace.constraints.evaluators.count` counts them exactly,
lists them lazily and samples them uniformly.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from ckspace.constraints.rulesets import register
from ckspace.constraints.rulesets.base import RuleSet
from ckspace.core.cells import Cell, CellProposals, CellResult, Request
from ckspace.core.errors import CkspaceError

if TYPE_CHECKING:
    from ckspace.constraints.language.rule import Rule


@register
class OpenRuleSet(RuleSet):
    name = "open"
    summary = "no table: every config of the documented per-field domains that the rules allow, counted exactly"
    has_table = False

    def propose(self, request: Request, base: Mapping[Cell, CellResult] | None = None) -> dict[Cell, CellProposals]:
        raise CkspaceError(
            "rule set open proposes no table (about 10^11 configs a cell): count, list and sample "
            "it through Space or `ckspace enumerate --rule-set open`"
        )

    def domain_rules(self, arch: str, cell: Cell) -> tuple[Rule, ...]:
        from ckspace.constraints.generate.open_domains import domain_rules  # deferred: see generate/

        return domain_rules(arch, cell)
