"""Real-valued formulas over a problem and a kernel config: how the selector's features are stated.

A feature is written once as a :class:`Formula` tree whose leaves are problem quantities
(:func:`problem`: the fields of :class:`~ckspace.workloads.problem.ConvProblem`), config columns
(:func:`config`: the columns of :class:`~ckspace.features.matrix.ConfigTable`) and numbers. The same
trees are

* evaluated in Python by a :class:`Program` (problem-only parts as floats, once per problem; parts
  that read the config as numpy columns over all candidates at once), which is what
  :func:`~ckspace.features.matrix.feature_matrix` does;
* rendered to C by :mod:`ckspace.features.c_source` for the generated dispatcher.

Every operation is IEEE double arithmetic in both (``math``/libm for scalars, numpy for columns),
in the same order, so the two agree to the last bits but for the last ulp of a logarithm.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np


class Formula:
    """Base node; arithmetic operators build new nodes."""

    __slots__ = ()

    def __add__(self, other: FormulaLike) -> Formula:
        return Op("+", (self, lift(other)))

    def __radd__(self, other: FormulaLike) -> Formula:
        return Op("+", (lift(other), self))

    def __sub__(self, other: FormulaLike) -> Formula:
        return Op("-", (self, lift(other)))

    def __rsub__(self, other: FormulaLike) -> Formula:
        return Op("-", (lift(other), self))

    def __mul__(self, other: FormulaLike) -> Formula:
        return Op("*", (self, lift(other)))

    def __rmul__(self, other: FormulaLike) -> Formula:
        return Op("*", (lift(other), self))

    def __truediv__(self, other: FormulaLike) -> Formula:
        return Op("/", (self, lift(other)))

    def __rtruediv__(self, other: FormulaLike) -> Formula:
        return Op("/", (lift(other), self))


FormulaLike = Formula | int | float


@dataclass(frozen=True, slots=True)
class Var(Formula):
    """A leaf: ``source`` is ``problem`` or ``config``."""

    source: str
    name: str


@dataclass(frozen=True, slots=True)
class Num(Formula):
    value: float


@dataclass(frozen=True, slots=True)
class Op(Formula):
    """``op`` applied to ``args``: ``+ - * /`` (two arguments), ``min``/``max`` (two), ``log2``,
    ``ceil``, ``floor`` (one). Its hash is computed once, when it is built: the features share
    subtrees, and a hash recomputed down the tree at every lookup made hashing most of the time
    spent generating the features' C and programs."""

    op: str
    args: tuple[Formula, ...]
    _hash: int = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_hash", hash((self.op, self.args)))

    def __hash__(self) -> int:
        return self._hash

    def __reduce__(self) -> tuple:
        """Pickled without the hash: a string's hash differs between processes, so an unpickled
        node hashes anew where it lands."""
        return (Op, (self.op, self.args))


def lift(value: FormulaLike) -> Formula:
    return value if isinstance(value, Formula) else Num(float(value))


def problem(name: str) -> Formula:
    return Var("problem", name)


def config(name: str) -> Formula:
    return Var("config", name)


def log2(x: Formula) -> Formula:
    return Op("log2", (x,))


def ceil(x: Formula) -> Formula:
    return Op("ceil", (x,))


def floor(x: Formula) -> Formula:
    return Op("floor", (x,))


def minimum(a: FormulaLike, b: FormulaLike) -> Formula:
    return Op("min", (lift(a), lift(b)))


def maximum(a: FormulaLike, b: FormulaLike) -> Formula:
    return Op("max", (lift(a), lift(b)))


SCALAR_OPS = {
    "+": lambda a, b: a + b,
    "-": lambda a, b: a - b,
    "*": lambda a, b: a * b,
    "/": lambda a, b: a / b,
    "min": min,
    "max": max,
    "log2": math.log2,
    "ceil": lambda a: float(math.ceil(a)),
    "floor": lambda a: float(math.floor(a)),
}
COLUMN_OPS = {
    "+": np.add,
    "-": np.subtract,
    "*": np.multiply,
    "/": np.divide,
    "min": np.minimum,
    "max": np.maximum,
    "log2": np.log2,
    "ceil": np.ceil,
    "floor": np.floor,
}


def reads_config(node: Formula, memo: dict[Formula, bool] | None = None) -> bool:
    """Whether ``node`` depends on a config column (else it is one number per problem)."""
    memo = {} if memo is None else memo
    if node not in memo:
        if isinstance(node, Var):
            memo[node] = node.source == "config"
        elif isinstance(node, Op):
            memo[node] = any(reads_config(a, memo) for a in node.args)
        else:
            memo[node] = False
    return memo[node]


def topological(outputs: Sequence[Formula]) -> list[Formula]:
    """Every distinct node under ``outputs``, each after its arguments."""
    order: list[Formula] = []
    seen: set[Formula] = set()
    for root in outputs:
        stack: list[tuple[Formula, bool]] = [(root, False)]
        while stack:
            node, expanded = stack.pop()
            if node in seen:
                continue
            if expanded or not isinstance(node, Op):
                seen.add(node)
                order.append(node)
                continue
            stack.append((node, True))
            stack.extend((arg, False) for arg in reversed(node.args) if arg not in seen)
    return order


class Program:
    """Formulas compiled into one straight-line evaluation: problem-only nodes first, as Python
    floats, then the nodes that read config columns, as numpy operations over every candidate."""

    def __init__(self, outputs: Sequence[Formula]) -> None:
        self.outputs = tuple(outputs)
        memo: dict[Formula, bool] = {}
        nodes = topological(self.outputs)
        index = {node: i for i, node in enumerate(nodes)}
        self.size = len(nodes)
        self._consts = [(index[n], n.value) for n in nodes if isinstance(n, Num)]
        self._problem = [(index[n], n.name) for n in nodes if isinstance(n, Var) and n.source == "problem"]
        self._config = [(index[n], n.name) for n in nodes if isinstance(n, Var) and n.source == "config"]
        ops = [n for n in nodes if isinstance(n, Op)]
        scalar = [n for n in ops if not reads_config(n, memo)]
        self._scalar = [(index[n], SCALAR_OPS[n.op], tuple(index[a] for a in n.args)) for n in scalar]
        self._scalar_numpy = [(index[n], COLUMN_OPS[n.op], tuple(index[a] for a in n.args)) for n in scalar]
        self._column = [
            (index[n], COLUMN_OPS[n.op], tuple(index[a] for a in n.args)) for n in ops if reads_config(n, memo)
        ]
        self._out = [index[n] for n in self.outputs]

    def __call__(self, values: Mapping[str, float], columns: Mapping[str, np.ndarray]) -> list:
        """The outputs for one problem (``values``) and candidate columns: floats for the outputs
        that read the problem only, arrays for the others."""
        slot = self._run(lambda name: float(values[name]), self._scalar, columns)
        return [slot[i] for i in self._out]

    def over_problems(self, values: Mapping[str, np.ndarray], columns: Mapping[str, np.ndarray]) -> list[np.ndarray]:
        """The outputs for many problems at once (``values[name]``: one entry per problem), every
        node a numpy operation over (problems, candidates): (P, n) arrays, each row what
        :meth:`__call__` gives that problem (to the bit, where the problem-only operations' numpy
        and Python forms round alike). For studies that score one cell's problems many times (a
        constant searched, a grid of constants); selection scores one problem and keeps
        :meth:`__call__`."""
        problems = len(next(iter(values.values())))
        candidates = len(next(iter(columns.values())))
        rows = {name: column[None, :] for name, column in columns.items()}
        slot = self._run(lambda name: np.asarray(values[name], dtype=np.float64)[:, None], self._scalar_numpy, rows)
        return [np.broadcast_to(slot[i], (problems, candidates)) for i in self._out]

    def _run(self, problem_value, scalar: list, columns: Mapping[str, np.ndarray]) -> list:
        """Every node's value in topological order: the problem's quantities as ``problem_value``
        gives them, the problem-only operations by ``scalar`` (Python's or numpy's forms), then
        the config columns and the operations that read them."""
        slot: list = [0.0] * self.size
        for i, value in self._consts:
            slot[i] = value
        for i, name in self._problem:
            slot[i] = problem_value(name)
        for i, fn, args in scalar:
            slot[i] = fn(*[slot[a] for a in args])
        for i, name in self._config:
            slot[i] = columns[name]
        for i, fn, args in self._column:
            slot[i] = fn(*[slot[a] for a in args])
        return slot
