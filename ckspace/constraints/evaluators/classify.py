"""Vectorised classification of concrete configs against named rules.

Rule sets propose thousands of fully specified configs per arch; deciding each through a solver
call would cost milliseconds apiece. Here the same rule expressions are evaluated on numpy columns,
one array operation per node for all proposals at once, which also yields, per proposal, exactly
which rules it breaks (the raw material of lint reports).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

from ckspace.constraints.language.expr import FALSE, evaluate
from ckspace.constraints.language.rule import Rule, any_excludes_kind
from ckspace.constraints.rulebook.validity import depthwise_rules, gemm_rules
from ckspace.core.cells import CellProposals, CellResult
from ckspace.core.fields import DEPTHWISE_FIELDS, GEMM_FIELD_NAMES
from ckspace.core.vocab import EMITTED_PREDICATES, Dtype, Predicate, Variant


def columns(rows: Sequence[Sequence[int]], field_names: Sequence[str]) -> dict[str, np.ndarray]:
    """Columns of ``rows`` (tuples in ``field_names`` order) as int64 arrays."""
    matrix = np.asarray(rows, dtype=np.int64).reshape(len(rows), len(field_names))
    return {name: matrix[:, i] for i, name in enumerate(field_names)}


def rule_masks(rules: Iterable[Rule], cols: dict[str, np.ndarray], size: int) -> dict[str, np.ndarray]:
    """For each rule, a bool array: True where the row satisfies it (subexpressions the rules share
    evaluated once: :func:`~ckspace.constraints.language.expr.evaluate`'s memo)."""
    out: dict[str, np.ndarray] = {}
    rules = list(rules)  # alive while the memo keys on their nodes' identities
    memo: dict[int, object] = {}
    for rule in rules:
        mask = evaluate(rule.expr, cols, memo)
        out[rule.name] = np.broadcast_to(np.asarray(mask, dtype=bool), (size,))
    return out


def satisfies_all(rules: Sequence[Rule], rows: list[tuple[int, ...]], field_names: Sequence[str]) -> list[bool]:
    """Which rows satisfy every rule. A rule naming a field the rows lack (a GEMM field for a
    depthwise config, say) excludes them all (:func:`~ckspace.constraints.language.rule.excludes_kind`), for
    filters, a problem's checks and a target's rules alike."""
    if not rules or not rows:
        return [True] * len(rows)
    if any(rule.expr == FALSE for rule in rules):
        return [False] * len(rows)  # a rule none of them satisfies (a CK that cannot build the cell): no pass
    try:
        masks = rule_masks(rules, columns(rows, field_names), len(rows))
    except KeyError:  # a column the rows lack: walk the rules' fields only then, not on every pass
        if any_excludes_kind(rules, field_names):
            return [False] * len(rows)
        raise
    ok = np.ones(len(rows), dtype=bool)
    for mask in masks.values():
        ok &= mask
    return ok.tolist()


def predicate_masks(
    rules: Iterable[Rule], rows: Sequence[Sequence[int]], field_names: Sequence[str]
) -> dict[Predicate, np.ndarray]:
    """For each predicate, a bool array: True where a row satisfies every rule of it."""
    out: dict[Predicate, np.ndarray] = {}
    cols = columns(rows, field_names)
    for rule in rules:
        mask = out.setdefault(rule.predicate, np.ones(len(rows), dtype=bool))
        if not rule.vacuous:
            mask &= np.asarray(evaluate(rule.expr, cols), dtype=bool)
    return out


def classify_group(
    arch: str, variant: Variant, dtype: Dtype, proposals: list[CellProposals], revision: str | None = None
) -> list[CellResult]:
    """Classify the proposals of several cells that share (variant, dtype), hence their rules,
    in one pass: the rule set's output (candidates passing the predicates it applies itself) and,
    for each config of it, whether the generator of rule revision ``revision`` emits it."""
    rows = [row for p in proposals for row in p.candidates]
    masks = predicate_masks(gemm_rules(arch, variant, dtype, revision), rows, GEMM_FIELD_NAMES)
    valid_all = np.logical_and.reduce([masks[p] for p in EMITTED_PREDICATES])
    dw_rows = [row for p in proposals for row in p.depthwise]
    dw_valid = predicate_masks(depthwise_rules(), dw_rows, DEPTHWISE_FIELDS)[Predicate.DEPTHWISE].tolist()
    out, start, dw_start = [], 0, 0
    for p in proposals:
        stop, dw_stop = start + len(p.candidates), dw_start + len(p.depthwise)
        raw = np.logical_and.reduce([masks[a][start:stop] for a in p.applies] + [np.ones(stop - start, bool)])
        out.append(
            CellResult(
                gemm=[row for row, keep in zip(p.candidates, raw.tolist(), strict=True) if keep],
                gemm_valid=valid_all[start:stop][raw].tolist(),
                depthwise=list(p.depthwise),
                depthwise_valid=dw_valid[dw_start:dw_stop],
            )
        )
        start, dw_start = stop, dw_stop
    return out
