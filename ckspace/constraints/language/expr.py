"""A small expression language in which every rule is written once.

A rule is an :class:`Expr` over config fields (integers; enums as codes, booleans as 0/1) and, for
the checks a kernel makes on a convolution, over :class:`Param` quantities of the problem
(``C``, ``G``, ``stride_h``, ...). :func:`bind` folds a problem's values into such an expression,
leaving an expression over config fields only. The same expression object is

* compiled into CP-SAT constraints (:mod:`ckspace.constraints.evaluators.cpsat`) for reasoning: membership of
  a partial config, blame of minimal rule sets, optimisation;
* evaluated on numpy columns (:func:`evaluate`) to classify a rule set's thousands of concrete
  proposals at once, which CP-SAT's one-solution-at-a-time enumeration does three orders of
  magnitude slower;
* compiled into closures over a problem's values and config columns
  (:mod:`ckspace.constraints.language.partial_eval`) for the selector's problem checks;
* rendered to C (:mod:`ckspace.constraints.language.cexpr`) for the generated dispatcher's ``ckspace_is_supported``.

Keeping one definition behind all of them is what makes "rules live once" true; :func:`evaluate`
and :func:`bind` are the reference semantics (the operator tables :data:`ARITH` and
:data:`FOLD_ARITH`), and tests assert that every backend agrees with them rule by rule. Nodes are
immutable and hashable so compiled literals can be shared.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

Columns = Mapping[str, np.ndarray]


class Expr:
    """Base node. Arithmetic operators build integer nodes, comparisons build boolean ones."""

    __slots__ = ()

    def __add__(self, other: ExprLike) -> Expr:
        return Arith("+", self, lift(other))

    def __radd__(self, other: ExprLike) -> Expr:
        return Arith("+", lift(other), self)

    def __sub__(self, other: ExprLike) -> Expr:
        return Arith("-", self, lift(other))

    def __mul__(self, other: ExprLike) -> Expr:
        return Arith("*", self, lift(other))

    def __rmul__(self, other: ExprLike) -> Expr:
        return Arith("*", lift(other), self)

    def __rsub__(self, other: ExprLike) -> Expr:
        return Arith("-", lift(other), self)

    def __floordiv__(self, other: ExprLike) -> Expr:
        return Arith("//", self, lift(other))

    def __rfloordiv__(self, other: ExprLike) -> Expr:
        return Arith("//", lift(other), self)

    def __mod__(self, other: ExprLike) -> Expr:
        return Arith("%", self, lift(other))

    def __lt__(self, other: ExprLike) -> Expr:  # type: ignore[override]
        return Cmp("<", self, lift(other))

    def __le__(self, other: ExprLike) -> Expr:  # type: ignore[override]
        return Cmp("<=", self, lift(other))

    def __gt__(self, other: ExprLike) -> Expr:  # type: ignore[override]
        return Cmp(">", self, lift(other))

    def __ge__(self, other: ExprLike) -> Expr:  # type: ignore[override]
        return Cmp(">=", self, lift(other))

    def eq(self, other: ExprLike) -> Expr:
        return Cmp("==", self, lift(other))

    def ne(self, other: ExprLike) -> Expr:
        return Cmp("!=", self, lift(other))

    def isin(self, values: Iterable[int]) -> Expr:
        return In((self,), frozenset((int(v),) for v in values))


ExprLike = Expr | int | bool


@dataclass(frozen=True, slots=True)
class Field(Expr):
    name: str


@dataclass(frozen=True, slots=True)
class Const(Expr):
    value: int


@dataclass(frozen=True, slots=True)
class Param(Expr):
    """A quantity of the convolution problem: a :class:`~ckspace.workloads.problem.ConvProblem` field
    (``N``, ``G``, ``C``, ``K``, ``Hi``, ``Y``, ``stride_h``, ``pad_w``, ``dil_d``, ``k_batch``,
    ``ndim``). Only :func:`bind` and :func:`evaluate` (given the value) read it; the CP-SAT
    compiler refuses an unbound one."""

    name: str


@dataclass(frozen=True, slots=True)
class Arith(Expr):
    """``left op right`` for op in ``+ - * // %`` and the functions ``min`` and ``gcd``."""

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
FALSE = Const(0)

NEGATED: dict[str, str] = {"<": ">=", "<=": ">", ">": "<=", ">=": "<", "==": "!=", "!=": "=="}
"""The comparison that holds exactly when the key does not."""


def minimum(left: ExprLike, right: ExprLike) -> Expr:
    return Arith("min", lift(left), lift(right))


def gcd(left: ExprLike, right: ExprLike) -> Expr:
    return Arith("gcd", lift(left), lift(right))


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


def fields_of(*exprs: Expr) -> tuple[str, ...]:
    """The config fields ``exprs`` read, sorted: what a rule's blame message shows (of several
    expressions at once, a node they share is walked once)."""
    return tuple(sorted({node.name for node in _nodes(*exprs) if isinstance(node, Field)}))


ARITH: dict[str, Callable[[Any, Any], Any]] = {
    "+": np.add,
    "-": np.subtract,
    "*": np.multiply,
    "//": lambda a, b: np.floor_divide(a, np.maximum(b, 1)),
    "%": lambda a, b: np.mod(a, np.maximum(b, 1)),
    "min": np.minimum,
    "gcd": np.gcd,
}
"""Each arithmetic operator on numpy columns: a divisor below 1 counts as 1, as in
:data:`FOLD_ARITH`, the CP-SAT compiler and the C backend."""
CMP: dict[str, Callable[[Any, Any], Any]] = {
    "<": np.less,
    "<=": np.less_equal,
    ">": np.greater,
    ">=": np.greater_equal,
    "==": np.equal,
    "!=": np.not_equal,
}


def params_of(expr: Expr) -> tuple[str, ...]:
    """The problem quantities ``expr`` reads, sorted."""
    return tuple(sorted({node.name for node in _nodes(expr) if isinstance(node, Param)}))


def _nodes(*exprs: Expr):
    """Every node of ``exprs`` once: rules share subexpressions (the same objects), which a walk of the
    tree would visit once per use."""
    stack = list(exprs)
    seen: set[int] = set()
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        yield node
        if isinstance(node, (Arith, Cmp)):
            stack += [node.left, node.right]
        elif isinstance(node, In):
            stack += list(node.items)
        elif isinstance(node, Lookup):
            stack.append(node.key)
        elif isinstance(node, (And, Or)):
            stack += list(node.parts)
        elif isinstance(node, Not):
            stack.append(node.part)


FOLD_ARITH: dict[str, Callable[[int, int], int]] = {
    "+": lambda a, b: a + b,
    "-": lambda a, b: a - b,
    "*": lambda a, b: a * b,
    "//": lambda a, b: a // max(b, 1),
    "%": lambda a, b: a % max(b, 1),
    "min": min,
    "gcd": math.gcd,
}
FOLD_CMP: dict[str, Callable[[int, int], bool]] = {
    "<": lambda a, b: a < b,
    "<=": lambda a, b: a <= b,
    ">": lambda a, b: a > b,
    ">=": lambda a, b: a >= b,
    "==": lambda a, b: a == b,
    "!=": lambda a, b: a != b,
}
""":data:`ARITH` and :data:`CMP` on Python integers: what folding a constant part computes."""


def bind(expr: Expr, values: Mapping[str, int]) -> Expr:
    """``expr`` with every :class:`Param` replaced by its value in ``values`` and every part that no
    longer reads a config field folded to a constant (with the same arithmetic as
    :func:`evaluate`). A conjunction with a false part is false, a disjunction with a true part
    true, neutral constants are dropped; what is left reads config fields only."""
    if isinstance(expr, Param):
        return Const(int(values[expr.name]))
    if isinstance(expr, (Field, Const)):
        return expr
    if isinstance(expr, Arith):
        left, right = bind(expr.left, values), bind(expr.right, values)
        if isinstance(left, Const) and isinstance(right, Const):
            return Const(FOLD_ARITH[expr.op](left.value, right.value))
        return Arith(expr.op, left, right)
    if isinstance(expr, Cmp):
        left, right = bind(expr.left, values), bind(expr.right, values)
        if isinstance(left, Const) and isinstance(right, Const):
            return Const(int(FOLD_CMP[expr.op](left.value, right.value)))
        return Cmp(expr.op, left, right)
    if isinstance(expr, In):
        items = tuple(bind(item, values) for item in expr.items)
        if all(isinstance(item, Const) for item in items):
            return Const(int(tuple(item.value for item in items) in expr.table))  # type: ignore[attr-defined]
        return In(items, expr.table)
    if isinstance(expr, Lookup):
        key = bind(expr.key, values)
        if isinstance(key, Const):
            return Const(dict(expr.mapping).get(key.value, expr.default))
        return Lookup(key, expr.mapping, expr.default)
    if isinstance(expr, Not):
        part = bind(expr.part, values)
        return Const(int(not part.value)) if isinstance(part, Const) else Not(part)
    if isinstance(expr, (And, Or)):
        absorbing = 0 if isinstance(expr, And) else 1
        parts = []
        for part in (bind(p, values) for p in expr.parts):
            if isinstance(part, Const):
                if bool(part.value) == bool(absorbing):
                    return Const(absorbing)
                continue
            parts.append(part)
        if not parts:
            return Const(1 - absorbing)
        return parts[0] if len(parts) == 1 else type(expr)(tuple(parts))
    raise TypeError(f"not an expression node: {expr!r}")


def evaluate(expr: Expr, cols: Columns, memo: dict[int, Any] | None = None) -> np.ndarray:
    """Evaluate ``expr`` on equally long int64 columns; booleans come back as bool arrays.

    Division and modulo treat a divisor below 1 as 1 (the CP-SAT compiler does the same), so an
    expression is total; rules that can meet such a divisor guard against it explicitly.

    ``memo`` (a dict the caller keeps for one set of columns, with the expressions alive) holds each
    node's value by identity: the rules of a cell share subexpressions (the CK rules' load and store
    patterns repeat the same products), which are then evaluated once for all of them. Values are
    never changed in place, so sharing them is safe.
    """
    if memo is None:
        return _evaluate(expr, cols, None)
    found = memo.get(id(expr))
    if found is None:
        found = memo[id(expr)] = _evaluate(expr, cols, memo)
    return found


def _evaluate(expr: Expr, cols: Columns, memo: dict[int, Any] | None) -> np.ndarray:
    if isinstance(expr, (Field, Param)):
        return cols[expr.name]
    if isinstance(expr, Const):
        return np.int64(expr.value)
    if isinstance(expr, Arith):
        return ARITH[expr.op](evaluate(expr.left, cols, memo), evaluate(expr.right, cols, memo))
    if isinstance(expr, Cmp):
        return CMP[expr.op](evaluate(expr.left, cols, memo), evaluate(expr.right, cols, memo))
    if isinstance(expr, In):
        values = [evaluate(item, cols, memo) for item in expr.items]
        hit = np.zeros(np.broadcast(*values).shape, dtype=bool)
        for row in expr.table:
            match = np.ones_like(hit)
            for value, want in zip(values, row, strict=True):
                match &= value == want
            hit |= match
        return hit
    if isinstance(expr, Lookup):
        key = evaluate(expr.key, cols, memo)
        out = np.full(np.shape(key), expr.default, dtype=np.int64)
        for k, v in expr.mapping:
            out = np.where(key == k, v, out)
        return out
    if isinstance(expr, And):
        result = np.bool_(True)
        for part in expr.parts:
            result = result & evaluate(part, cols, memo)
        return result
    if isinstance(expr, Or):
        result = np.bool_(False)
        for part in expr.parts:
            result = result | evaluate(part, cols, memo)
        return result
    if isinstance(expr, Not):
        return ~np.asarray(evaluate(expr.part, cols, memo), dtype=bool)
    raise TypeError(f"not an expression node: {expr!r}")
