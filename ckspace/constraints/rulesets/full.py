"""Rule set ``full``: upstream's rule-derived space.

The rule set calls ``TileConfig.is_valid`` and ``is_valid_for_arch`` on its own proposals, as
upstream does; the walk over its tables is :mod:`ckspace.constraints.generate.full_walk`.
"""

from __future__ import annotations

from collections.abc import Mapping

from ckspace.constraints.rulesets import register
from ckspace.constraints.rulesets.base import RuleSet
from ckspace.core.cells import Cell, CellProposals, CellResult, Request
from ckspace.core.vocab import Predicate


@register
class FullRuleSet(RuleSet):
    name = "full"
    summary = "upstream's rule-derived space: curated tiles x waves x vectors x pipelines x features"

    def propose(self, request: Request, base: Mapping[Cell, CellResult] | None = None) -> dict[Cell, CellProposals]:
        from ckspace.constraints.generate.full_walk import cell_candidates, depthwise_rows  # deferred

        applies = (Predicate.STRUCTURE, Predicate.TILE_DIVISIBILITY, Predicate.IS_VALID_FOR_ARCH)
        out = {}
        for cell in request.cells:
            rows, duplicates = cell_candidates(request.arch, cell)
            out[cell] = CellProposals(rows, applies, depthwise_rows(cell), duplicates)
        return out
