"""Configs hold their fields to the fields' domains: a value outside a field's declared domain is
refused on every way of making a config (``core.config``, ``core.fields``), in one line naming the
field, the value and the domain.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ckspace.core.config import DepthwiseConfig, GemmConfig
from ckspace.core.errors import InvalidInputError
from ckspace.core.fields import (
    DEPTHWISE_BOUNDS,
    DEPTHWISE_DEFAULTS,
    DEPTHWISE_FIELDS,
    FIELD_INDEX,
    FIELD_KIND,
    GEMM_BOUNDS,
    GEMM_FIELD_NAMES,
    int_domain,
)
from ckspace.core.naming import depthwise_name, gemm_name
from ckspace.space.space import Space

# -- item 14: configs refuse values outside their fields' domains ---------------------------------------


@cache
def _configs() -> tuple[GemmConfig, DepthwiseConfig]:
    kernels = Space("gfx942", "forward", 2, "fp16", "full", ck=None).kernels()
    gemm = next(k for k in kernels if not k.depthwise).config()
    depthwise = next(k for k in kernels if k.depthwise).config()
    assert isinstance(gemm, GemmConfig) and isinstance(depthwise, DepthwiseConfig)
    return gemm, depthwise


def _with(row: tuple[int, ...], field: str, value: int) -> tuple[int, ...]:
    """``row`` with GEMM ``field`` set to ``value``."""
    changed = list(row)
    changed[FIELD_INDEX[field]] = value
    return tuple(changed)


def _outside(low: int, high: int) -> st.SearchStrategy[int]:
    """Any integer outside [low, high], near its ends and far (2**80 included)."""
    return st.one_of(
        st.integers(max_value=low - 1),
        st.integers(min_value=high + 1),
        st.sampled_from([low - 1, high + 1, 2**80, -(2**80), 2**63]),
    )


@st.composite
def _out_of_domain(draw: st.DrawFn) -> tuple[bool, str, int]:
    """(depthwise?, an integer field, a value outside its domain)."""
    depthwise = draw(st.booleans())
    bounds = DEPTHWISE_BOUNDS if depthwise else GEMM_BOUNDS
    fields = DEPTHWISE_FIELDS if depthwise else [f for f in GEMM_FIELD_NAMES if FIELD_KIND[f] is int]
    field = draw(st.sampled_from(sorted(fields)))
    return depthwise, field, draw(_outside(*bounds[field]))


def _refused(make: Callable[[], object], field: str, value: int, bounds: tuple[int, int]) -> None:
    """``make`` raises InvalidInputError in one line naming ``field``, ``value`` and its domain."""
    with pytest.raises(InvalidInputError) as refused:
        make()
    line = str(refused.value)
    assert "\n" not in line and field in line and str(value) in line and int_domain(*bounds) in line, line


@settings(max_examples=300, deadline=None)
@given(_out_of_domain())
def test_issue_36_item_14_any_int_outside_a_fields_domain_is_refused_on_every_path(case: tuple[bool, str, int]) -> None:
    """``GemmConfig.replace(tile_m=2**80)`` was accepted, and ``violated_rules`` then raised
    OverflowError. Every way of making a config refuses it: the constructor, ``replace``,
    ``from_fields`` (GEMM), ``from_row`` and ``from_name`` (a negative value has no name: refused
    as a name; a depthwise name carries no ``block_size`` nor ``dilation``)."""
    depthwise, field, value = case
    gemm, dw = _configs()
    config: GemmConfig | DepthwiseConfig = dw if depthwise else gemm
    bounds = (DEPTHWISE_BOUNDS if depthwise else GEMM_BOUNDS)[field]
    kind = type(config)
    values = {**config.model_dump(), field: value}
    if depthwise:
        row = tuple(values[f] for f in DEPTHWISE_FIELDS)
        _refused(lambda: DepthwiseConfig.from_row(dw.arch, dw.dtype, row), field, value, bounds)
        name = depthwise_name(dw.dtype, dw.ndim, row, dw.layout)
    else:
        row = _with(gemm.row(), field, value)
        _refused(lambda: GemmConfig.from_row(gemm.arch, gemm.variant, gemm.ndim, gemm.dtype, row), field, value, bounds)
        _refused(lambda: GemmConfig.from_fields(values), field, value, bounds)
        name = gemm_name(gemm.variant, gemm.dtype, gemm.ndim, row)
    _refused(lambda: kind(**values), field, value, bounds)
    _refused(lambda: config.replace(**{field: value}), field, value, bounds)
    if depthwise and field in DEPTHWISE_DEFAULTS:
        return  # a depthwise name leaves out the fields every config shares
    if value >= 0:
        _refused(lambda: kind.from_name(name, config.arch), field, value, bounds)
    else:
        with pytest.raises(InvalidInputError):
            kind.from_name(name, config.arch)


@pytest.mark.parametrize("field", [f for f in GEMM_FIELD_NAMES if FIELD_KIND[f] is not int])
def test_issue_36_item_14_a_row_code_outside_an_enum_or_bool_domain_is_refused(field: str) -> None:
    """A row's enum and boolean codes have domains too: -1 picked the last pipeline, 2 read as true,
    99 failed with an IndexError."""
    gemm, _ = _configs()
    low, high = GEMM_BOUNDS[field]
    for value in (low - 1, high + 1, 99):
        row = _with(gemm.row(), field, value)
        _refused(
            lambda row=row: GemmConfig.from_row(gemm.arch, gemm.variant, gemm.ndim, gemm.dtype, row),
            field,
            value,
            (low, high),
        )


def test_issue_36_item_14_the_reported_case_is_one_line() -> None:
    """The issue's own example: ``replace(tile_m=2**80)``, in the words a user reads."""
    gemm, _ = _configs()
    with pytest.raises(
        InvalidInputError, match=r"^GemmConfig tile_m=\d+: out of range; valid: an integer from 1 to 1024$"
    ):
        gemm.replace(tile_m=2**80)
