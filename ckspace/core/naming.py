"""Kernel names: one grammar per kind of name, used both to print rows and to parse names back.

The grammar is upstream's: the GEMM and depthwise names of the dispatcher's code generator
(``unified_grouped_conv_codegen.py``, the ``name()`` of its GEMM and depthwise kernel configs;
commit in ``common.json``'s ``_source_commits``) and the tile-engine benchmark names of
``tile_engine/ops/grouped_conv``. Each kind is written once below as a template whose holes are
config fields, and the suffixes of GEMM names as one table ordered like ``common.json``'s
``name_suffix_order``; tokens come from the enums of :mod:`ckspace.core.vocab` and defaults from
``common.json``'s ``config_defaults``. Parsing exists for user input; a GEMM name carries every
field except the arch and the dtype tag.

Pure Python on purpose: listing names from the cache must not pay for pydantic or numpy.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from functools import cache, cached_property
from itertools import accumulate
from operator import itemgetter
from string import Formatter
from typing import Any, NamedTuple

from ckspace.core.errors import KernelNameError
from ckspace.core.fields import (
    DEPTHWISE_FIELDS,
    DEPTHWISE_KIND,
    DEPTHWISE_LAYOUT,
    FIELD_INDEX,
    FIELD_KIND,
    GEMM_DEFAULTS,
    GEMM_FIELD_NAMES,
    Row,
    default_row,
)
from ckspace.core.tables import table
from ckspace.core.vocab import NDIMS, Dtype, Layout, Variant

_KINDS: dict[str, type] = {**FIELD_KIND, "variant": Variant, "dtype": Dtype, "ndim": int, **DEPTHWISE_KIND}
"""What every field a name can carry holds: the GEMM fields, the cell, the depthwise fields."""

_DEFAULT_ROW = default_row()
"""The config defaults as codes: a suffix without a flag is printed when its fields differ from them."""


class _Hole(NamedTuple):
    """One ``{field}`` of a template: how its token is spelled from the field's code (an enum's
    position, a boolean's 0/1, an integer itself: what rows hold), matched, and read back."""

    field: str
    spell: Callable[[int], str]
    pattern: str
    read: Callable[[str], Any]


def _hole(spec: str, pattern: str, omit_default: bool) -> _Hole:
    """A hole from its template text: ``{field}``, or ``{field.attr}`` for an enum spelled by that
    attribute (``variant.token``). ``{field:regex}`` matches any token of that shape and lets the
    field's vocabulary reject unknown values, naming the valid ones; without it, a hole matches
    exactly the vocabulary (an enum's spellings, ndim's values, digits, 0/1). ``omit_default``
    leaves the default out of an enum's spellings: a suffix is never printed with it."""
    field, _, attr = spec.partition(".")
    kind = _KINDS[field]
    if kind is bool:
        return _Hole(field, "01".__getitem__, pattern or "[01]", lambda t: t == "1")
    if kind is int:
        digits = "|".join(map(str, NDIMS)) if field == "ndim" else r"\d+"
        return _Hole(field, str, pattern or digits, int)
    spellings = tuple(getattr(m, attr or "value") for m in kind)  # type: ignore[attr-defined]
    spelled = {
        t: m
        for t, m in zip(spellings, kind, strict=True)  # type: ignore[call-overload]
        if not (omit_default and m == GEMM_DEFAULTS.get(field))
    }
    strict = "|".join(re.escape(t) for t in sorted(spelled, key=len, reverse=True))
    return _Hole(field, spellings.__getitem__, pattern or strict, kind.parse if pattern else spelled.__getitem__)  # type: ignore[attr-defined]


class _Template:
    """A name pattern with ``{field}`` holes (see :func:`_hole`), compiled once for both
    directions: printing fills the holes, parsing matches the regex and reads the tokens."""

    def __init__(self, text: str, omit_default: bool = False) -> None:
        self.parts = [
            (literal, _hole(spec, pattern, omit_default) if spec is not None else None)
            for literal, spec, pattern, _ in Formatter().parse(text)
        ]
        self.holes = tuple(h for _, h in self.parts if h is not None)
        self.prefix = self.parts[0][0]
        self.regex = "".join(
            re.escape(literal) + (f"(?P<{h.field}>{h.pattern})" if h else "") for literal, h in self.parts
        )

    def bind(self, codes: Mapping[str, int], open_fields: tuple[str, ...] = ()) -> str:
        """The text with every hole spelled from its code, except the holes of ``open_fields``,
        which become ``%s`` for a later ``text % row[:n]`` (see :func:`_leading_fields`)."""
        return "".join(
            literal.replace("%", "%%")
            + ("" if h is None else "%s" if h.field in open_fields else h.spell(codes[h.field]).replace("%", "%%"))
            for literal, h in self.parts
        )

    @cached_property
    def pattern(self) -> re.Pattern[str]:
        """Compiled on first use: listing names never parses, and the CLI starts faster without."""
        return re.compile(self.regex)

    def read(self, groups: Mapping[str, str | None]) -> dict[str, Any]:
        """The field values of matched tokens; a hole of an absent suffix reads as the config default."""
        values: dict[str, Any] = {}
        for hole in self.holes:
            token = groups[hole.field]
            values[hole.field] = GEMM_DEFAULTS[hole.field] if token is None else hole.read(token)
        return values


class _Suffix(NamedTuple):
    """An optional part of a GEMM name. With a ``flag`` (a boolean field) it is printed exactly
    when the flag is set; without, exactly when one of its fields differs from its config default.
    Absent on parse means the flag is unset and the fields keep their defaults. ``inner``
    suffixes can only follow this one (``_persistent`` only after ``_streamk_<strategy>``)."""

    key: str
    template: _Template
    flag: str | None = None
    inner: tuple[_Suffix, ...] = ()

    @property
    def fields(self) -> tuple[str, ...]:
        """The row fields this suffix decides, its inner suffixes' included."""
        own = (self.flag,) if self.flag else ()
        return own + tuple(h.field for h in self.template.holes) + tuple(f for s in self.inner for f in s.fields)

    def text(self, codes: Mapping[str, int]) -> str:
        """This suffix of a row given as field codes: empty unless its flag is set or its fields differ
        from the defaults."""
        present = (
            codes[self.flag]
            if self.flag
            else any(codes[h.field] != _DEFAULT_ROW[FIELD_INDEX[h.field]] for h in self.template.holes)
        )
        return self.template.bind(codes) + "".join(s.text(codes) for s in self.inner) if present else ""

    @property
    def regex(self) -> str:
        body = self.template.regex + "".join(s.regex for s in self.inner)
        return f"(?P<{self.flag}>{body})?" if self.flag else f"(?:{body})?"

    def read(self, groups: Mapping[str, str | None]) -> dict[str, Any]:
        values = {self.flag: groups[self.flag] is not None} if self.flag else {}
        values.update(self.template.read(groups))
        for inner in self.inner:
            values.update(inner.read(groups))
        return values


def _suffix(key: str, template: str, flag: str | None = None, inner: tuple[_Suffix, ...] = ()) -> _Suffix:
    return _Suffix(key, _Template(template, omit_default=True), flag, inner)


def _in_table_order(suffixes: tuple[_Suffix, ...]) -> tuple[_Suffix, ...]:
    """The suffixes in ``common.json``'s ``name_suffix_order``, which must name each exactly once."""
    by_key = {s.key: s for s in suffixes}
    order = table("common")["name_suffix_order"]
    if sorted(order) != sorted(by_key):
        raise RuntimeError(f"common.json name_suffix_order {order} does not list the suffixes {sorted(by_key)}")
    return tuple(by_key[key] for key in order)


_GEMM_HEAD = _Template(
    "grouped_conv_{variant.token}_{dtype:[a-z0-9]+}_{layout:[a-z]+}_{ndim:\\d}d"
    "_{pipeline}_{epilogue}_{scheduler}_{tile_m}x{tile_n}x{tile_k}_{wave_m}x{wave_n}x{wave_k}"
    "_{warp_tile_m}x{warp_tile_n}x{warp_tile_k}"
)

SUFFIXES: tuple[_Suffix, ...] = _in_table_order(
    (
        _suffix("vec", "_vec{vec_a}_{vec_b}_{vec_c}"),
        _suffix("wg", "_wg{num_wave_groups}"),
        _suffix("gm", "_gm{num_groups_to_merge}"),
        _suffix("dsb", "_dsb", flag="double_smem_buffer"),
        _suffix("2stage", "_2stage", flag="two_stage"),
        _suffix("specialization", "_{specialization}"),
        _suffix("explicit_gemm", "_explicit_gemm", flag="explicit_gemm"),
        _suffix(
            "streamk",
            "_streamk_{streamk_strategy}",
            flag="streamk_enabled",
            inner=(_suffix("persistent", "_persistent", flag="streamk_persistent"),),
        ),
        _suffix("large_tensor", "_large_tensor", flag="split_image"),
        _suffix("pad", "_pad{pad_m}{pad_n}{pad_k}"),
    )
)
"""The optional GEMM-name suffixes, in upstream's order."""

_DEPTHWISE = _Template(
    "grouped_conv_" + Variant.FORWARD.token + "_depthwise_{dtype:[a-z0-9]+}_{layout:[a-z]+}_{ndim:\\d}d"
    "_{tile_h}x{tile_w}_f{filter}_s{stride_h}x{stride_w}_p{pad_h}x{pad_w}_nb{nbatch}_sub{sub_h}x{sub_w}"
    "_vec{in_vec}_{out_vec}"
)

_BENCHMARK = _Template("grouped_conv_{variant}_{dtype}_{ndim}d_{tile_m}x{tile_n}x{tile_k}_{pipeline:[a-z0-9_]+}")
"""Tile-engine benchmark names: the variant spelled in full, the block tile, the pipeline."""

# -- printing ---------------------------------------------------------------------------------------
# A name is on the hot path of listings, so printing is memoized: the head as a %-format per cell and
# per value of its enums, applied to its integers (the row's first fields); the run of suffixes per
# value of their fields, built from each suffix memoized apart. A listing has few distinct keys (for
# the 15,657 proposals of an arch, about 120 heads and 400 suffix runs), so a name costs two lookups
# and one format.


def _leading_fields(template: _Template, row_fields: tuple[str, ...]) -> tuple[str, ...]:
    """The integer holes of ``template`` that a row holds. They must be the row's first fields, in
    the template's order, so that a name is its memoized format applied to ``row[:n]``."""
    fields = tuple(h.field for h in template.holes if h.field in row_fields and _KINDS[h.field] is int)
    if fields != row_fields[: len(fields)]:
        raise RuntimeError(f"the integers {fields} of a name template are not the first fields of its row")
    return fields


_GEMM_OPEN = _leading_fields(_GEMM_HEAD, GEMM_FIELD_NAMES)
_N_OPEN = len(_GEMM_OPEN)
_HEAD_KEYED = tuple(h.field for h in _GEMM_HEAD.holes if h.field in FIELD_INDEX and h.field not in _GEMM_OPEN)
_head_key = itemgetter(*(FIELD_INDEX[f] for f in _HEAD_KEYED))
_suffix_key = itemgetter(*(FIELD_INDEX[f] for s in SUFFIXES for f in s.fields))
_SUFFIX_PARTS = tuple(
    slice(end - len(s.fields), end)
    for s, end in zip(SUFFIXES, accumulate(len(s.fields) for s in SUFFIXES), strict=True)
)
"""Where each suffix's fields lie in a suffix key."""


@cache
def _head_format(variant: Variant, dtype: Dtype, ndim: int, codes: Row) -> str:
    cell = {"variant": variant.code, "dtype": dtype.code, "ndim": ndim}
    return _GEMM_HEAD.bind({**cell, **dict(zip(_HEAD_KEYED, codes, strict=True))}, _GEMM_OPEN)


@cache
def _suffixes(codes: Row) -> str:
    return "".join([_suffix_text(i, codes[part]) for i, part in enumerate(_SUFFIX_PARTS)])


@cache
def _suffix_text(i: int, codes: Row) -> str:
    return SUFFIXES[i].text(dict(zip(SUFFIXES[i].fields, codes, strict=True)))


def gemm_name(variant: Variant, dtype: Dtype, ndim: int, row: Row) -> str:
    """The upstream kernel name of a row: the head, then the suffixes that differ from defaults."""
    return _head_format(variant, dtype, ndim, _head_key(row)) % row[:_N_OPEN] + _suffixes(_suffix_key(row))


_DEPTHWISE_OPEN = _leading_fields(_DEPTHWISE, DEPTHWISE_FIELDS)


@cache
def _depthwise_format(dtype: Dtype, ndim: int, layout: Layout) -> str:
    return _DEPTHWISE.bind({"dtype": dtype.code, "ndim": ndim, "layout": layout.code}, _DEPTHWISE_OPEN)


def depthwise_name(dtype: Dtype, ndim: int, row: Row, layout: Layout = DEPTHWISE_LAYOUT) -> str:
    """Name of a depthwise config given as a row in DEPTHWISE_FIELDS order."""
    return _depthwise_format(dtype, ndim, layout) % row[: len(_DEPTHWISE_OPEN)]


# -- parsing ----------------------------------------------------------------------------------------


@cache
def _gemm_pattern() -> re.Pattern[str]:
    """The head, then every suffix optional, in order (compiled on first use, see
    :attr:`_Template.pattern`)."""
    return re.compile(_GEMM_HEAD.regex + "".join(s.regex for s in SUFFIXES))


def parse_gemm_name(name: str) -> dict[str, Any]:
    """The fields a GEMM kernel name carries (everything but arch and tag)."""
    match = _gemm_pattern().fullmatch(name.strip())
    if match is None:
        raise KernelNameError(
            f"not a ckspace/upstream kernel name: {name!r} (expected grouped_conv_<variant>_<dtype>_"
            "<layout>_<n>d_<pipeline>_<epilogue>_<scheduler>_<tile>_<wave>_<warp tile>[_suffixes])"
        )
    groups = match.groupdict()
    values = _GEMM_HEAD.read(groups)
    for suffix in SUFFIXES:
        values.update(suffix.read(groups))
    return values


def is_depthwise_name(name: str) -> bool:
    """Whether ``name`` starts like a depthwise kernel name (then it is parsed as one)."""
    return name.strip().startswith(_DEPTHWISE.prefix)


def parse_depthwise_name(name: str) -> dict[str, Any]:
    """The fields a depthwise kernel name carries (block size and dilation are not in it)."""
    match = _DEPTHWISE.pattern.fullmatch(name.strip())
    if match is None:
        raise KernelNameError(f"not a depthwise kernel name: {name!r}")
    return _DEPTHWISE.read(match.groupdict())


def parse_kernel_name(name: str) -> dict[str, Any]:
    """The fields of a GEMM or a depthwise kernel name."""
    return parse_depthwise_name(name) if is_depthwise_name(name) else parse_gemm_name(name)


def is_benchmark_name(name: str) -> bool:
    """Whether ``name`` follows the tile-engine benchmark scheme (tile and pipeline only)."""
    return _BENCHMARK.pattern.fullmatch(name) is not None


def parse_benchmark_name(name: str) -> dict[str, Any]:
    """The fields a tile-engine benchmark name carries: variant, dtype, ndim, block tile, pipeline."""
    match = _BENCHMARK.pattern.fullmatch(name)
    if match is None:
        raise KernelNameError(
            f"{name!r} is not a tile-engine benchmark kernel name "
            "(grouped_conv_<variant>_<dtype>_<n>d_<M>x<N>x<K>_<pipeline>)"
        )
    return _BENCHMARK.read(match.groupdict())
