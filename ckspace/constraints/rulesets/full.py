"""Rule set ``full``: upstream's rule-derived space (RULES.md section 8).

The rule set calls ``TileConfig.is_valid`` and ``is_valid_for_arch`` on its own proposals, as
upstream does; the walk over its tables is :mod:`ckspace.constraints.generate.full`.
"""

from __future__ import annotations

from ckspace.constraints.request import Cell, Request
from ckspace.constraints.rulesets import register
from ckspace.constraints.rulesets.base import CellProposals, RuleSet


@register
class FullRuleSet(RuleSet):
    name = "full"
    summary = "upstream's rule-derived space: curated tiles x waves x vectors x pipelines x features"

    def propose(self, request: Request) -> dict[Cell, CellProposals]:
        return {cell: self.propose_cell(request.arch, cell) for cell in request.cells}

    def propose_cell(self, arch: str, cell: Cell) -> CellProposals:
        from ckspace.constraints.generate.full import cell_candidates, depthwise_rows  # deferred

        rows, duplicates = cell_candidates(arch, cell)
        return CellProposals(rows, ("structure", "tile_divisibility", "is_valid_for_arch"), depthwise_rows(cell),
                             duplicates)
