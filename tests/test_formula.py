"""The feature formula language (ckspace/features/formula.py) against plain Python floats.

Formulas are drawn as recipes, built through the operators and helpers the feature module uses,
and computed directly with ``math`` (:func:`value`): a :class:`Program` over many candidate rows
must give each row's value, problem-only formulas as one float.
"""

from __future__ import annotations

import math

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ckspace.features.formula import (
    Formula,
    Num,
    Program,
    ceil,
    config,
    floor,
    log2,
    maximum,
    minimum,
    problem,
    reads_config,
)

PROBLEM = ("N", "C")
CONFIG = ("tile_m", "vec_a")

LEAVES = st.one_of(
    st.sampled_from(PROBLEM).map(lambda n: ("problem", n)),
    st.sampled_from(CONFIG).map(lambda n: ("config", n)),
    st.sampled_from([0.5, 1, 2, 3, 7.25]).map(lambda v: ("num", v)),
)


def _positive(children: st.SearchStrategy) -> st.SearchStrategy:
    """Recipes whose value is positive (what ``/`` divides by and ``log2`` takes)."""
    return st.one_of(
        st.tuples(st.sampled_from(["+", "*", "/", "min", "max"]), children, children),
        st.tuples(st.sampled_from(["ceil", "r+", "r*", "r/"]), children),
    )


POSITIVE = st.recursive(LEAVES, _positive, max_leaves=6)
ANY = st.one_of(
    POSITIVE, st.tuples(st.just("-"), POSITIVE, POSITIVE), st.tuples(st.sampled_from(["log2", "floor", "r-"]), POSITIVE)
)


def build(recipe) -> Formula:
    op, *args = recipe
    if op == "problem":
        return problem(args[0])
    if op == "config":
        return config(args[0])
    if op == "num":
        return Num(float(args[0]))
    if op in ("r+", "r-", "r*", "r/"):
        number = 3  # a plain number on the left: the reflected operators
        right = build(args[0])
        return {"r+": number + right, "r-": number - right, "r*": number * right, "r/": number / right}[op]
    if op in ("+", "-", "*", "/"):
        left, right = build(args[0]), build(args[1])
        return {"+": left + right, "-": left - right, "*": left * right, "/": left / right}[op]
    if op in ("min", "max"):
        return (minimum if op == "min" else maximum)(build(args[0]), build(args[1]))
    return {"log2": log2, "ceil": ceil, "floor": floor}[op](build(args[0]))


def value(recipe, env: dict[str, float]) -> float:
    op, *args = recipe
    if op in ("problem", "config"):
        return float(env[args[0]])
    if op == "num":
        return float(args[0])
    if op in ("r+", "r-", "r*", "r/"):
        a, b = 3.0, value(args[0], env)
    elif len(args) == 2:
        a, b = value(args[0], env), value(args[1], env)
    else:
        a = value(args[0], env)
    return {
        "+": lambda: a + b,
        "r+": lambda: a + b,
        "-": lambda: a - b,
        "r-": lambda: a - b,
        "*": lambda: a * b,
        "r*": lambda: a * b,
        "/": lambda: a / b,
        "r/": lambda: a / b,
        "min": lambda: min(a, b),
        "max": lambda: max(a, b),
        "log2": lambda: math.log2(a),
        "ceil": lambda: float(math.ceil(a)),
        "floor": lambda: float(math.floor(a)),
    }[op]()


def _reads_config(recipe) -> bool:
    op, *args = recipe
    if op == "config":
        return True
    return any(_reads_config(a) for a in args if isinstance(a, tuple))


ROWS = st.lists(
    st.fixed_dictionaries({"tile_m": st.sampled_from([16, 32, 64, 128, 256]), "vec_a": st.sampled_from([1, 2, 4, 8])}),
    min_size=2,
    max_size=5,
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(ANY, min_size=1, max_size=4),
    st.fixed_dictionaries({"N": st.integers(1, 64), "C": st.integers(1, 513)}),
    ROWS,
)
def test_program_computes_like_python(recipes, values, rows) -> None:
    formulas = [build(r) for r in recipes]
    columns = {name: np.array([row[name] for row in rows], dtype=np.float64) for name in CONFIG}
    outputs = Program(formulas)(values, columns)
    for recipe, formula, out in zip(recipes, formulas, outputs, strict=True):
        assert reads_config(formula) == _reads_config(recipe)
        if reads_config(formula):
            expected = [value(recipe, {**values, **row}) for row in rows]
            assert isinstance(out, np.ndarray)
            assert np.allclose(out, expected, rtol=1e-12, atol=0), (recipe, out, expected)
        else:
            assert isinstance(out, float) and math.isclose(out, value(recipe, values), rel_tol=1e-12), recipe


def test_a_node_hashes_as_its_parts_and_anew_where_it_is_unpickled() -> None:
    """Op keeps its hash from when it was built (shared subtrees are hashed once); it is the hash of
    (op, args), equal nodes hash alike, and a node pickled here and read by a process with another
    string-hash seed hashes as that process hashes its parts (the cached value is not carried)."""
    import pickle
    import subprocess
    import sys

    from ckspace.features.formula import Op, Var

    node = Op("+", (Var("problem", "N"), Op("log2", (Var("config", "tile_m"),))))
    twin = Op("+", (Var("problem", "N"), Op("log2", (Var("config", "tile_m"),))))
    assert node == twin and hash(node) == hash(twin) == hash(("+", node.args))
    assert {node: 1}[twin] == 1 and node != Op("-", node.args)
    check = (
        "import pickle, sys\n"
        "node = pickle.loads(sys.stdin.buffer.read())\n"
        "assert hash(node) == hash((node.op, node.args)), 'a stale hash'\n"
        "assert hash(node.args[1]) == hash((node.args[1].op, node.args[1].args))\n"
    )
    for seed in ("1", "2"):
        done = subprocess.run(
            [sys.executable, "-c", check],
            input=pickle.dumps(node),
            capture_output=True,
            env={**__import__("os").environ, "PYTHONHASHSEED": seed},
            check=False,
        )
        assert done.returncode == 0, done.stderr.decode()


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(ANY, min_size=1, max_size=4),
    st.lists(st.fixed_dictionaries({"N": st.integers(1, 64), "C": st.integers(1, 513)}), min_size=1, max_size=4),
    ROWS,
)
def test_many_problems_at_once_are_each_problem_alone(recipes, problems, rows) -> None:
    """Program.over_problems: a (problems, rows) array per output, each row the problem's own values
    (problem-only outputs repeated along the rows), against the plain Python statement."""
    formulas = [build(r) for r in recipes]
    columns = {name: np.array([row[name] for row in rows], dtype=np.float64) for name in CONFIG}
    values = {name: np.array([p[name] for p in problems]) for name in PROBLEM}
    outputs = Program(formulas).over_problems(values, columns)
    for recipe, out in zip(recipes, outputs, strict=True):
        assert out.shape == (len(problems), len(rows))
        expected = [[value(recipe, {**p, **row}) for row in rows] for p in problems]
        assert np.allclose(out, expected, rtol=1e-12, atol=0), (recipe, out, expected)


def test_a_node_is_immutable_and_shows_its_parts_only() -> None:
    """Nodes are shared between formulas and an Op's hash is computed once, so none may change after
    it is built; a node's repr is its parts (no per-process hash: logs and messages read alike in
    every process)."""
    import dataclasses

    import pytest

    from ckspace.features.formula import Op, Var

    leaf, number = Var("problem", "N"), Num(2.0)
    node = Op("*", (leaf, number))
    for target, name, value in ((node, "op", "+"), (leaf, "name", "C"), (number, "value", 3.0)):
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(target, name, value)
    assert repr(node) == "Op(op='*', args=(Var(source='problem', name='N'), Num(value=2.0)))"
