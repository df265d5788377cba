"""Rule set ``rdna``: the forward catalog for warp-size-32 archs that upstream's open PR #12289
proposes (``grouped_config_rules_rdna.py`` at the commit ``rdna.json`` records).

Four configs a cell on gfx1100, gfx1200 and gfx1201 (fp16 and bf16, 2D and 3D), each a 16x16x16
warp tile on purpose: native wave32 WMMA runs that shape. The rule set runs no validity check
itself, so its raw list is the whole catalog; under the merged rules the WMMA warp_tile_k floor of
``is_valid_for_arch`` (32) rejects every config, and rules revision ``pr12289``, the PR's later
state, lowers it to 16 so that they pass. Upstream raises for any request with a part the catalog
does not support (another variant, ndim 1, fp32, a warp-size-64 arch, gfx1250), and so does this
rule set (:class:`~ckspace.constraints.rulesets.base.RuleSetRefusal`).
"""

from __future__ import annotations

from collections.abc import Mapping

from ckspace.constraints.rulesets import register
from ckspace.constraints.rulesets.base import RuleSet, RuleSetRefusal
from ckspace.core.cells import Cell, CellProposals, CellResult, Request


@register
class RdnaRuleSet(RuleSet):
    name = "rdna"
    summary = "upstream's proposed wave32 forward catalog (open PR #12289): one 16x16x16 config per wave split"

    def refusal(self, arch: str, cell: Cell) -> str | None:
        from ckspace.constraints.generate.rdna_list import refusal  # deferred: see generate/

        return refusal(arch, (cell.variant,), (cell.ndim,), (cell.dtype,))

    def propose(self, request: Request, base: Mapping[Cell, CellResult] | None = None) -> dict[Cell, CellProposals]:
        from ckspace.constraints.generate.rdna_list import proposals, refusal

        reason = refusal(request.arch, request.variants, request.ndims, request.dtypes)
        if reason is not None:
            raise RuleSetRefusal(self.name, request.arch, reason)
        return {cell: CellProposals(proposals(request.arch, cell)) for cell in request.cells}
