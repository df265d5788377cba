"""The two backends of each rule agree: CP-SAT (reasoning) and numpy (bulk classification).

Kernel Tuner keeps a brute-force search space beside its fast builder and asserts they agree;
here the solver's own enumeration is the slow reference for the vectorised listing.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from strategies import depthwise_configs, gemm_configs

from ckspace.constraints.enumeration.enumerator import enumerate_cells
from ckspace.constraints.evaluators.classify import columns, rule_masks
from ckspace.constraints.evaluators.model import CellModel
from ckspace.constraints.rulebook.validity import depthwise_rules, gemm_rules
from ckspace.core.cells import Cell, Request
from ckspace.core.fields import DEPTHWISE_BOUNDS, DEPTHWISE_FIELDS, GEMM_BOUNDS, GEMM_FIELD_NAMES
from ckspace.core.vocab import Dtype, Variant

_MODELS: dict = {}


def _rules_model(arch: str, variant: Variant, dtype: Dtype) -> CellModel:
    key = (arch, variant, dtype)
    if key not in _MODELS:
        _MODELS[key] = CellModel(GEMM_FIELD_NAMES, GEMM_BOUNDS, gemm_rules(arch, variant, dtype), None)
    return _MODELS[key]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(gemm_configs())
@pytest.mark.slow
def test_each_gemm_rule_agrees_across_backends(config) -> None:
    model = _rules_model(config.arch, config.variant, config.dtype)
    row = config.row()
    masks = rule_masks(model.rules.values(), columns([row], GEMM_FIELD_NAMES), 1)
    values = dict(zip(GEMM_FIELD_NAMES, row, strict=True))
    for name, mask in masks.items():
        assert model.feasible(values, enabled=[name]) == bool(mask[0]), (name, config.name)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(depthwise_configs())
def test_each_depthwise_rule_agrees_across_backends(config) -> None:
    if "dw" not in _MODELS:
        _MODELS["dw"] = CellModel(DEPTHWISE_FIELDS, DEPTHWISE_BOUNDS, depthwise_rules(), None)
    model = _MODELS["dw"]
    row = config.row()
    masks = rule_masks(model.rules.values(), columns([row], DEPTHWISE_FIELDS), 1)
    for name, mask in masks.items():
        assert model.feasible(dict(zip(DEPTHWISE_FIELDS, row, strict=True)), enabled=[name]) == bool(mask[0]), name


CELLS = [
    ("gfx942", "full", "bwd_weight", 2, "bf16"),
    ("gfx950", "full", "forward", 3, "fp32"),
    ("gfx1250", "full", "bwd_weight", 1, "fp16"),
    ("gfx90a", "default", "forward", 2, "fp32"),
    ("gfx1250", "default", "bwd_data", 3, "bf16"),
]


@pytest.mark.parametrize("arch,rule_set,variant,ndim,dtype", CELLS)
def test_solver_enumeration_equals_listing(arch, rule_set, variant, ndim, dtype) -> None:
    request = Request.build(arch, rule_set, [variant], [ndim], [dtype])
    cell = Cell(Variant(variant), ndim, Dtype(dtype))
    result = enumerate_cells(request, use_cache=False)[cell]
    model = CellModel(GEMM_FIELD_NAMES, GEMM_BOUNDS, gemm_rules(arch, cell.variant, cell.dtype), result.gemm)
    listed = {row for row, ok in zip(result.gemm, result.gemm_valid, strict=True) if ok}
    assert set(model.solutions()) == listed
    assert len(listed) > 0
