"""Enumerate a request: the rule set's proposals, classified by the validity predicates, through
the cell cache.

"Valid" means what the upstream generator really emits: a proposal of the rule set that passes
:data:`~ckspace.core.vocab.EMITTED_PREDICATES` (depthwise configs: their own checks).
:func:`enumerate_cells` is the one entry: it answers each cell from the cache
(:mod:`ckspace.constraints.enumeration.cellcache`) where it can and classifies the rest in one pass. A rule set
that samples another (``derives_from``) receives that rule set's results through the same entry, so
a cold ``tiny`` reuses a cached ``full``.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import replace

from ckspace.constraints.enumeration import cellcache
from ckspace.constraints.rulesets import get_rule_set
from ckspace.core.cells import Cell, CellProposals, CellResult, Request
from ckspace.environment.target import Target

log = logging.getLogger(__name__)


def enumerate_cells(request: Request, use_cache: bool = True, target: Target | None = None) -> dict[Cell, CellResult]:
    """Every cell of ``request`` in request order: from the cache where possible, else computed
    (and stored). With a ``target``, a kernel is valid only if the target's rules hold too
    (:func:`ckspace.constraints.rulebook.catalogue.target_rules`); the rows stay the rule set's output."""
    key = None if target is None else target.cache_key
    if key is not None:
        return _target_cells(request, use_cache, target, key)
    results: dict[Cell, CellResult] = {}
    if use_cache:
        for cell in request.cells:
            hit = cellcache.load(request, cell)
            if hit is not None:
                results[cell] = hit
    missing = [cell for cell in request.cells if cell not in results]
    if missing:
        fresh = classify_cells(request, propose(request, use_cache))  # cells sharing rules: one pass
        for cell in missing:
            results[cell] = fresh[cell]
            if use_cache:
                cellcache.store(request, cell, fresh[cell])
    return {cell: results[cell] for cell in request.cells}


def _target_cells(request: Request, use_cache: bool, target: Target, key: str) -> dict[Cell, CellResult]:
    """The cells of ``request`` narrowed to ``target``: the rule space's rows, with the flags of the
    rows the target's rules reject cleared (cached under the target's key, rows not repeated)."""
    base = enumerate_cells(request, use_cache)
    results: dict[Cell, CellResult] = {}
    for cell in request.cells:
        result = base[cell]
        flags = (
            cellcache.load_flags(request, cell, key, (len(result.gemm), len(result.depthwise))) if use_cache else None
        )
        if flags is None:
            from ckspace.constraints.evaluators.classify import satisfies_all
            from ckspace.constraints.rulebook.catalogue import target_rules
            from ckspace.core.fields import DEPTHWISE_FIELDS, GEMM_FIELD_NAMES

            added = target_rules(target, request.arch, cell)
            gemm_ok = satisfies_all(added.gemm, result.gemm, GEMM_FIELD_NAMES)
            dw_ok = satisfies_all(added.depthwise, result.depthwise, DEPTHWISE_FIELDS)
            flags = (
                [a and b for a, b in zip(result.gemm_valid, gemm_ok, strict=True)],
                [a and b for a, b in zip(result.depthwise_valid, dw_ok, strict=True)],
            )
            if use_cache:
                cellcache.store_flags(request, cell, key, *flags)
        results[cell] = replace(result, gemm_valid=flags[0], depthwise_valid=flags[1])
    return results


def propose(request: Request, use_cache: bool = True) -> dict[Cell, CellProposals]:
    """The rule set's proposals for every cell of ``request``; a derived rule set gets the
    enumerated cells of the rule set it samples."""
    rule_set = get_rule_set(request.rule_set)
    base = None
    if rule_set.derives_from is not None:
        base = enumerate_cells(replace(request, rule_set=rule_set.derives_from), use_cache)
    return rule_set.propose(request, base)


def classify_cells(request: Request, proposals: Mapping[Cell, CellProposals]) -> dict[Cell, CellResult]:
    """Classify the proposals of every cell (no cache): cells sharing (variant, dtype), hence their
    rules, in one vectorised pass."""
    from ckspace.constraints.evaluators.classify import classify_group  # deferred: the cold path needs numpy

    out: dict[Cell, CellResult] = {}
    for variant in request.variants:
        for dtype in request.dtypes:
            cells = [c for c in request.cells if c.variant is variant and c.dtype is dtype]
            for cell, result in zip(
                cells,
                classify_group(request.arch, variant, dtype, [proposals[c] for c in cells], request.rules_revision),
                strict=True,
            ):
                out[cell] = result
                log.debug(
                    "%s %s %s (rules %s): %d raw, %d valid",
                    request.arch,
                    request.rule_set,
                    cell.label(),
                    request.rules_revision,
                    result.count_raw,
                    result.count_valid,
                )
    return {cell: out[cell] for cell in request.cells}
