"""Vectorised classification of concrete configs against named rules.

Rule sets propose thousands of fully specified configs per arch; deciding each through a solver
call would cost milliseconds apiece. Here the same rule expressions are evaluated on numpy columns,
one array operation per node for all proposals at once, which also yields, per proposal, exactly
which rules it breaks (the raw material of lint reports).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

from ckspace.constraints.expr import evaluate
from ckspace.constraints.rules import Rule


def columns(rows: Sequence[Sequence[int]], field_names: Sequence[str]) -> dict[str, np.ndarray]:
    """Columns of ``rows`` (tuples in ``field_names`` order) as int64 arrays."""
    matrix = np.asarray(rows, dtype=np.int64).reshape(len(rows), len(field_names))
    return {name: matrix[:, i] for i, name in enumerate(field_names)}


def rule_masks(rules: Iterable[Rule], cols: dict[str, np.ndarray], size: int) -> dict[str, np.ndarray]:
    """For each rule, a bool array: True where the row satisfies it."""
    out: dict[str, np.ndarray] = {}
    for rule in rules:
        mask = evaluate(rule.expr, cols)
        out[rule.name] = np.broadcast_to(np.asarray(mask, dtype=bool), (size,))
    return out


def predicate_masks(rules: Iterable[Rule], rows: Sequence[Sequence[int]],
                    field_names: Sequence[str]) -> dict[str, np.ndarray]:
    """For each predicate, a bool array: True where a row satisfies every rule of it."""
    out: dict[str, np.ndarray] = {}
    cols = columns(rows, field_names)
    for rule in rules:
        mask = out.setdefault(rule.predicate, np.ones(len(rows), dtype=bool))
        if not rule.vacuous:
            mask &= np.asarray(evaluate(rule.expr, cols), dtype=bool)
    return out
