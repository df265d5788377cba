"""Rule set ``tiny``: about ten configs chosen from ``full-tests``."""

from __future__ import annotations

from collections.abc import Mapping

from ckspace.constraints.rulesets import register
from ckspace.constraints.rulesets.base import RuleSet
from ckspace.core.cells import Cell, CellProposals, CellResult, Request


@register
class TinyRuleSet(RuleSet):
    name = "tiny"
    summary = "the first full-tests config of each (category, ndim) group, round-robin to ten"
    request_wide = True
    derives_from = "full"

    def propose(self, request: Request,
                base: Mapping[Cell, CellResult] | None = None) -> dict[Cell, CellProposals]:
        from ckspace.constraints.generate.sampling import (
            emission_list,
            full_tests_select,
            split,
            tiny_select,
        )

        assert base is not None, "the enumerator passes full's cells"
        return split(request, tiny_select(full_tests_select(emission_list(request, base))))
