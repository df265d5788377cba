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
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from ckspace.constraints.enumeration import cellcache
from ckspace.constraints.rulesets import get_rule_set
from ckspace.core.cells import Cell, CellProposals, CellResult, Request
from ckspace.environment.target import Target

if TYPE_CHECKING:
    from ckspace.constraints.language.rule import Rule

log = logging.getLogger(__name__)


def enumerate_cells(
    request: Request,
    use_cache: bool = True,
    target: Target | None = None,
    memo: dict[Request, dict[Cell, CellResult]] | None = None,
) -> dict[Cell, CellResult]:
    """Every cell of ``request`` in request order: from the cache where possible, else computed
    (and stored). With a ``target``, a kernel is valid only if the target's rules hold too
    (:func:`ckspace.constraints.rulebook.catalogue.target_rules`); the rows stay the rule set's output.

    ``memo`` holds the rule space's cells of requests this process has enumerated already (a
    space and the spaces narrowed from it share one): a target's listing and the rule space's (the
    two counts ``enumerate`` reports) then classify the proposals once, even without the cache."""
    key = None if target is None else target.cache_key
    if key is not None:
        return _target_cells(request, use_cache, target, key, memo)
    if memo is not None and request in memo:
        return memo[request]
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
    results = {cell: results[cell] for cell in request.cells}
    if memo is not None:
        memo[request] = results
    return results


def _target_cells(
    request: Request, use_cache: bool, target: Target, key: str, memo: dict[Request, dict[Cell, CellResult]] | None
) -> dict[Cell, CellResult]:
    """The cells of ``request`` narrowed to ``target``: the rule space's rows, with the flags of the
    rows the target's rules reject cleared (cached under the target's key, rows not repeated)."""
    base = enumerate_cells(request, use_cache, memo=memo)
    flags: dict[Cell, tuple[list[bool], list[bool]]] = {}
    if use_cache:
        for cell in request.cells:
            result = base[cell]
            hit = cellcache.load_flags(request, cell, key, (len(result.gemm), len(result.depthwise)))
            if hit is not None:
                flags[cell] = hit
    missing = [cell for cell in request.cells if cell not in flags]
    if missing:
        fresh = target_flags(request.arch, target, {cell: base[cell] for cell in missing})
        for cell in missing:
            flags[cell] = fresh[cell]
            if use_cache:
                cellcache.store_flags(request, cell, key, *fresh[cell])
    return {
        cell: replace(base[cell], gemm_valid=flags[cell][0], depthwise_valid=flags[cell][1]) for cell in request.cells
    }


def target_flags(
    arch: str, target: Target, results: Mapping[Cell, CellResult]
) -> dict[Cell, tuple[list[bool], list[bool]]]:
    """The (GEMM, depthwise) validity flags of each cell's rows for ``target``: the rule space's flags,
    cleared where a rule the target adds (:func:`ckspace.constraints.rulebook.catalogue.target_rules`)
    fails. Cells the catalogue gives the same rules (the ndims of a variant and dtype, mostly) are
    evaluated in one pass, and only on the rows the rule space keeps: the rules' cost is per pass,
    not per row, and a row the rule space rejects stays rejected whatever they say."""
    from ckspace.constraints.rulebook.catalogue import TargetRules, target_rules
    from ckspace.core.fields import DEPTHWISE_FIELDS, GEMM_FIELD_NAMES
    from ckspace.core.vocab import Dtype, Variant

    out: dict[Cell, tuple[list[bool], list[bool]]] = {}
    groups: dict[tuple[Variant, Dtype], list[tuple[TargetRules, list[Cell]]]] = {}
    for cell, result in results.items():
        if not any(result.gemm_valid) and not any(result.depthwise_valid):
            out[cell] = (list(result.gemm_valid), list(result.depthwise_valid))  # nothing for the rules to clear
            continue
        added = target_rules(target, arch, cell)
        alike = groups.setdefault((cell.variant, cell.dtype), [])  # other variants and dtypes: other rules
        for rules, cells in alike:
            if rules == added:
                cells.append(cell)
                break
        else:
            alike.append((added, [cell]))
    for added, cells in (group for alike in groups.values() for group in alike):
        gemm = _narrowed(added.gemm, [(results[c].gemm, results[c].gemm_valid) for c in cells], GEMM_FIELD_NAMES)
        depthwise = _narrowed(
            added.depthwise, [(results[c].depthwise, results[c].depthwise_valid) for c in cells], DEPTHWISE_FIELDS
        )
        out.update((cell, (g, d)) for cell, g, d in zip(cells, gemm, depthwise, strict=True))
    return {cell: out[cell] for cell in results}


def _narrowed(
    rules: Sequence[Rule], cells: Sequence[tuple[Sequence[tuple[int, ...]], Sequence[bool]]], field_names: Sequence[str]
) -> list[list[bool]]:
    """Each cell's flags (its ``(rows, flags)`` in ``cells``) and ``rules`` on its flagged rows."""
    from ckspace.constraints.evaluators.classify import satisfies_all

    kept = [row for rows, valid in cells for row, ok in zip(rows, valid, strict=True) if ok]
    passed = iter(satisfies_all(rules, kept, field_names))
    return [[ok and next(passed) for ok in valid] for _, valid in cells]


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
