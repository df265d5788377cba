"""Rule set ``default``: upstream's small hand-curated list.

It ignores the requested dtypes and leaves configs untagged, so every dtype gets the same
proposals; it runs ``is_valid_for_arch`` itself, and the generator's config check then decides
per dtype.
"""

from __future__ import annotations

from collections.abc import Mapping

from ckspace.constraints.rulesets import register
from ckspace.constraints.rulesets.base import RuleSet
from ckspace.core.cells import Cell, CellProposals, CellResult, Request
from ckspace.core.vocab import Predicate


@register
class DefaultRuleSet(RuleSet):
    name = "default"
    summary = "upstream's hand-curated list: 10 tiles x 2 pipelines per variant, untagged"
    tags_dtype = False

    def propose(self, request: Request, base: Mapping[Cell, CellResult] | None = None) -> dict[Cell, CellProposals]:
        from ckspace.constraints.generate.default_list import proposals  # deferred: see generate/

        applies = (Predicate.STRUCTURE, Predicate.IS_VALID_FOR_ARCH)  # upstream: trait check + arch check
        return {cell: CellProposals(proposals(cell.variant), applies) for cell in request.cells}
