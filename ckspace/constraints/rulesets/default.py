"""Rule set ``default``: upstream's small hand-curated list (RULES.md section 7).

It ignores the requested dtypes and leaves configs untagged, so every dtype gets the same
proposals; it runs ``is_valid_for_arch`` itself, and the generator's config check then decides
per dtype.
"""

from __future__ import annotations

from ckspace.constraints.request import Cell, Request
from ckspace.constraints.rulesets import register
from ckspace.constraints.rulesets.base import CellProposals, RuleSet


@register
class DefaultRuleSet(RuleSet):
    name = "default"
    summary = "upstream's hand-curated list: 10 tiles x 2 pipelines per variant, untagged"
    tags_dtype = False

    def propose(self, request: Request) -> dict[Cell, CellProposals]:
        from ckspace.constraints.generate.default import proposals  # deferred: see generate/

        applies = ("structure", "is_valid_for_arch")  # upstream: trait check + is_valid_for_arch
        return {cell: CellProposals(proposals(cell.variant), applies) for cell in request.cells}
