"""Rule set ``full-tests``: a deterministic ~20 % stratified subset of ``full`` (RULES.md 9)."""

from __future__ import annotations

from ckspace.constraints.request import Cell, Request
from ckspace.constraints.rulesets import get_rule_set, register
from ckspace.constraints.rulesets.base import CellProposals, RuleSet


@register
class FullTestsRuleSet(RuleSet):
    name = "full-tests"
    summary = "every 5th config of each full category, plus one per uncovered (pipeline, scheduler)"
    request_wide = True

    def propose(self, request: Request) -> dict[Cell, CellProposals]:
        from ckspace.constraints.generate.sampling import emission_list, full_tests_select, split  # deferred

        entries = emission_list(request, get_rule_set("full").propose(request))
        return split(request, full_tests_select(entries))
