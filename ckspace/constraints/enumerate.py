"""Enumerate a request: the rule set's proposals, classified by the validity predicates.

"Valid" means what the upstream generator really emits: a proposal of the rule set that passes
``is_valid_for_arch`` and ``is_config_valid`` (depthwise configs: their own checks).
"""

from __future__ import annotations

import logging

import numpy as np

from ckspace.constraints.classify import predicate_masks
from ckspace.constraints.request import Cell, CellResult, Request
from ckspace.constraints.rules import depthwise_rules, gemm_rules
from ckspace.constraints.rulesets import get_rule_set
from ckspace.constraints.rulesets.base import CellProposals
from ckspace.space.fields import DEPTHWISE_FIELDS, GEMM_FIELD_NAMES
from ckspace.space.vocab import Dtype, Variant

log = logging.getLogger(__name__)

VALID_PREDICATES = ("structure", "is_valid_for_arch", "is_config_valid")


def classify(arch: str, variant: Variant, dtype: Dtype,
             proposals: list[CellProposals]) -> list[CellResult]:
    """Classify the proposals of several cells that share (variant, dtype), hence their rules,
    in one vectorised pass: the rule set's output (candidates passing the predicates it applies
    itself) and, for each config of it, whether the generator emits it."""
    rows = [row for p in proposals for row in p.candidates]
    masks = predicate_masks(gemm_rules(arch, variant, dtype), rows, GEMM_FIELD_NAMES)
    valid_all = np.logical_and.reduce([masks[p] for p in VALID_PREDICATES])
    dw_rows = [row for p in proposals for row in p.depthwise]
    dw_valid = predicate_masks(depthwise_rules(), dw_rows, DEPTHWISE_FIELDS)["depthwise"].tolist()
    out, start, dw_start = [], 0, 0
    for p in proposals:
        stop, dw_stop = start + len(p.candidates), dw_start + len(p.depthwise)
        raw = np.logical_and.reduce([masks[a][start:stop] for a in p.applies] + [np.ones(stop - start, bool)])
        out.append(CellResult(
            gemm=[row for row, keep in zip(p.candidates, raw.tolist()) if keep],
            gemm_valid=valid_all[start:stop][raw].tolist(),
            depthwise=list(p.depthwise),
            depthwise_valid=dw_valid[dw_start:dw_stop],
        ))
        start, dw_start = stop, dw_stop
    return out


def compute(request: Request, proposals: dict[Cell, CellProposals] | None = None) -> dict[Cell, CellResult]:
    """Enumerate ``request`` from scratch (no cache); ``proposals`` are the rule set's, when the
    caller already has them."""
    if proposals is None:
        proposals = get_rule_set(request.rule_set).propose(request)
    out: dict[Cell, CellResult] = {}
    for variant in request.variants:
        for dtype in request.dtypes:
            cells = [c for c in request.cells if c.variant is variant and c.dtype is dtype]
            for cell, result in zip(cells, classify(request.arch, variant, dtype, [proposals[c] for c in cells])):
                out[cell] = result
                log.debug("%s %s %s: %d raw, %d valid", request.arch, request.rule_set, cell.label(),
                          result.count_raw, result.count_valid)
    return {cell: out[cell] for cell in request.cells}
