"""Rule set ``full-tests``: a deterministic ~20 % stratified subset of ``full`` (RULES.md 9)."""

from __future__ import annotations

from dataclasses import replace

from ckspace.constraints.request import Cell, Request
from ckspace.constraints.rulesets import register
from ckspace.constraints.rulesets.base import CellProposals, RuleSet


@register
class FullTestsRuleSet(RuleSet):
    name = "full-tests"
    summary = "every 5th config of each full category, plus one per uncovered (pipeline, scheduler)"
    request_wide = True

    def propose(self, request: Request) -> dict[Cell, CellProposals]:
        from ckspace.constraints.generate.sampling import emission_list, full_tests_select, split
        from ckspace.constraints.enumerate import compute  # deferred: see RuleSet

        entries = emission_list(request, compute(replace(request, rule_set="full")))
        return split(request, full_tests_select(entries))
