"""The rule catalogue (``ckspace/constraints/rulebook/catalogue.py``) is the one list of rule families
and the one statement of the rules a target adds to a cell; the target's listing, computed from it
in grouped passes over the rows the rule space keeps, is the rule-space listing less what those rules
exclude, decided here row by row by folding each rule with plain Python integers."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from conftest import ROOT

from ckspace.constraints.language.expr import Const, Expr, Field, Param, bind
from ckspace.constraints.language.rule import excludes_kind
from ckspace.constraints.rulebook.catalogue import FAMILIES, TargetRules, ck_revision_rules, target_rules
from ckspace.core.cells import Cell
from ckspace.core.fields import DEPTHWISE_FIELDS, GEMM_FIELD_NAMES
from ckspace.core.vocab import Dtype, Variant
from ckspace.environment.ck_locate import locate_ck
from ckspace.environment.target import Target, resolve_target
from ckspace.space.space import Space


def _as_params(expr: Expr) -> Expr:
    """``expr`` with every config field made a problem quantity, so :func:`bind` folds it whole."""
    if isinstance(expr, Field):
        return Param(expr.name)
    if not hasattr(expr, "__dataclass_fields__"):
        return expr
    changes = {}
    for name in expr.__dataclass_fields__:
        value = getattr(expr, name)
        if isinstance(value, Expr):
            changes[name] = _as_params(value)
        elif isinstance(value, tuple) and value and all(isinstance(v, Expr) for v in value):
            changes[name] = tuple(_as_params(v) for v in value)
    return type(expr)(**{**{n: getattr(expr, n) for n in expr.__dataclass_fields__}, **changes})


def _holds(rules, row: tuple[int, ...], fields: tuple[str, ...]) -> bool:
    """Whether one row satisfies every rule, each folded to a constant with Python integers (not the
    numpy evaluator the listing uses); a rule on fields the row lacks excludes it."""
    values = dict(zip(fields, row, strict=True))
    for rule in rules:
        if excludes_kind(rule, fields):
            return False
        folded = bind(_as_params(rule.expr), values)
        assert isinstance(folded, Const), rule.name
        if not folded.value:
            return False
    return True


def _target() -> Target:
    return resolve_target(str(locate_ck(None)))


@pytest.mark.parametrize("rule_set", ["default", pytest.param("full", marks=pytest.mark.slow)])
def test_the_target_listing_is_the_rule_space_less_what_the_target_rules_exclude(rule_set: str) -> None:
    target = _target()
    assert target.ck is not None
    rule_space = Space("gfx950", rule_set=rule_set, ck=None, use_cache=False)
    target_space = Space("gfx950", rule_set=rule_set, ck=target, use_cache=False)
    listed = {(k.cell, k.depthwise, k.row) for k in target_space.kernels()}
    expected = set()
    added_by_cell = {cell: target_rules(target, "gfx950", cell) for cell in rule_space.requests[0].cells}
    for kernel in rule_space.kernels():
        added = added_by_cell[kernel.cell]
        fields = DEPTHWISE_FIELDS if kernel.depthwise else GEMM_FIELD_NAMES
        if _holds(added.of_kind(kernel.depthwise), kernel.row, fields):
            expected.add((kernel.cell, kernel.depthwise, kernel.row))
    assert listed == expected
    assert 0 < len(listed) < len(rule_space.kernels())  # the target's rules bite, and not everywhere


def test_the_target_rules_of_a_cell() -> None:
    cell = Cell(Variant.BWD_WEIGHT, 2, Dtype.BF16)
    assert target_rules(Target(None, rules_only=True), "gfx950", cell) == TargetRules()
    without_ck = target_rules(Target(None, rules_only=False), "gfx950", cell)
    assert [r.name for r in without_ck.gemm] == ["bwd_weight_half_interwave_multiwave"]
    assert without_ck.depthwise == () and without_ck.ck_revision == ()
    target = _target()
    added = target_rules(target, "gfx950", cell)
    assert added.gemm == added.known_wrong + added.ck_revision and added.of_kind(True) == added.depthwise
    assert {r.predicate.value for r in added.ck_revision} == {"ck_revision"}
    biting = ck_revision_rules(target.ck.revision(), "gfx950", cell)  # what emit checks: the non-vacuous ones
    assert biting == tuple(r for r in added.ck_revision if not r.vacuous)


def test_the_rules_command_documents_the_catalogue_families() -> None:
    """Every family of the catalogue is a section of ``ckspace rules`` (with CK headers), in its order,
    then rule set ``open``'s domains; nothing else."""
    out = subprocess.run(
        [sys.executable, "-m", "ckspace", "rules", "--format", "json", "--ck-root", str(locate_ck(None))],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    )
    rules = json.loads(out.stdout)["rules"]
    documented = list(dict.fromkeys((r["section"], r["config"]) for r in rules))
    assert documented == [(f.section, f.config) for f in FAMILIES] + [("domain", "gemm")]
