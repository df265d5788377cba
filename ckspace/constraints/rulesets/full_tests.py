"""Rule set ``full-tests``: a deterministic ~20 % stratified subset of ``full``."""

from __future__ import annotations

from collections.abc import Mapping

from ckspace.constraints.rulesets import register
from ckspace.constraints.rulesets.base import RuleSet
from ckspace.core.cells import Cell, CellProposals, CellResult, Request


@register
class FullTestsRuleSet(RuleSet):
    name = "full-tests"
    summary = "every 5th config of each full category, plus one per uncovered (pipeline, scheduler)"
    request_wide = True
    derives_from = "full"

    def propose(self, request: Request,
                base: Mapping[Cell, CellResult] | None = None) -> dict[Cell, CellProposals]:
        from ckspace.constraints.generate.sampling import (
            emission_list,
            full_tests_select,
            split,
        )

        assert base is not None, "the enumerator passes full's cells"
        return split(request, full_tests_select(emission_list(request, base)))
