"""Rule set ``tiny``: about ten configs chosen from ``full-tests`` (RULES.md 10)."""

from __future__ import annotations

from dataclasses import replace

from ckspace.constraints.request import Cell, Request
from ckspace.constraints.rulesets import register
from ckspace.constraints.rulesets.base import CellProposals, RuleSet


@register
class TinyRuleSet(RuleSet):
    name = "tiny"
    summary = "the first full-tests config of each (category, ndim) group, round-robin to ten"
    request_wide = True

    def propose(self, request: Request) -> dict[Cell, CellProposals]:
        from ckspace.constraints.generate.sampling import emission_list, full_tests_select, split, tiny_select
        from ckspace.constraints.enumerate import compute  # deferred: see RuleSet

        entries = emission_list(request, compute(replace(request, rule_set="full")))
        return split(request, tiny_select(full_tests_select(entries)))
