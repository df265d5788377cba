"""Enumerate a request: the rule set's proposals, classified by the validity predicates.

"Valid" means what the upstream generator really emits: a proposal of the rule set that passes
``is_valid_for_arch`` and ``is_config_valid`` (depthwise configs: their own checks).
"""

from __future__ import annotations

import logging

from ckspace.constraints.classify import passing
from ckspace.constraints.request import Cell, CellResult, Request
from ckspace.constraints.rules import depthwise_rules, gemm_rules
from ckspace.constraints.rulesets import get_rule_set
from ckspace.space.fields import DEPTHWISE_FIELDS, GEMM_FIELD_NAMES, Row

log = logging.getLogger(__name__)

VALID_PREDICATES = ("structure", "is_valid_for_arch", "is_config_valid")


def classify_cell(arch: str, cell: Cell, gemm: list[Row], depthwise: list[Row]) -> CellResult:
    rules = gemm_rules(arch, cell.variant, cell.dtype)
    ok = passing(rules, gemm, GEMM_FIELD_NAMES, VALID_PREDICATES)
    dw_ok = passing(depthwise_rules(), depthwise, DEPTHWISE_FIELDS, ("depthwise",))
    return CellResult(gemm, ok.tolist(), depthwise, dw_ok.tolist())


def compute(request: Request) -> dict[Cell, CellResult]:
    """Enumerate ``request`` from scratch (no cache)."""
    proposals = get_rule_set(request.rule_set).propose(request)
    out = {}
    for cell in request.cells:
        p = proposals[cell]
        out[cell] = classify_cell(request.arch, cell, p.gemm, p.depthwise)
        log.debug("%s %s: %d raw, %d valid", request.arch, cell.label(), out[cell].count_raw,
                  out[cell].count_valid)
    return out
