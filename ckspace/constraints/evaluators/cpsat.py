"""Compile rule expressions (:mod:`ckspace.constraints.language.expr`) into an OR-Tools CP-SAT model.

Integer nodes become linear expressions, with auxiliary variables for products, divisions,
remainders and table lookups; boolean nodes are either *enforced* under a list of enforcement
literals (the usual case: a rule holds when its literal is true) or *reified* into a literal when
they sit under ``Or``/``Not``. Bounds are tracked by interval arithmetic so auxiliary variables get
tight domains. Compiled sub-expressions are memoised: rules sharing a product share its variable.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ortools.sat.python import cp_model

from ckspace.constraints.language.expr import NEGATED, And, Arith, Cmp, Const, Expr, Field, In, Lookup, Not, Or


@dataclass(frozen=True)
class Lin:
    """A compiled integer node: a linear expression and its value bounds."""

    expr: cp_model.LinearExprT
    lo: int
    hi: int


def _post(model: cp_model.CpModel, left: Lin, op: str, right: Lin) -> cp_model.Constraint:
    a, b = left.expr, right.expr
    if op == "<":
        return model.add(a < b)
    if op == "<=":
        return model.add(a <= b)
    if op == ">":
        return model.add(a > b)
    if op == ">=":
        return model.add(a >= b)
    if op == "==":
        return model.add(a == b)
    return model.add(a != b)


class Compiler:
    """Adds expressions to ``model`` over the given field variables."""

    def __init__(
        self, model: cp_model.CpModel, fields: Mapping[str, cp_model.IntVar], bounds: Mapping[str, tuple[int, int]]
    ) -> None:
        self.model = model
        self.fields = fields
        self.bounds = bounds
        self._lin: dict[Expr, Lin] = {}
        self._lit: dict[Expr, cp_model.IntVar] = {}
        self._aux = 0

    # -- integers -------------------------------------------------------------------------------
    def linear(self, node: Expr) -> Lin:
        cached = self._lin.get(node)
        if cached is None:
            cached = self._lin[node] = self._linear(node)
        return cached

    def _var(self, lo: int, hi: int, hint: str) -> cp_model.IntVar:
        self._aux += 1
        return self.model.new_int_var(lo, hi, f"_{hint}{self._aux}")

    def _as_var(self, lin: Lin) -> cp_model.IntVar:
        if isinstance(lin.expr, cp_model.IntVar):
            return lin.expr
        var = self._var(lin.lo, lin.hi, "x")
        self.model.add(var == lin.expr)
        return var

    def _linear(self, node: Expr) -> Lin:
        if isinstance(node, Field):
            lo, hi = self.bounds[node.name]
            return Lin(self.fields[node.name], lo, hi)
        if isinstance(node, Const):
            return Lin(node.value, node.value, node.value)
        if isinstance(node, Lookup):
            key = self.linear(node.key)
            values = [dict(node.mapping).get(k, node.default) for k in range(key.hi + 1)]
            if key.lo < 0:
                raise ValueError(f"lookup key can be negative: {node.key!r}")
            target = self._var(min(values), max(values), "lookup")
            self.model.add_element(self._as_var(key), values, target)
            return Lin(target, min(values), max(values))
        if isinstance(node, Arith):
            left, right = self.linear(node.left), self.linear(node.right)
            if node.op == "+":
                return Lin(left.expr + right.expr, left.lo + right.lo, left.hi + right.hi)
            if node.op == "-":
                return Lin(left.expr - right.expr, left.lo - right.hi, left.hi - right.lo)
            if node.op == "min":
                target = self._var(min(left.lo, right.lo), min(left.hi, right.hi), "min")
                self.model.add_min_equality(target, [left.expr, right.expr])
                return Lin(target, min(left.lo, right.lo), min(left.hi, right.hi))
            if node.op == "gcd":
                raise TypeError(f"gcd of config fields has no CP-SAT form; bind the problem first: {node!r}")
            corners = [a * b for a in (left.lo, left.hi) for b in (right.lo, right.hi)]
            if node.op == "*":
                if isinstance(right.expr, int) or isinstance(left.expr, int):
                    return Lin(left.expr * right.expr, min(corners), max(corners))
                target = self._var(min(corners), max(corners), "mul")
                self.model.add_multiplication_equality(target, [left.expr, right.expr])
                return Lin(target, min(corners), max(corners))
            if right.lo < 1:  # same convention as expr.evaluate: a divisor below 1 counts as 1
                clamped = self._var(1, max(1, right.hi), "clamp")
                self.model.add_max_equality(clamped, [right.expr, 1])
                right = Lin(clamped, 1, max(1, right.hi))
            if not isinstance(right.expr, int):
                # CP-SAT refuses a divisor of several terms when one of them may be 0, even if their
                # sum cannot be (a + lookup with a >= 0, lookup >= 1): divide by one variable instead
                right = Lin(self._as_var(right), right.lo, right.hi)
            if left.lo < 0:
                raise ValueError(f"dividend may be negative: {node.left!r}")
            if node.op == "//":
                lo, hi = left.lo // right.hi, left.hi // right.lo
                target = self._var(lo, hi, "div")
                self.model.add_division_equality(target, left.expr, right.expr)
                return Lin(target, lo, hi)
            if node.op == "%":
                hi = min(left.hi, right.hi - 1)
                target = self._var(0, hi, "mod")
                self.model.add_modulo_equality(target, left.expr, right.expr)
                return Lin(target, 0, hi)
        if isinstance(node, (Cmp, In, And, Or, Not)):
            return Lin(self.reify(node), 0, 1)  # a truth value used as the integer 0 or 1
        raise TypeError(f"not an integer expression: {node!r}")

    # -- booleans -------------------------------------------------------------------------------
    def enforce(self, node: Expr, lits: Sequence[cp_model.IntVar]) -> None:
        """Add ``node`` so that it must hold whenever every literal in ``lits`` is true."""
        if isinstance(node, Const):
            if not node.value:
                self.model.add_bool_or([lit.negated() for lit in lits])
            return
        if isinstance(node, And):
            for part in node.parts:
                self.enforce(part, lits)
            return
        if isinstance(node, Cmp):
            _post(self.model, self.linear(node.left), node.op, self.linear(node.right)).only_enforce_if(lits)
            return
        if isinstance(node, In):
            items = [self._as_var(self.linear(i)) for i in node.items]
            self.model.add_allowed_assignments(items, sorted(node.table)).only_enforce_if(lits)
            return
        if isinstance(node, Not) and isinstance(node.part, In):
            items = [self._as_var(self.linear(i)) for i in node.part.items]
            self.model.add_forbidden_assignments(items, sorted(node.part.table)).only_enforce_if(lits)
            return
        if isinstance(node, Or):
            self.model.add_bool_or([self.reify(p) for p in node.parts]).only_enforce_if(lits)
            return
        if isinstance(node, Not):
            self.model.add_bool_and([self.reify(node.part).negated()]).only_enforce_if(lits)
            return
        raise TypeError(f"not a boolean expression: {node!r}")

    def reify(self, node: Expr) -> cp_model.IntVar:
        """A literal equivalent to ``node``."""
        cached = self._lit.get(node)
        if cached is None:
            cached = self._lit[node] = self._reify(node)
        return cached

    def _reify(self, node: Expr) -> cp_model.IntVar:
        lit = self.model.new_bool_var(f"_b{len(self._lit)}")
        if isinstance(node, Const):
            self.model.add(lit == (1 if node.value else 0))
        elif isinstance(node, Cmp):
            left, right = self.linear(node.left), self.linear(node.right)
            _post(self.model, left, node.op, right).only_enforce_if(lit)
            _post(self.model, left, NEGATED[node.op], right).only_enforce_if(lit.negated())
        elif isinstance(node, Not):
            self.model.add(lit + self.reify(node.part) == 1)
        elif isinstance(node, (And, Or)):
            parts = [self.reify(p) for p in node.parts]
            if isinstance(node, And):
                self.model.add_bool_and(parts).only_enforce_if(lit)
                self.model.add_bool_or([p.negated() for p in parts]).only_enforce_if(lit.negated())
            else:
                self.model.add_bool_or(parts).only_enforce_if(lit)
                self.model.add_bool_and([p.negated() for p in parts]).only_enforce_if(lit.negated())
        elif isinstance(node, In):
            items = [self._as_var(self.linear(i)) for i in node.items]
            self.model.add_allowed_assignments(items, sorted(node.table)).only_enforce_if(lit)
            self.model.add_forbidden_assignments(items, sorted(node.table)).only_enforce_if(lit.negated())
        else:
            raise TypeError(f"not a boolean expression: {node!r}")
        return lit
