"""The fields of a GEMM-style kernel config, in one fixed order.

A config's *row* is the tuple of its field values in this order, enums as their integer codes and
booleans as 0/1. Rows are what the rule sets generate, what the solver's variables and the
vectorised evaluator work on, and what the cache stores; the pydantic models of
:mod:`ckspace.core.config` are built from rows at the boundary.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from enum import Enum
from functools import cache
from itertools import chain
from typing import NamedTuple

from ckspace.core.errors import InvalidChoiceError, InvalidInputError
from ckspace.core.tables import table
from ckspace.core.vocab import Epilogue, Layout, Pipeline, Scheduler, Specialization, StreamKStrategy


class FieldSpec(NamedTuple):
    name: str
    kind: type  # int, bool or a Choice subclass
    doc: str


GEMM_FIELDS: tuple[FieldSpec, ...] = (
    FieldSpec("tile_m", int, "block tile along the implicit GEMM's M"),
    FieldSpec("tile_n", int, "block tile along N"),
    FieldSpec("tile_k", int, "block tile along K"),
    FieldSpec("wave_m", int, "waves per block along M"),
    FieldSpec("wave_n", int, "waves per block along N"),
    FieldSpec("wave_k", int, "waves per block along K"),
    FieldSpec("warp_tile_m", int, "MFMA/WMMA fragment M"),
    FieldSpec("warp_tile_n", int, "MFMA/WMMA fragment N"),
    FieldSpec("warp_tile_k", int, "MFMA/WMMA fragment K"),
    FieldSpec("vec_a", int, "global-load vector width of A"),
    FieldSpec("vec_b", int, "global-load vector width of B"),
    FieldSpec("vec_c", int, "store vector width of C"),
    FieldSpec("pipeline", Pipeline, "block GEMM pipeline"),
    FieldSpec("scheduler", Scheduler, "intrawave or interwave scheduling"),
    FieldSpec("epilogue", Epilogue, "epilogue kind"),
    FieldSpec("pad_m", bool, "pad M"),
    FieldSpec("pad_n", bool, "pad N"),
    FieldSpec("pad_k", bool, "pad K"),
    FieldSpec("double_smem_buffer", bool, "ping-pong LDS buffer"),
    FieldSpec("num_groups_to_merge", int, "convolution groups merged into one GEMM"),
    FieldSpec("split_image", bool, "large-tensor split of the image"),
    FieldSpec("explicit_gemm", bool, "explicit GEMM path (bwd_weight)"),
    FieldSpec("two_stage", bool, "fp32 workspace then convert (bwd_weight)"),
    FieldSpec("specialization", Specialization, "convolution specialization"),
    FieldSpec("streamk_enabled", bool, "stream-K tile partitioning (bwd_weight)"),
    FieldSpec("streamk_strategy", StreamKStrategy, "stream-K reduction strategy"),
    FieldSpec("streamk_persistent", bool, "persistent stream-K"),
    FieldSpec("num_wave_groups", int, "wave groups"),
    FieldSpec("layout", Layout, "layout string of the name"),
    FieldSpec("tagged", bool, "the rule set tagged the config with its dtype (upstream's WMMA rule reads it)"),
)

GEMM_FIELD_NAMES: tuple[str, ...] = tuple(f.name for f in GEMM_FIELDS)
FIELD_INDEX: dict[str, int] = {name: i for i, name in enumerate(GEMM_FIELD_NAMES)}
FIELD_KIND: dict[str, type] = {f.name: f.kind for f in GEMM_FIELDS}

Row = tuple[int, ...]


def _config_defaults() -> dict[str, object]:
    """The upstream config defaults (``common.json``) by field: what a config has unless a rule
    set says otherwise. ``tagged`` is not among them: whether a config carries its dtype tag is
    decided by the rule set that proposes it."""
    d = table("common")["config_defaults"]
    return {
        "vec_a": d["vec"][0],
        "vec_b": d["vec"][1],
        "vec_c": d["vec"][2],
        "layout": Layout.parse(d["layout"]),
        "epilogue": Epilogue.parse(d["epilogue"]),
        "scheduler": Scheduler.parse(d["scheduler"]),
        "pad_m": bool(d["pad"][0]),
        "pad_n": bool(d["pad"][1]),
        "pad_k": bool(d["pad"][2]),
        "num_wave_groups": d["num_wave_groups"],
        "num_groups_to_merge": d["num_groups_to_merge"],
        "specialization": Specialization.parse(d["specialization"]),
        "double_smem_buffer": bool(d["double_smem_buffer"]),
        "two_stage": bool(d["two_stage"]),
        "explicit_gemm": bool(d["explicit_gemm"]),
        "split_image": bool(d["split_image"]),
        "streamk_enabled": bool(d["streamk"]),
        "streamk_persistent": bool(d["streamk_persistent"]),
        "streamk_strategy": StreamKStrategy.NONE,
    }


GEMM_DEFAULTS: dict[str, object] = _config_defaults()
"""Default value per GEMM field that has one (geometry and pipeline have none)."""

DEPTHWISE_FIELDS: tuple[str, ...] = (
    "tile_h",
    "tile_w",
    "filter",
    "stride_h",
    "stride_w",
    "pad_h",
    "pad_w",
    "nbatch",
    "sub_h",
    "sub_w",
    "in_vec",
    "out_vec",
    "block_size",
    "dilation",
)
DEPTHWISE_KIND: dict[str, type] = dict.fromkeys(DEPTHWISE_FIELDS, int)
"""Every depthwise field is an integer."""

DEPTHWISE_DEFAULTS: dict[str, int] = {key: table("depthwise")[key] for key in ("block_size", "dilation")}
"""The depthwise fields every config of the table shares (``depthwise.json``) and kernel names leave out."""
DEPTHWISE_LAYOUT: Layout = Layout(table("depthwise")["layout"])
"""The layout depthwise kernel names carry (``depthwise.json``); not a field of their rows."""


def encode(name: str, value: object) -> int:
    """The integer stored for ``value`` of field ``name`` (enum code, 0/1 or the int itself)."""
    kind = FIELD_KIND[name]
    if kind is bool:
        return int(bool(value))
    if kind is int:
        return int(value)  # type: ignore[call-overload]
    return _enum_code(kind, value)


_TRUE, _FALSE = ("true", "1"), ("false", "0")


def parse_bool(what: str, value: object) -> bool:
    """A boolean from a user: ``True``/``False``, 1/0 or their text (any case); anything else
    (``no``, ``yes``, ``2``, ``""``) is an error, never its truthiness."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    text = value.strip().lower() if isinstance(value, str) else None
    if text in _TRUE or text in _FALSE:
        return text in _TRUE
    raise InvalidChoiceError(what, value, ("true", "false", "1", "0"))


def parse_int(what: str, value: object, low: int, high: int) -> int:
    """An integer from a user, within [low, high]: an int or its decimal text; a bool, a float
    (``1.5``, even ``2.0``) or other text is an error."""
    if isinstance(value, str) and re.fullmatch(r"\s*[+-]?\d+\s*", value):
        number = int(value)
    elif isinstance(value, int) and not isinstance(value, bool):
        number = value
    else:
        raise InvalidInputError(f"{what} {value!r} is not an integer; valid: {int_domain(low, high)}")
    if not low <= number <= high:
        raise InvalidInputError(f"{what} {number} is out of range; valid: {int_domain(low, high)}")
    return number


def int_domain(low: int, high: int) -> str:
    """An integer field's domain in words: the one wording of every refusal of a value outside it."""
    return f"an integer from {low} to {high}"


def parse_field(name: str, value: object) -> int:
    """The encoded value of GEMM field ``name`` from user input, parsed strictly (see
    :func:`parse_bool`, :func:`parse_int`; enums list their values when wrong)."""
    kind = FIELD_KIND[name]
    if kind is bool:
        return int(parse_bool(name, value))
    if kind is int:
        return parse_int(name, value, *GEMM_BOUNDS[name])
    if not isinstance(value, (str, kind)):
        raise InvalidChoiceError(name, value, [m.value for m in kind])  # type: ignore[attr-defined]
    return _enum_code(kind, value)


def parse_depthwise_field(name: str, value: object) -> int:
    """A depthwise config field (all integers) from user input, parsed strictly."""
    return parse_int(name, value, *DEPTHWISE_BOUNDS[name])


@cache
def _enum_code(kind: type, value: object) -> int:
    return kind.parse(value).code  # type: ignore[attr-defined]


def plain(value: object) -> object:
    """An enum as its text value, anything else as is: the JSON-friendly form of a field."""
    return value.value if isinstance(value, Enum) else value


def default_row() -> Row:
    """A row holding the config defaults, untagged; fields without a default are 0 until set."""
    return _DEFAULT_ROW


def make_row(base: Row, **values: int) -> Row:
    """``base`` with the given (already encoded) fields replaced."""
    row = list(base)
    for name, value in values.items():
        row[FIELD_INDEX[name]] = value
    return tuple(row)


def decode(name: str, code: int) -> object:
    """Inverse of :func:`encode`."""
    kind = FIELD_KIND[name]
    if kind is bool:
        return bool(code)
    if kind is int:
        return int(code)
    return list(kind)[code]  # type: ignore[call-overload]


def _enum_bounds(kind: type) -> tuple[int, int]:
    return (0, len(list(kind)) - 1)  # type: ignore[arg-type]


_INT_BOUNDS: dict[str, tuple[int, int]] = {
    "tile_m": (1, 1024),
    "tile_n": (1, 1024),
    "tile_k": (1, 1024),
    "wave_m": (1, 16),
    "wave_n": (1, 16),
    "wave_k": (1, 16),
    "warp_tile_m": (1, 128),
    "warp_tile_n": (1, 128),
    "warp_tile_k": (1, 128),
    "vec_a": (1, 64),
    "vec_b": (1, 64),
    "vec_c": (1, 64),
    "num_groups_to_merge": (1, 64),
    "num_wave_groups": (1, 8),
}

GEMM_BOUNDS: dict[str, tuple[int, int]] = {
    f.name: (0, 1) if f.kind is bool else _INT_BOUNDS[f.name] if f.kind is int else _enum_bounds(f.kind)
    for f in GEMM_FIELDS
}
"""Solver domains of the GEMM fields: wide enough for any config a user may ask about."""

DEPTHWISE_BOUNDS: dict[str, tuple[int, int]] = {
    "tile_h": (1, 256),
    "tile_w": (1, 256),
    "filter": (1, 15),
    "stride_h": (1, 8),
    "stride_w": (1, 8),
    "pad_h": (0, 8),
    "pad_w": (0, 8),
    "nbatch": (1, 64),
    "sub_h": (1, 64),
    "sub_w": (1, 64),
    "in_vec": (1, 64),
    "out_vec": (1, 64),
    "block_size": (1, 1024),
    "dilation": (1, 8),
}


def _row_in_domain(names: tuple[str, ...], bounds: Mapping[str, tuple[int, int]], row: Sequence[int]) -> bool:
    """Whether one row holds one plain integer per field, each in its domain: the cheap answer for a
    single config (:meth:`GemmConfig.from_row`); the general check below says what is wrong."""
    return len(row) == len(names) and all(
        type(v) is int and bounds[n][0] <= v <= bounds[n][1] for n, v in zip(names, row, strict=True)
    )


def check_rows(names: tuple[str, ...], bounds: Mapping[str, tuple[int, int]], rows: Sequence[Sequence[int]]) -> None:
    """Refuse (:class:`InvalidInputError`, one line naming the field, the value and its domain) rows
    that are not one plain integer per field of ``names``, each within its domain in ``bounds``. A row
    outside the domains fails far from here (a kernel name indexes the row by field) or, worse, means
    another config (a negative enum code picks a member from the end, 2 reads as true). The checks
    run in C (``map``, ``zip``, ``set``) over all values at once, then in Python over each column's
    few distinct values: a warm listing checks tens of thousands of cached rows this way."""
    if len(rows) == 1 and _row_in_domain(names, bounds, rows[0]):  # a config's own row: the usual case
        return
    lengths = set(map(len, rows)) - {len(names)}
    if lengths:
        raise InvalidInputError(f"a row of {min(lengths)} values; valid: one for each of the {len(names)} fields")
    if not rows:
        return
    if not set(map(type, chain.from_iterable(rows))) <= {int}:
        name, value = next((n, v) for row in rows for n, v in zip(names, row, strict=True) if type(v) is not int)
        raise InvalidInputError(f"{name} {value!r} is not an integer; valid: {int_domain(*bounds[name])}")
    for name, column in zip(names, zip(*rows, strict=True), strict=True):
        low, high = bounds[name]
        outside = [v for v in set(column) if not low <= v <= high]
        if outside:
            raise InvalidInputError(f"{name} {min(outside)} is out of range; valid: {int_domain(low, high)}")


_DEFAULT_ROW: Row = tuple(encode(f, GEMM_DEFAULTS[f]) if f in GEMM_DEFAULTS else 0 for f in GEMM_FIELD_NAMES)
