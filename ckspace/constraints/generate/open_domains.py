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

from functools import cache

from ckspace.constraints.expr import Field
from ckspace.constraints.rule import TILE, WARP, WAVE, Rule, TableValue, or_words, read
from ckspace.core.arch import element_size
from ckspace.core.cells import Cell
from ckspace.core.fields import GEMM_DEFAULTS, GEMM_FIELD_NAMES, encode
from ckspace.core.vocab import (
    Epilogue,
    Pipeline,
    Predicate,
    Scheduler,
    Specialization,
    StreamKStrategy,
)

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


@cache
def domain_rules(arch: str, cell: Cell) -> tuple[Rule, ...]:
    """One rule per GEMM field, in field order: ``field in [values]`` with why those values."""
    variant, dtype = cell.variant, cell.dtype
    rules: dict[str, Rule] = {}

    def add(field: str, values: object, text: str, source: str, *reads: TableValue) -> None:
        codes = sorted({encode(field, v) for v in values})  # type: ignore[attr-defined]
        rules[field] = Rule(
            f"open_{field}", Predicate.DOMAIN, Field(field).isin(codes), text, source, reads=tuple(reads)
        )

    for axis, field in enumerate(f.name for f in TILE):
        values, curated = _tile_extents(axis, field)
        add(
            field,
            values,
            f"a multiple of {values[0]} from {values[0]} to {values[-1]}: the smallest {field} "
            f"upstream's full tables curate, up to twice the largest (a choice: beyond it the rules still hold "
            f"but no tile is curated)",
            "full.json base_tiles",
            curated,
        )
    combos = read("arch", "archs", arch, "wave_combos")
    for axis, field in enumerate(f.name for f in WAVE):
        values = _projection(combos.value, axis)
        add(
            field,
            values,
            f"{or_words(values)}: a {field} of one of {arch}'s wave combos",
            "arch.json wave_combos (upstream arch_specs_generated.py WARP_SUPPORTED_COMBINATIONS)",
            combos,
        )
    tiles = read("arch", "archs", arch, "warp_tiles", dtype.key, default=None)
    every = read("arch", "archs", arch, "warp_tiles")
    source = tiles if tiles.value is not None else every
    shapes = source.value if tiles.value is not None else [t for v in every.value.values() for t in v]
    for axis, field in enumerate(f.name for f in WARP):
        what = f"{dtype.key} warp tiles" if tiles.value is not None else "warp tiles of any dtype (none for this one)"
        values = _projection(shapes, axis)
        add(
            field,
            values,
            f"{or_words(values)}: a {field} of one of {arch}'s {what}",
            "arch.json warp_tiles (upstream arch_specs_generated.py WARP_TILE_SUPPORTED_COMBINATIONS)",
            source,
        )
    gate = read("full", "vec_gate")
    size = element_size(dtype)
    widths = [v for v in gate.value["widths"] if v * size <= gate.value["max_vec_bytes"]]
    for field in ("vec_a", "vec_b", "vec_c"):
        add(
            field,
            widths,
            f"a vector width of {', '.join(map(str, widths))} elements: the widths of the full "
            f"tables' vector gate that fit {gate.value['max_vec_bytes']} B of {dtype.value} ({size} B each)",
            "full.json vec_gate (upstream tile_math.py get_valid_vec_sizes)",
            gate,
        )
    add("pipeline", list(Pipeline), "any block GEMM pipeline ckspace names", "ckspace vocabulary")
    add("scheduler", list(Scheduler), "intrawave or interwave", "ckspace vocabulary")
    add("epilogue", list(Epilogue), "cshuffle or default", "ckspace vocabulary")
    for field in ("pad_m", "pad_n", "pad_k", "double_smem_buffer"):
        add(
            field,
            (False, True),
            f"{field} on or off: a template flag of every CK Tile GEMM pipeline",
            "ck_tile TileGemmTraits / GemmPipelineProblem",
        )
    features = read("full", "features").value
    for field in FEATURE_FLAGS:
        used = sorted({bool(f[field]) for f in features[variant.value]} | {False})
        add(
            field,
            used,
            f"{field} on or off"
            if len(used) > 1
            else f"off: upstream's full tables have no {field} pass for {variant.value}",
            "full.json features",
            TableValue("full.json", f"features.{variant.value}[*].{field}", used),
        )
    merged = {v: sorted({f["num_groups_to_merge"] for f in fs} | {1}) for v, fs in features.items()}
    largest = max(max(values) for values in merged.values())
    merges = len(merged[variant.value]) > 1
    powers = [1 << i for i in range(largest.bit_length())] if merges else [1]
    add(
        "num_groups_to_merge",
        powers,
        f"a power of two up to {largest}, the most groups any of upstream's feature passes merges"
        if merges
        else f"1: upstream's full tables merge no groups for {variant.value}",
        "full.json features",
        TableValue("full.json", "features.*[*].num_groups_to_merge", merged),
    )
    add("specialization", list(Specialization), "any convolution specialization", "ckspace vocabulary")
    add("streamk_enabled", (False, True), "stream-K on or off", "ckspace model")
    add("streamk_strategy", list(StreamKStrategy), "no stream-K, tree or linear reduction", "ckspace vocabulary")
    add("streamk_persistent", (False, True), "persistent stream-K on or off", "ckspace model")
    add(
        "num_wave_groups",
        (1, 2),
        "1 or 2 wave groups, the values CK's grouped-convolution example configs use",
        f"{CONV_CONFIGS} 24 and 207",
    )
    layout = GEMM_DEFAULTS["layout"]
    add(
        "layout",
        (layout,),
        f"the name's layout string is {layout.value} in every ndim, as upstream writes it",
        "common.json config_defaults.layout",
    )
    add("tagged", (True,), "configs carry their dtype tag (as full's do)", "ckspace model")
    if set(rules) != set(GEMM_FIELD_NAMES):
        raise RuntimeError(f"open states no domain for {sorted(set(GEMM_FIELD_NAMES) - set(rules))}")
    return tuple(rules[f] for f in GEMM_FIELD_NAMES)
