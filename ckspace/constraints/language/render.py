"""Rule failures in words: which part of a rule a config breaks, with the numbers.

``lds_budget`` failing reads ``(tile_m + tile_n) * tile_k * 2 = 65536 > 32768 (the limit of
compv4)`` rather than "constraint violated": the failing comparisons of the rule's expression are
found by evaluating it on the config, and printed with their values.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from ckspace.constraints.language.expr import (
    NEGATED,
    And,
    Arith,
    Cmp,
    Const,
    Expr,
    Field,
    In,
    Lookup,
    Not,
    Or,
    Param,
    evaluate,
)
from ckspace.core.fields import FIELD_KIND, decode

_PRECEDENCE = {"+": 1, "-": 1, "*": 2, "//": 2, "%": 2}


def _enum_field(expr: Expr) -> str | None:
    if isinstance(expr, Field) and FIELD_KIND.get(expr.name) not in (None, int, bool):
        return expr.name
    return None


def _show(field: str | None, value: int) -> str:
    return str(decode(field, value)) if field else str(value)


def text(expr: Expr, enum_field: str | None = None, parent: int = 0) -> str:
    """The expression as a formula."""
    if isinstance(expr, (Field, Param)):
        return expr.name
    if isinstance(expr, Const):
        return _show(enum_field, expr.value)
    if isinstance(expr, Arith) and expr.op in ("min", "gcd"):
        return f"{expr.op}({text(expr.left)}, {text(expr.right)})"
    if isinstance(expr, Arith):
        level = _PRECEDENCE[expr.op]
        inner = f"{text(expr.left, parent=level)} {expr.op} {text(expr.right, parent=level + 1)}"
        return f"({inner})" if level < parent else inner
    if isinstance(expr, Lookup):
        return f"{expr.name}[{text(expr.key)}]"
    if isinstance(expr, Cmp):
        field = _enum_field(expr.left) or _enum_field(expr.right)
        return f"{text(expr.left, field)} {expr.op} {text(expr.right, field)}"
    if isinstance(expr, In):
        return f"({', '.join(text(i) for i in expr.items)}) in a table of {len(expr.table)}"
    if isinstance(expr, Not):
        return f"not ({text(expr.part)})"
    joiner = " and " if isinstance(expr, And) else " or "
    return joiner.join(f"({text(p)})" for p in expr.parts)  # type: ignore[attr-defined]


def _value(expr: Expr, cols: Mapping[str, np.ndarray]) -> int:
    return int(np.asarray(evaluate(expr, cols)).reshape(-1)[0])


def _holds(expr: Expr, cols: Mapping[str, np.ndarray]) -> bool:
    return bool(np.asarray(evaluate(expr, cols)).reshape(-1)[0])


def _tuple(items: tuple[Expr, ...], cols: Mapping[str, np.ndarray]) -> str:
    names = ", ".join(text(i) for i in items)
    values = ", ".join(_show(_enum_field(i), _value(i, cols)) for i in items)
    return f"{names} = {values}" if len(items) == 1 else f"({names}) = ({values})"


def _table(items: tuple[Expr, ...], table: frozenset[tuple[int, ...]], what: str = "listed") -> str:
    """The rows of a small table in words, else its size (``the 12 listed``, ``the 12 excluded``)."""
    if len(table) > 8:
        return f"the {len(table)} {what}"
    fields = [_enum_field(i) for i in items]
    rows = sorted(table)
    shown = [", ".join(_show(f, v) for f, v in zip(fields, row, strict=True)) for row in rows]
    return ", ".join(shown) if len(items) == 1 else ", ".join(f"({r})" for r in shown)


def why(expr: Expr, values: Mapping[str, int]) -> str:
    """Why ``expr`` is false for the config ``values`` (field -> encoded value)."""
    cols = {k: np.asarray([v], dtype=np.int64) for k, v in values.items()}
    return "; ".join(_failures(expr, cols)) or "holds"


def _operand(expr: Expr, cols: Mapping[str, np.ndarray], field: str | None) -> str:
    shown = text(expr, field)
    value = _show(field, _value(expr, cols))
    return value if shown == value else f"{shown} = {value}"


def _failures(expr: Expr, cols: Mapping[str, np.ndarray]) -> list[str]:
    if _holds(expr, cols):
        return []
    if isinstance(expr, And):
        return [msg for part in expr.parts for msg in _failures(part, cols)]
    if isinstance(expr, Cmp):
        field = _enum_field(expr.left) or _enum_field(expr.right)
        left, right = _operand(expr.left, cols, field), _operand(expr.right, cols, field)
        return [f"{left} {NEGATED[expr.op]} {right}"]
    if isinstance(expr, In):
        return [f"{_tuple(expr.items, cols)} is not one of {_table(expr.items, expr.table)}"]
    if isinstance(expr, Not) and isinstance(expr.part, In):
        table = expr.part.table
        listed = _table(expr.part.items, table, "excluded")
        return [f"{_tuple(expr.part.items, cols)} is one of {listed if len(table) > 8 else 'the excluded ' + listed}"]
    if isinstance(expr, Or) and len(expr.parts) == 2 and isinstance(expr.parts[0], Not):
        condition, consequence = expr.parts[0].part, expr.parts[1]  # an implication
        return [f"since {text(condition)}: {msg}" for msg in _failures(consequence, cols)]
    if isinstance(expr, Or):
        return ["none of: " + " | ".join(msg for part in expr.parts for msg in _failures(part, cols))]
    if isinstance(expr, Not):
        return [f"{text(expr.part)} holds"]
    if isinstance(expr, Const):
        return ["never holds here"]
    return [text(expr)]
