"""A small expression language in which every rule is written once.

A rule is an :class:`Expr` over config fields (integers; enums as codes, booleans as 0/1). The same
expression object is

* compiled into CP-SAT constraints (:mod:`ckspace.constraints.cpsat`) for reasoning: membership of
  a partial config, blame of minimal rule sets, optimisation;
* evaluated on numpy columns (:func:`evaluate`) to classify a rule set's thousands of concrete
  proposals at once, which CP-SAT's one-solution-at-a-time enumeration does three orders of
  magnitude slower.

Keeping one definition behind both is what makes "rules live once" true; tests assert that the two
backends agree rule by rule. Nodes are immutable and hashable so compiled literals can be shared.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Union

import numpy as np

Columns = Mapping[str, np.ndarray]


class Expr:
    """Base node. Arithmetic operators build integer nodes, comparisons build boolean ones."""

    __slots__ = ()

    def __add__(self, other: "ExprLike") -> "Expr":
        return Arith("+", self, lift(other))

    def __radd__(self, other: "ExprLike") -> "Expr":
        return Arith("+", lift(other), self)

    def __sub__(self, other: "ExprLike") -> "Expr":
        return Arith("-", self, lift(other))

    def __mul__(self, other: "ExprLike") -> "Expr":
        return Arith("*", self, lift(other))

    def __rmul__(self, other: "ExprLike") -> "Expr":
        return Arith("*", lift(other), self)

    def __rsub__(self, other: "ExprLike") -> "Expr":
        return Arith("-", lift(other), self)

    def __floordiv__(self, other: "ExprLike") -> "Expr":
        return Arith("//", self, lift(other))

    def __rfloordiv__(self, other: "ExprLike") -> "Expr":
        return Arith("//", lift(other), self)

    def __mod__(self, other: "ExprLike") -> "Expr":
        return Arith("%", self, lift(other))

    def __lt__(self, other: "ExprLike") -> "Expr":  # type: ignore[override]
        return Cmp("<", self, lift(other))

    def __le__(self, other: "ExprLike") -> "Expr":  # type: ignore[override]
        return Cmp("<=", self, lift(other))

    def __gt__(self, other: "ExprLike") -> "Expr":  # type: ignore[override]
        return Cmp(">", self, lift(other))

    def __ge__(self, other: "ExprLike") -> "Expr":  # type: ignore[override]
        return Cmp(">=", self, lift(other))

    def eq(self, other: "ExprLike") -> "Expr":
        return Cmp("==", self, lift(other))

    def ne(self, other: "ExprLike") -> "Expr":
        return Cmp("!=", self, lift(other))

    def isin(self, values: Iterable[int]) -> "Expr":
        return In((self,), frozenset((int(v),) for v in values))


ExprLike = Union[Expr, int, bool]


@dataclass(frozen=True, slots=True)
class Field(Expr):
    name: str


@dataclass(frozen=True, slots=True)
class Const(Expr):
    value: int


@dataclass(frozen=True, slots=True)
class Arith(Expr):
    op: str
    left: Expr
    right: Expr


@dataclass(frozen=True, slots=True)
class Cmp(Expr):
    op: str
    left: Expr
    right: Expr


@dataclass(frozen=True, slots=True)
class In(Expr):
    """The tuple of ``items`` is one of the rows of ``table``."""

    items: tuple[Expr, ...]
    table: frozenset[tuple[int, ...]]


@dataclass(frozen=True, slots=True)
class Lookup(Expr):
    """``mapping[key]`` for an integer key expression (``default`` when absent); ``name`` is what
    failure messages call the table (``limit[pipeline]``)."""

    key: Expr
    mapping: tuple[tuple[int, int], ...]
    default: int
    name: str = "limit"


@dataclass(frozen=True, slots=True)
class And(Expr):
    parts: tuple[Expr, ...]


@dataclass(frozen=True, slots=True)
class Or(Expr):
    parts: tuple[Expr, ...]


@dataclass(frozen=True, slots=True)
class Not(Expr):
    part: Expr


TRUE = Const(1)

NEGATED: dict[str, str] = {"<": ">=", "<=": ">", ">": "<=", ">=": "<", "==": "!=", "!=": "=="}
"""The comparison that holds exactly when the key does not."""


def lift(value: ExprLike) -> Expr:
    if isinstance(value, Expr):
        return value
    return Const(int(value))


def all_of(*parts: Expr) -> Expr:
    return parts[0] if len(parts) == 1 else And(tuple(parts))


def any_of(*parts: Expr) -> Expr:
    return parts[0] if len(parts) == 1 else Or(tuple(parts))


def implies(condition: Expr, consequence: Expr) -> Expr:
    return Or((Not(condition), consequence))


def lookup(key: Expr, mapping: Mapping[int, int], default: int, name: str = "limit") -> Expr:
    return Lookup(key, tuple(sorted(mapping.items())), default, name)


def in_table(items: Iterable[Expr], rows: Iterable[Iterable[int]]) -> Expr:
    return In(tuple(items), frozenset(tuple(int(v) for v in row) for row in rows))


def fields_of(expr: Expr) -> tuple[str, ...]:
    """The config fields ``expr`` reads, sorted: what a rule's blame message shows."""
    found: set[str] = set()
    stack = [expr]
    while stack:
        node = stack.pop()
        if isinstance(node, Field):
            found.add(node.name)
        elif isinstance(node, (Arith, Cmp)):
            stack += [node.left, node.right]
        elif isinstance(node, In):
            stack += list(node.items)
        elif isinstance(node, Lookup):
            stack.append(node.key)
        elif isinstance(node, (And, Or)):
            stack += list(node.parts)
        elif isinstance(node, Not):
            stack.append(node.part)
    return tuple(sorted(found))


_ARITH = {
    "+": np.add,
    "-": np.subtract,
    "*": np.multiply,
    "//": np.floor_divide,
    "%": np.mod,
}
_CMP = {
    "<": np.less,
    "<=": np.less_equal,
    ">": np.greater,
    ">=": np.greater_equal,
    "==": np.equal,
    "!=": np.not_equal,
}


def evaluate(expr: Expr, cols: Columns) -> np.ndarray:
    """Evaluate ``expr`` on equally long int64 columns; booleans come back as bool arrays.

    Division and modulo treat a divisor below 1 as 1 (the CP-SAT compiler does the same), so an
    expression is total; rules that can meet such a divisor guard against it explicitly.
    """
    if isinstance(expr, Field):
        return cols[expr.name]
    if isinstance(expr, Const):
        return np.int64(expr.value)
    if isinstance(expr, Arith):
        left, right = evaluate(expr.left, cols), evaluate(expr.right, cols)
        if expr.op in ("//", "%"):
            right = np.maximum(right, 1)
        return _ARITH[expr.op](left, right)
    if isinstance(expr, Cmp):
        return _CMP[expr.op](evaluate(expr.left, cols), evaluate(expr.right, cols))
    if isinstance(expr, In):
        values = [evaluate(item, cols) for item in expr.items]
        hit = np.zeros(np.broadcast(*values).shape, dtype=bool)
        for row in expr.table:
            match = np.ones_like(hit)
            for value, want in zip(values, row):
                match &= value == want
            hit |= match
        return hit
    if isinstance(expr, Lookup):
        key = evaluate(expr.key, cols)
        out = np.full(np.shape(key), expr.default, dtype=np.int64)
        for k, v in expr.mapping:
            out = np.where(key == k, v, out)
        return out
    if isinstance(expr, And):
        result = np.bool_(True)
        for part in expr.parts:
            result = result & evaluate(part, cols)
        return result
    if isinstance(expr, Or):
        result = np.bool_(False)
        for part in expr.parts:
            result = result | evaluate(part, cols)
        return result
    if isinstance(expr, Not):
        return ~np.asarray(evaluate(expr.part, cols), dtype=bool)
    raise TypeError(f"not an expression node: {expr!r}")
