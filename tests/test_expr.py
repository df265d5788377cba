"""The rule expression language and its Python backends against plain Python arithmetic.

Expressions are drawn as recipes (nested tuples); each recipe is built into an
:class:`~ckspace.constraints.language.expr.Expr` through the operators and helpers the rule modules use,
and computed directly with Python integers (:func:`value`), an independent statement of what
every node means: ``//`` and ``%`` count a divisor below 1 as 1, truth values are 0 and 1. The
numpy evaluation, :func:`bind` followed by evaluation, :func:`partial` and CP-SAT must all agree
with it on every drawn assignment.
"""

from __future__ import annotations

import math
import subprocess

import numpy as np
import pytest
from conftest import c_compiler
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from ckspace.constraints.evaluators.model import CellModel
from ckspace.constraints.language.cexpr import C_HELPERS, to_c
from ckspace.constraints.language.expr import (
    And,
    Const,
    Expr,
    Field,
    Not,
    Or,
    Param,
    all_of,
    any_of,
    bind,
    evaluate,
    fields_of,
    gcd,
    implies,
    in_table,
    lookup,
    minimum,
    params_of,
)
from ckspace.constraints.language.partial_eval import partial
from ckspace.constraints.language.rule import Rule
from ckspace.core.vocab import Predicate

FIELDS = ("a", "b", "c")
PARAMS = ("P", "Q")
BOUNDS = dict.fromkeys(FIELDS, (0, 9))
TABLE = {0: 3, 2: 7, 5: 1, 9: 4}


def _leaf(names: tuple[str, ...], kind: str) -> st.SearchStrategy:
    return st.sampled_from(names).map(lambda n: (kind, n))


NONNEG_LEAVES = st.one_of(_leaf(FIELDS, "field"), _leaf(PARAMS, "param"), st.integers(0, 7).map(lambda v: ("const", v)))


def _nonneg(children: st.SearchStrategy) -> st.SearchStrategy:
    """Integer recipes whose value is never negative (the dividends CP-SAT accepts)."""
    return st.one_of(
        st.tuples(st.sampled_from(["+", "*", "//", "%", "min"]), children, children),
        st.tuples(st.sampled_from(["r+", "r*", "r//"]), st.integers(0, 12), children),
        st.tuples(st.just("lookup"), st.sampled_from(FIELDS)),
        st.tuples(st.just("gcd"), _leaf(PARAMS, "param"), st.one_of(_leaf(PARAMS, "param"), st.integers(0, 6))),
    )


NONNEG = st.recursive(NONNEG_LEAVES, _nonneg, max_leaves=6)
INTEGER = st.one_of(
    NONNEG, st.tuples(st.just("-"), NONNEG, NONNEG), st.tuples(st.just("r-"), st.integers(0, 12), NONNEG)
)


def _boolean(children: st.SearchStrategy) -> st.SearchStrategy:
    return st.one_of(
        st.tuples(st.just("not"), children),
        st.tuples(st.sampled_from(["all", "any"]), st.lists(children, min_size=1, max_size=3).map(tuple)),
        st.tuples(st.just("implies"), children, children),
    )


COMPARISONS = st.one_of(
    st.tuples(st.sampled_from(["<", "<=", ">", ">=", "eq", "ne"]), INTEGER, INTEGER),
    st.tuples(st.sampled_from(["<", "<=", ">", ">="]), INTEGER, st.integers(-3, 12)),
    st.tuples(st.just("isin"), INTEGER, st.frozensets(st.integers(0, 12), max_size=4)),
    st.tuples(st.just("table"), st.frozensets(st.tuples(st.integers(0, 9), st.integers(0, 9)), max_size=6)),
)
BOOLEAN = st.recursive(COMPARISONS, _boolean, max_leaves=5)
TRUTH_AS_INTEGER = st.tuples(st.just("+"), BOOLEAN, NONNEG)


def build(recipe) -> Expr:
    """The recipe as an expression, through the same operators and helpers the rules use."""
    op, *args = recipe
    if op == "field":
        return Field(args[0])
    if op == "param":
        return Param(args[0])
    if op == "const":
        return Const(args[0])
    if op in ("+", "-", "*", "//", "%"):
        left, right = build(args[0]), build(args[1])
        return {"+": left + right, "-": left - right, "*": left * right, "//": left // right, "%": left % right}[op]
    if op in ("r+", "r-", "r*", "r//"):
        number, right = args[0], build(args[1])
        return {"r+": number + right, "r-": number - right, "r*": number * right, "r//": number // right}[op]
    if op == "min":
        return minimum(build(args[0]), build(args[1]))
    if op == "gcd":
        right = args[1] if isinstance(args[1], int) else build(args[1])
        return gcd(build(args[0]), right)
    if op == "lookup":
        return lookup(Field(args[0]), TABLE, default=2)
    if op in ("<", "<=", ">", ">="):
        left, right = build(args[0]), args[1] if isinstance(args[1], int) else build(args[1])
        return {"<": left < right, "<=": left <= right, ">": left > right, ">=": left >= right}[op]
    if op == "eq":
        return build(args[0]).eq(build(args[1]))
    if op == "ne":
        return build(args[0]).ne(build(args[1]))
    if op == "isin":
        return build(args[0]).isin(args[1])
    if op == "table":
        return in_table((Field("a"), Field("b")), args[0])
    if op == "not":
        return Not(build(args[0]))
    if op == "all":
        return all_of(*(build(p) for p in args[0]))
    if op == "any":
        return any_of(*(build(p) for p in args[0]))
    if op == "implies":
        return implies(build(args[0]), build(args[1]))
    raise AssertionError(op)


def value(recipe, env: dict[str, int]) -> int:
    """The recipe computed with Python integers."""
    op, *args = recipe
    if op in ("field", "param"):
        return env[args[0]]
    if op == "const":
        return args[0]
    if op == "lookup":
        return TABLE.get(env[args[0]], 2)
    if op == "table":
        return int((env["a"], env["b"]) in args[0])
    if op == "all":
        return int(all(value(p, env) for p in args[0]))
    if op == "any":
        return int(any(value(p, env) for p in args[0]))
    sub = [value(a, env) if isinstance(a, tuple) else a for a in args]
    if op in ("+", "r+"):
        return int(sub[0]) + int(sub[1])
    if op in ("-", "r-"):
        return sub[0] - sub[1]
    if op in ("*", "r*"):
        return sub[0] * sub[1]
    if op in ("//", "r//"):
        return sub[0] // max(sub[1], 1)
    if op == "%":
        return sub[0] % max(sub[1], 1)
    if op == "min":
        return min(sub)
    if op == "gcd":
        return math.gcd(sub[0], sub[1])
    comparisons = {
        "<": lambda x, y: x < y,
        "<=": lambda x, y: x <= y,
        ">": lambda x, y: x > y,
        ">=": lambda x, y: x >= y,
        "eq": lambda x, y: x == y,
        "ne": lambda x, y: x != y,
    }
    if op in comparisons:
        return int(comparisons[op](sub[0], sub[1]))
    if op == "isin":
        return int(sub[0] in args[1])
    if op == "not":
        return int(not sub[0])
    if op == "implies":
        return int(not sub[0] or sub[1])
    raise AssertionError(op)


ENVS = st.lists(
    st.fixed_dictionaries({**{f: st.integers(0, 9) for f in FIELDS}, **{p: st.integers(0, 12) for p in PARAMS}}),
    min_size=1,
    max_size=6,
)


def _columns(envs: list[dict[str, int]], names: tuple[str, ...]) -> dict[str, np.ndarray]:
    return {name: np.array([env[name] for env in envs], dtype=np.int64) for name in names}


def _check_python_backends(recipe, envs) -> tuple[Expr, list[int]]:
    """Numpy over every drawn assignment at once; then, for each drawn problem (the parameters of
    one assignment), :func:`bind` and :func:`partial` over the config columns of all of them."""
    expr = build(recipe)
    expected = [value(recipe, env) for env in envs]
    got = np.broadcast_to(evaluate(expr, _columns(envs, FIELDS + PARAMS)), (len(envs),)).astype(np.int64)
    assert got.tolist() == expected, ("evaluate", recipe)
    assert set(fields_of(expr)) <= set(FIELDS) and set(params_of(expr)) <= set(PARAMS)
    check = partial(expr)
    cols = _columns(envs, FIELDS)
    for problem in envs:
        params = {p: problem[p] for p in PARAMS}
        want = [value(recipe, {**env, **params}) for env in envs]
        bound = bind(expr, params)
        assert not params_of(bound), ("bind leaves a parameter", recipe)
        assert np.broadcast_to(evaluate(bound, cols), (len(envs),)).astype(np.int64).tolist() == want, (
            "bind",
            recipe,
            params,
        )
        assert np.broadcast_to(check(params, cols), (len(envs),)).astype(np.int64).tolist() == want, (
            "partial",
            recipe,
            params,
        )
    return expr, expected


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(INTEGER, TRUTH_AS_INTEGER), ENVS)
@example(
    ("+", ("%", ("param", "P"), ("param", "Q")), ("//", ("param", "P"), ("param", "Q"))),
    [{"a": 0, "b": 0, "c": 0, "P": 5, "Q": 1}, {"a": 0, "b": 0, "c": 0, "P": 5, "Q": 0}],
)
def test_integer_expressions_compute_like_python(recipe, envs) -> None:
    """The example folds a remainder and a quotient of problem values by 1 and by 0 (counted as 1)."""
    _check_python_backends(recipe, envs)


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(BOOLEAN, ENVS)
def test_boolean_expressions_decide_like_python(recipe, envs) -> None:
    _check_python_backends(recipe, envs)


def _cpsat_holds(expr: Expr, env: dict[str, int]) -> bool:
    bound = bind(expr, {p: env[p] for p in PARAMS})
    model = CellModel(FIELDS, BOUNDS, [Rule("r", Predicate.PROBLEM, bound, "", "")], None)
    return model.feasible({f: env[f] for f in FIELDS}, enabled=["r"])


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(BOOLEAN, st.tuples(st.just("not"), BOOLEAN)), ENVS)
@example(
    ("<=", ("field", "a"), ("r//", 0, ("+", ("lookup", "a"), ("field", "a")))),
    [{"a": 0, "b": 0, "c": 0, "P": 0, "Q": 0}],
)
def test_cpsat_decides_like_python(recipe, envs) -> None:
    """Top-level rules take CP-SAT's enforce path, negated ones its reified path. The example is a
    divisor of two terms one of which may be 0: CP-SAT refused the model until the compiler divided
    by one variable."""
    expr, expected = _check_python_backends(recipe, envs[:2])
    for env, want in zip(envs[:2], expected, strict=True):
        assert _cpsat_holds(expr, env) == bool(want), (recipe, env)


TRUTH_A_BELOW_5 = ("+", ("<", ("field", "a"), 5), ("const", 0))
ENV = {"a": 7, "b": 3, "c": 0, "P": 0, "Q": 0}


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(INTEGER, TRUTH_AS_INTEGER), ENVS)
@example(("*", TRUTH_A_BELOW_5, ("field", "b")), [{**ENV, "a": 1}])  # a truth value (1) times a field
@example(("r//", 6, TRUTH_A_BELOW_5), [ENV])  # divided by a truth value that is 0: counts as 1
@example(("r//", 6, ("%", ("field", "a"), ("const", 7))), [ENV])  # divided by a remainder that is 0
@example(("//", ("%", ("field", "a"), ("const", 5)), ("const", 2)), [ENV])  # a remainder (never negative) divided
@example(("//", TRUTH_A_BELOW_5, ("const", 2)), [ENV])  # a truth value (never negative) divided
@example(("//", ("field", "a"), ("const", 0)), [ENV])  # a divisor that is always 0
@example(("%", ("field", "a"), ("const", 8)), [ENV])  # the largest remainder (7)
@example(
    ("*", ("-", ("field", "a"), ("r-", 0, ("field", "b"))), ("field", "c")), [{**ENV, "c": 2}]
)  # a - (0 - b), up to 18
def test_cpsat_computes_like_python(recipe, envs) -> None:
    """An integer expression equals its Python value and nothing else in CP-SAT. The examples are
    where the compiler's value bounds decide: an auxiliary variable for a product or a divisor
    whose bounds leave out the value the node takes."""
    expr, expected = _check_python_backends(recipe, envs[:1])
    env, want = envs[0], expected[0]
    assert _cpsat_holds(expr.eq(want), env), (recipe, env, want)
    assert not _cpsat_holds(expr.ne(want), env), (recipe, env, want)


@settings(max_examples=2, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(
    st.lists(
        st.one_of(INTEGER, TRUTH_AS_INTEGER, BOOLEAN, st.tuples(st.just("-"), INTEGER, INTEGER)),
        min_size=60,
        max_size=60,
    ),
    ENVS,
)
def test_c_rendering_computes_like_python(tmp_path_factory, recipes, envs) -> None:
    """The dispatcher's C (``to_c`` with its helpers, negative dividends included), compiled once per
    example for a batch of expressions, prints each expression's Python value."""
    compiler = c_compiler()
    names = FIELDS + PARAMS
    lines = [to_c(build(r), lambda f: f"v[{names.index(f)}]", lambda p: f"v[{names.index(p)}]") for r in recipes]
    source = "\n".join(
        [
            "#include <stdint.h>",
            "#include <stdio.h>",
            C_HELPERS,
            "int main(void) {",
            f"  static const int64_t envs[{len(envs)}][{len(names)}] = {{"
            + ", ".join("{" + ", ".join(str(env[n]) for n in names) + "}" for env in envs)
            + "};",
            f"  for (int e = 0; e < {len(envs)}; ++e) {{",
            "    const int64_t *v = envs[e];",
            *(f'    printf("%lld\\n", (long long)({line}));' for line in lines),
            "  }",
            "  return 0;",
            "}",
        ]
    )
    work = tmp_path_factory.mktemp("cexpr")
    (work / "t.c").write_text(source)
    subprocess.run([compiler, "-O0", "-o", str(work / "t"), str(work / "t.c")], check=True)
    printed = [
        int(x) for x in subprocess.run([str(work / "t")], check=True, capture_output=True, text=True).stdout.split()
    ]
    expected = [value(r, env) for env in envs for r in recipes]
    assert printed == expected


def test_a_one_part_conjunction_or_disjunction_is_the_part() -> None:
    """Rules join generated parts with all_of/any_of; one part must stay that part, not a one-part
    And/Or, so that explain words its failure as the part's own (render reads the node types)."""
    part = Field("a") < 3
    assert all_of(part) is part and any_of(part) is part
    assert all_of(part, part) == And((part, part)) and any_of(part, part) == Or((part, part))
    assert implies(part, part) == Or((Not(part), part))


def test_every_comparison_folds_like_python_at_less_equal_and_greater() -> None:
    """Comparisons of problem quantities are folded by bind and partial: each operator is checked
    on both sides of equality, where a boundary slip (``>=`` folded as ``>``) shows."""
    for op in ("<", "<=", ">", ">=", "eq", "ne"):
        recipe = (op, ("param", "P"), ("param", "Q"))
        envs = [{"a": a, "b": 0, "c": 0, "P": p, "Q": 2} for a, p in ((0, 1), (1, 2), (2, 3))]
        _check_python_backends(recipe, envs)


def test_cpsat_reifies_constants_under_or_and_not() -> None:
    """A rule folds to TRUE where it cannot apply in a cell (constraints/rulebook/validity.py), so a constant
    can stand under an Or or a Not of a rule the model holds without binding it first."""
    a = Field("a")
    cases = [
        (Or((a < 3, Const(0))), lambda v: v < 3),
        (Or((a > 20, Const(1))), lambda v: True),
        (Not(And((a < 5, Const(1)))), lambda v: v >= 5),
        (Not(Or((Const(0), a > 6))), lambda v: v <= 6),
        (Or((Not(Const(1)), a.eq(4))), lambda v: v == 4),
    ]
    for expr, holds in cases:
        model = CellModel(FIELDS, BOUNDS, [Rule("r", Predicate.PROBLEM, expr, "", "")], None)
        assert [model.feasible({"a": v, "b": 0, "c": 0}, enabled=["r"]) for v in range(10)] == [
            holds(v) for v in range(10)
        ], expr


@pytest.mark.parametrize(
    "expr,words",
    [
        (lookup(Field("a") - 1, TABLE, default=2).eq(2), "lookup key can be negative"),
        (((Field("a") - 1) // 2).eq(0), "dividend may be negative"),
    ],
)
def test_cpsat_refuses_what_it_cannot_state_exactly(expr: Expr, words: str) -> None:
    """A lookup key or a dividend that may be negative (here: a - 1 with a from 0) would silently
    lose the solutions where it is; the compiler refuses the rule instead."""
    with pytest.raises(ValueError, match=words):
        CellModel(FIELDS, BOUNDS, [Rule("r", Predicate.PROBLEM, expr, "", "")], None)


def test_parts_over_problem_values_are_computed_exactly() -> None:
    """Problem checks multiply problem sizes (a tensor's elements: N x C x Hi x Wi, ...) that can
    pass 2**63 with every size in range. The parts that read no config field (parameters,
    constants, their arithmetic, comparisons and negations) are folded with Python integers,
    exactly, before a numpy column meets them; here 2**110 // 2**90."""
    p, q, a = Param("P"), Param("Q"), Field("a")
    expr = (Not(p > q) * (q >= p) * (Const(2**30) * p * q * p * q)) // (Const(2**30) * p * q * p) + a
    values, cols = {"P": 2**20, "Q": 2**20}, {"a": np.arange(10, dtype=np.int64)}
    want = [2**20 + v for v in range(10)]
    assert np.asarray(partial(expr)(values, cols)).tolist() == want
    assert np.asarray(evaluate(bind(expr, values), cols)).tolist() == want


def test_binding_leaves_one_part_as_the_part_itself() -> None:
    """A conjunction or disjunction whose other parts fold away binds to its one remaining part,
    not to a one-part And or Or (explain words a failure by the node's own type)."""
    a_small, p = Field("a") < 3, Param("P")
    assert bind(all_of(a_small, p < 5), {"P": 1}) == a_small
    assert bind(any_of(p > 5, a_small), {"P": 1}) == a_small
    assert bind(all_of(a_small, p < 5, Field("b") > 1), {"P": 1}) == And((a_small, Field("b") > 1))
