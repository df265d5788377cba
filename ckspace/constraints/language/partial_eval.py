"""Partial evaluation of rule expressions: the Python backend of :mod:`ckspace.constraints.language.expr` for
the checks a kernel makes on a problem.

A problem check reads problem quantities (:class:`~ckspace.constraints.language.expr.Param`) and config
fields. The selector asks it of one problem and many configs, problem after problem, so rather than
binding each problem into a new tree (:func:`~ckspace.constraints.language.expr.bind`) and walking it, the
tree is compiled once into nested closures: the parts over problem quantities compute with Python
integers, the rest with numpy on config columns, with the operators' tables of
:mod:`ckspace.constraints.language.expr` (so the conventions are the evaluator's). A backend beside CP-SAT
(:mod:`ckspace.constraints.evaluators.cpsat`) and C (:mod:`ckspace.constraints.language.cexpr`); tests make all of
them agree.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np

from ckspace.constraints.language.expr import (
    ARITH,
    CMP,
    FOLD_ARITH,
    FOLD_CMP,
    And,
    Arith,
    Cmp,
    Columns,
    Const,
    Expr,
    Field,
    Not,
    Or,
    Param,
    bind,
    evaluate,
    fields_of,
)

Partial = Callable[[Mapping[str, int], Columns], object]


def partial(expr: Expr) -> Partial:
    """``expr`` as a Python function of (problem values, config columns) that returns what
    ``evaluate(bind(expr, values), cols)`` returns, a Python number where the result reads no config
    field: the parts over :class:`Param` s are computed with Python integers, the rest with numpy.
    The selector calls this per problem; it does no tree walking at call time."""
    function, _ = _partial(expr)
    return function


def _partial(node: Expr) -> tuple[Partial, bool]:
    """(function, whether it reads config fields)."""
    if isinstance(node, Param):
        name = node.name
        return (lambda v, c: v[name]), False
    if isinstance(node, Const):
        value = node.value
        return (lambda v, c: value), False
    if isinstance(node, Field):
        name = node.name
        return (lambda v, c: c[name]), True
    if isinstance(node, (Arith, Cmp)):
        (left, lc), (right, rc) = _partial(node.left), _partial(node.right)
        if not (lc or rc):
            fold = FOLD_ARITH[node.op] if isinstance(node, Arith) else FOLD_CMP[node.op]
            if isinstance(node, Cmp):
                return (lambda v, c: int(fold(left(v, c), right(v, c)))), False
            return (lambda v, c: fold(left(v, c), right(v, c))), False
        ufunc = ARITH[node.op] if isinstance(node, Arith) else CMP[node.op]
        return (lambda v, c: ufunc(left(v, c), right(v, c))), True
    if isinstance(node, (And, Or)):
        parts = [_partial(p) for p in node.parts]
        fixed = [f for f, reads in parts if not reads]
        varying = [f for f, reads in parts if reads]
        absorbing = isinstance(node, Or)
        combine = np.logical_or if absorbing else np.logical_and

        def function(v, c):
            for f in fixed:
                if bool(f(v, c)) == absorbing:
                    return int(absorbing)
            if not varying:
                return int(not absorbing)
            out = varying[0](v, c)
            for f in varying[1:]:
                out = combine(out, f(v, c))
            return out

        return function, bool(varying)
    if isinstance(node, Not):
        part, reads = _partial(node.part)
        if not reads:
            return (lambda v, c: int(not part(v, c))), False
        return (lambda v, c: ~np.asarray(part(v, c), dtype=bool)), True
    # In and Lookup: rare in problem checks; bind, then evaluate
    reads = bool(fields_of(node))
    return (lambda v, c: evaluate(bind(node, v), c)), reads
