"""Rule expressions rendered to C, for the generated dispatcher's ``ckspace_is_supported``.

The third backend of :mod:`ckspace.constraints.language.expr`, beside CP-SAT and numpy: an expression
becomes one C expression over ``int64_t`` values, config fields and problem
:class:`~ckspace.constraints.language.expr.Param` s named by the caller. Division and modulo go through
helpers with :func:`~ckspace.constraints.language.expr.evaluate`'s conventions (a divisor below 1 counts as
1, the quotient rounds down), so the C agrees with the Python backends for every input; tests
compare them on drawn configs and problems.
"""

from __future__ import annotations

from collections.abc import Callable

from ckspace.constraints.language.expr import And, Arith, Cmp, Const, Expr, Field, In, Lookup, Not, Or, Param

C_HELPERS = """\
static inline int64_t cks_clamp1(int64_t b) { return b < 1 ? 1 : b; }
static inline int64_t cks_floordiv(int64_t a, int64_t b) {
  int64_t d = cks_clamp1(b), q = a / d;
  return (a % d != 0 && (a < 0)) ? q - 1 : q;
}
static inline int64_t cks_mod(int64_t a, int64_t b) { return a - cks_floordiv(a, b) * cks_clamp1(b); }
static inline int64_t cks_min(int64_t a, int64_t b) { return a < b ? a : b; }
static inline int64_t cks_gcd(int64_t a, int64_t b) {
  if (a < 0) a = -a;
  if (b < 0) b = -b;
  while (b != 0) { int64_t t = a % b; a = b; b = t; }
  return a;
}
"""
"""The helpers rendered expressions call; emitted once before them."""

_INFIX = {"+": "+", "-": "-", "*": "*"}
_CALL = {"//": "cks_floordiv", "%": "cks_mod", "min": "cks_min", "gcd": "cks_gcd"}


def to_c(expr: Expr, field: Callable[[str], str], param: Callable[[str], str]) -> str:
    """``expr`` as a C expression (an ``int64_t`` for arithmetic, 0/1 for a truth value);
    ``field(name)`` and ``param(name)`` give the C that reads a config field or a problem value."""

    def go(node: Expr) -> str:
        if isinstance(node, Field):
            return f"(int64_t)({field(node.name)})"
        if isinstance(node, Param):
            return f"(int64_t)({param(node.name)})"
        if isinstance(node, Const):
            return f"INT64_C({node.value})"
        if isinstance(node, Arith):
            if node.op in _INFIX:
                return f"({go(node.left)} {_INFIX[node.op]} {go(node.right)})"
            return f"{_CALL[node.op]}({go(node.left)}, {go(node.right)})"
        if isinstance(node, Cmp):
            return f"({go(node.left)} {node.op} {go(node.right)})"
        if isinstance(node, In):
            items = [go(item) for item in node.items]
            rows = [
                " && ".join(f"{item} == INT64_C({value})" for item, value in zip(items, row, strict=True))
                for row in sorted(node.table)
            ]
            return "(" + " || ".join(f"({row})" for row in rows) + ")" if rows else "0"
        if isinstance(node, Lookup):
            key = go(node.key)
            out = f"INT64_C({node.default})"
            for k, v in reversed(node.mapping):
                out = f"({key} == INT64_C({k}) ? INT64_C({v}) : {out})"
            return out
        if isinstance(node, And):
            return "(" + " && ".join(go(p) for p in node.parts) + ")"
        if isinstance(node, Or):
            return "(" + " || ".join(go(p) for p in node.parts) + ")"
        if isinstance(node, Not):
            return f"(!{go(node.part)})"
        raise TypeError(f"not an expression node: {node!r}")

    return go(expr)
