"""Which candidates can run a problem (steps 1 and 2 of :mod:`ckspace.select.selector`): the checks
CK's ``IsSupportedArgument`` makes, bound to the problem and evaluated over every candidate at once;
for a candidate that fails only on vector alignment, its family's widest vector variant that passes
every check; and, when nothing can run, the error naming the checks that block each candidate. The
generated C dispatcher (:mod:`ckspace.emit.dispatcher`) makes the same checks."""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache

import numpy as np

from ckspace.constraints.language.expr import bind, evaluate, fields_of
from ckspace.constraints.rulebook.problem_rules import ProblemRule, gemm_problem_templates, problem_values
from ckspace.core.errors import NoKernelError
from ckspace.core.vocab import Dtype, Variant
from ckspace.select.candidates import CandidateSet
from ckspace.workloads.operands import VECTOR_FIELDS
from ckspace.workloads.problem import ConvProblem


def _masks(
    rules: Sequence[ProblemRule], values: dict[str, int], cols: dict[str, np.ndarray], size: int
) -> tuple[np.ndarray, np.ndarray]:
    """(passes every non-vector check, passes every vector-alignment check) per row."""
    other, vector = np.ones(size, dtype=bool), np.ones(size, dtype=bool)
    for rule in rules:
        target = vector if rule.vector_field else other
        result = rule.check(values, cols)
        if isinstance(result, np.ndarray):
            target &= result
        elif not result:
            target[:] = False
    return other, vector


@cache
def _vector_checks(variant: Variant, ndim: int, dtype: Dtype) -> tuple[tuple[ProblemRule, ...], tuple[str, ...]]:
    """The problem checks of a cell that read a vector width, and the config fields they read."""
    rules = tuple(
        r for r in gemm_problem_templates(variant, ndim, dtype) if set(fields_of(r.expr)) & set(VECTOR_FIELDS)
    )
    return rules, tuple(sorted({f for rule in rules for f in fields_of(rule.expr)}))


def _rules(problem: ConvProblem, variant: Variant, dtype: Dtype) -> tuple[ProblemRule, ...]:
    """The checks of the problem's cell, before binding."""
    return gemm_problem_templates(variant, problem.ndim, dtype)


def feasible(problem: ConvProblem, prepared: CandidateSet, variant: Variant, dtype: Dtype) -> np.ndarray:
    """Mask of the candidates that can run ``problem`` as they are (every problem rule of their
    cell holds), before any vector fallback."""
    other, vector = _masks(
        _rules(problem, variant, dtype), problem_values(problem), prepared.rows.rule_columns, len(prepared.names)
    )
    return (prepared.ndim == problem.ndim) & other & vector


def runnable(
    problem: ConvProblem, prepared: CandidateSet, variant: Variant, dtype: Dtype
) -> tuple[np.ndarray, np.ndarray]:
    """(indices of the candidates that run ``problem`` as they are; for candidates that fail
    only on vector alignment, pairs (candidate, index of the variant that replaces it))."""
    rules, values = _rules(problem, variant, dtype), problem_values(problem)
    other, vector = _masks(rules, values, prepared.rows.rule_columns, len(prepared.names))
    other &= prepared.ndim == problem.ndim
    direct = np.flatnonzero(other & vector)
    needs = np.flatnonzero(other & ~vector)
    if needs.size == 0:
        return direct, np.empty((0, 2), dtype=np.int64)
    rows, owner, _, _ = prepared.variants()
    candidate_rows = np.concatenate([prepared.family_rows[i] for i in needs])
    if candidate_rows.size == 0:
        return direct, np.empty((0, 2), dtype=np.int64)
    # a variant differs from its family only in vector widths: only the checks that read them can
    # change, and the family passed all the others
    vector_rules, fields = _vector_checks(variant, problem.ndim, dtype)
    cols = {name: rows.rule_columns[name][candidate_rows] for name in fields}
    ok_other, ok_vector = _masks(vector_rules, values, cols, candidate_rows.size)
    passing = candidate_rows[ok_other & ok_vector]  # grouped by family, widest first within each
    families = owner[passing]
    first = np.flatnonzero(np.concatenate(([True], families[1:] != families[:-1]))) if passing.size else passing
    chosen, families = passing[first], families[first]
    # a variant that is itself a directly runnable candidate is ranked once, as that candidate
    keep = ~np.isin(prepared.same_as_candidate[chosen], direct)
    return direct, np.column_stack([families[keep], chosen[keep]]).astype(np.int64)


def no_kernel(problem: ConvProblem, prepared: CandidateSet, variant: Variant, dtype: Dtype) -> NoKernelError:
    """The error naming, for each candidate, the checks that block it (for a family whose
    variants were tried, the checks its narrowest variant still fails)."""
    blocking: dict[str, tuple[str, ...]] = {}
    values = problem_values(problem)
    bound = [(rule, bind(rule.expr, values)) for rule in _rules(problem, variant, dtype)]
    rows, _, offsets, _ = prepared.variants()
    for i, name in enumerate(prepared.names):
        if prepared.ndim[i] != problem.ndim:
            blocking[name] = ("problem_ndim",)
            continue
        source, j = (rows, offsets[i + 1] - 1) if offsets[i + 1] > offsets[i] else (prepared.rows, i)
        cols = {f: col[j : j + 1] for f, col in source.rule_columns.items()}
        blocking[name] = tuple(
            rule.name for rule, expr in bound if not bool(np.asarray(evaluate(expr, cols)).reshape(-1)[0])
        )
    groups: dict[tuple[str, ...], list[str]] = {}
    for name, rules in blocking.items():
        groups.setdefault(rules, []).append(name)
    detail = "; ".join(
        f"{', '.join(rules)} blocks {len(names)} ({', '.join(names[:3])}{', ...' if len(names) > 3 else ''})"
        for rules, names in groups.items()
    )
    return NoKernelError(
        f"none of the {len(prepared.names)} candidates (nor a vector-width variant of one) "
        f"can run {problem.text()}: {detail}",
        blocking,
    )
