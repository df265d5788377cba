"""The domains of rule set ``open``: for every GEMM field, the values it ranges over in a cell.

``open`` has no proposal table. Each field ranges over the widest set of values that the arch facts
and the tables (hence the CK headers they were read from) make meaningful, stated here as one named
rule per field (predicate ``domain``, reported as the rule set's kind): the count, the listing, the
samples and the CP-SAT models of ``open`` all read these rules, and ``ckspace rules`` prints them
with their words. Validity is then the rules and nothing else.

Where a bound is a choice rather than a fact (the largest block tile), the words say so and the
choice is derived from the tables (twice the largest tile extent upstream curates), so it moves
with them.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import cache
from itertools import chain

from ckspace.constraints.language.expr import Field
from ckspace.constraints.language.rule import TILE, WARP, WAVE, Rule, TableValue, or_words, read
from ckspace.core.arch import element_size
from ckspace.core.cells import Cell
from ckspace.core.fields import GEMM_DEFAULTS, GEMM_FIELD_NAMES, encode
from ckspace.core.vocab import Dtype, Epilogue, Pipeline, Predicate, Scheduler, Specialization, StreamKStrategy, Variant

CONV_CONFIGS = "CK example/ck_tile/20_grouped_convolution/conv_configs.hpp"
FEATURE_FLAGS = ("split_image", "explicit_gemm", "two_stage")


def _tile_extents(axis: int, field: str) -> tuple[tuple[int, ...], TableValue]:
    """Multiples of the smallest curated extent along ``axis`` up to twice the largest, and the
    curated extents they come from."""
    base = read("full", "base_tiles").value
    values = sorted(
        {
            tile[axis]
            for by_ndim in base.values()
            for by_dtype in by_ndim.values()
            for tiles in by_dtype.values()
            for tile in tiles
        }
    )
    step, top = values[0], 2 * values[-1]
    return tuple(range(step, top + 1, step)), TableValue("full.json", f"base_tiles.*.*.*[{field}]", values)


def _projection(triples: list[list[int]], axis: int) -> tuple[int, ...]:
    return tuple(sorted({t[axis] for t in triples}))


Entry = tuple[str, Rule]
"""A field and the rule stating its domain."""


@cache
def domain_rules(arch: str, cell: Cell) -> tuple[Rule, ...]:
    """One rule per GEMM field, in field order: ``field in [values]`` with why those values. A table
    of contents: each family of fields states its domains where its facts come from."""
    rules = dict(
        chain(
            _block_tiles(),
            _wave_counts(arch),
            _warp_tiles(arch, cell.dtype),
            _vector_widths(cell.dtype),
            _vocabulary(),
            _template_flags(),
            _feature_passes(cell.variant),
            _model_choices(),
        )
    )
    if set(rules) != set(GEMM_FIELD_NAMES):
        raise RuntimeError(f"open states no domain for {sorted(set(GEMM_FIELD_NAMES) - set(rules))}")
    return tuple(rules[f] for f in GEMM_FIELD_NAMES)


def _domain(field: str, values: Iterable[object], text: str, source: str, *reads: TableValue) -> Entry:
    """``field`` ranges over ``values`` (encoded, deduplicated, sorted), for the reason ``text``."""
    codes = sorted({encode(field, v) for v in values})
    return field, Rule(f"open_{field}", Predicate.DOMAIN, Field(field).isin(codes), text, source, reads=tuple(reads))


def _block_tiles() -> list[Entry]:
    """tile_m/n/k: a choice derived from the curated tiles (:func:`_tile_extents`)."""
    entries = []
    for axis, field in enumerate(f.name for f in TILE):
        values, curated = _tile_extents(axis, field)
        entries.append(
            _domain(
                field,
                values,
                f"a multiple of {values[0]} from {values[0]} to {values[-1]}: the smallest {field} "
                f"upstream's full tables curate, up to twice the largest (a choice: beyond it the rules still hold "
                f"but no tile is curated)",
                "full.json base_tiles",
                curated,
            )
        )
    return entries


def _wave_counts(arch: str) -> list[Entry]:
    """wave_m/n/k: what the arch's wave combos use."""
    combos = read("arch", "archs", arch, "wave_combos")
    return [
        _domain(
            field,
            values,
            f"{or_words(values)}: a {field} of one of {arch}'s wave combos",
            "arch.json wave_combos (upstream arch_specs_generated.py WARP_SUPPORTED_COMBINATIONS)",
            combos,
        )
        for axis, field in enumerate(f.name for f in WAVE)
        for values in [_projection(combos.value, axis)]
    ]


def _warp_tiles(arch: str, dtype: Dtype) -> list[Entry]:
    """warp_tile_m/n/k: the arch's warp tiles for the dtype, or of any dtype where it has none."""
    tiles = read("arch", "archs", arch, "warp_tiles", dtype.key, default=None)
    every = read("arch", "archs", arch, "warp_tiles")
    source = tiles if tiles.value is not None else every
    shapes = source.value if tiles.value is not None else [t for v in every.value.values() for t in v]
    what = f"{dtype.key} warp tiles" if tiles.value is not None else "warp tiles of any dtype (none for this one)"
    return [
        _domain(
            field,
            values,
            f"{or_words(values)}: a {field} of one of {arch}'s {what}",
            "arch.json warp_tiles (upstream arch_specs_generated.py WARP_TILE_SUPPORTED_COMBINATIONS)",
            source,
        )
        for axis, field in enumerate(f.name for f in WARP)
        for values in [_projection(shapes, axis)]
    ]


def _vector_widths(dtype: Dtype) -> list[Entry]:
    """vec_a/b/c: the full tables' vector gate, cut to the widest access for the dtype."""
    gate = read("full", "vec_gate")
    size = element_size(dtype)
    widths = [v for v in gate.value["widths"] if v * size <= gate.value["max_vec_bytes"]]
    return [
        _domain(
            field,
            widths,
            f"a vector width of {', '.join(map(str, widths))} elements: the widths of the full "
            f"tables' vector gate that fit {gate.value['max_vec_bytes']} B of {dtype.value} ({size} B each)",
            "full.json vec_gate (upstream tile_math.py get_valid_vec_sizes)",
            gate,
        )
        for field in ("vec_a", "vec_b", "vec_c")
    ]


def _vocabulary() -> list[Entry]:
    """Enumerated fields: every value ckspace's vocabulary names."""
    return [
        _domain("pipeline", list(Pipeline), "any block GEMM pipeline ckspace names", "ckspace vocabulary"),
        _domain("scheduler", list(Scheduler), "intrawave or interwave", "ckspace vocabulary"),
        _domain("epilogue", list(Epilogue), "cshuffle or default", "ckspace vocabulary"),
        _domain("specialization", list(Specialization), "any convolution specialization", "ckspace vocabulary"),
        _domain(
            "streamk_strategy", list(StreamKStrategy), "no stream-K, tree or linear reduction", "ckspace vocabulary"
        ),
    ]


def _template_flags() -> list[Entry]:
    """The pads and the double LDS buffer: template flags every pipeline takes."""
    return [
        _domain(
            field,
            (False, True),
            f"{field} on or off: a template flag of every CK Tile GEMM pipeline",
            "ck_tile TileGemmTraits / GemmPipelineProblem",
        )
        for field in ("pad_m", "pad_n", "pad_k", "double_smem_buffer")
    ]


def _feature_passes(variant: Variant) -> list[Entry]:
    """The feature flags and group merging: what upstream's feature passes use for the variant."""
    features = read("full", "features").value
    entries = []
    for field in FEATURE_FLAGS:
        used = sorted({bool(f[field]) for f in features[variant.value]} | {False})
        entries.append(
            _domain(
                field,
                used,
                f"{field} on or off"
                if len(used) > 1
                else f"off: upstream's full tables have no {field} pass for {variant.value}",
                "full.json features",
                TableValue("full.json", f"features.{variant.value}[*].{field}", used),
            )
        )
    merged = {v: sorted({f["num_groups_to_merge"] for f in fs} | {1}) for v, fs in features.items()}
    largest = max(max(values) for values in merged.values())
    merges = len(merged[variant.value]) > 1
    powers = [1 << i for i in range(largest.bit_length())] if merges else [1]
    entries.append(
        _domain(
            "num_groups_to_merge",
            powers,
            f"a power of two up to {largest}, the most groups any of upstream's feature passes merges"
            if merges
            else f"1: upstream's full tables merge no groups for {variant.value}",
            "full.json features",
            TableValue("full.json", "features.*[*].num_groups_to_merge", merged),
        )
    )
    return entries


def _model_choices() -> list[Entry]:
    """Fields of ckspace's model of a config: stream-K, wave groups, the layout string, the tag."""
    layout = GEMM_DEFAULTS["layout"]
    return [
        _domain("streamk_enabled", (False, True), "stream-K on or off", "ckspace model"),
        _domain("streamk_persistent", (False, True), "persistent stream-K on or off", "ckspace model"),
        _domain(
            "num_wave_groups",
            (1, 2),
            "1 or 2 wave groups, the values CK's grouped-convolution example configs use",
            f"{CONV_CONFIGS} 24 and 207",
        ),
        _domain(
            "layout",
            (layout,),
            f"the name's layout string is {layout.value} in every ndim, as upstream writes it",
            "common.json config_defaults.layout",
        ),
        _domain("tagged", (True,), "configs carry their dtype tag (as full's do)", "ckspace model"),
    ]
