"""The ``full`` generator: upstream's rule-derived space (``grouped_conv/grouped_config_rules_full.py``
``get_configs``).

Per cell: a base pass over the cell's tile list, then one pass per feature (split-image, merged
groups, two-stage, explicit GEMM, stream-K), each tile crossed with its wave/warp pairs, gated
vector triples, pipelines and specializations, in upstream emission order; the forward variant
adds the depthwise block in 2D. The rule set itself calls ``TileConfig.is_valid`` and
``is_valid_for_arch``; duplicates keep their first occurrence.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from ckspace.constraints.generate.tile_math import structural_pairs, vec_gate, warp_tile_k
from ckspace.core.arch import Triple, arch_facts, element_size
from ckspace.core.cells import Cell
from ckspace.core.fields import DEPTHWISE_DEFAULTS, DEPTHWISE_FIELDS, FIELD_INDEX, Row, default_row, encode, make_row
from ckspace.core.tables import shape_key, table
from ckspace.core.vocab import Dtype, Variant

PipelineList = tuple[tuple[str, str], ...]

_WAVE_M, _WAVE_N, _WAVE_K = FIELD_INDEX["wave_m"], FIELD_INDEX["wave_n"], FIELD_INDEX["wave_k"]
_WARP_M, _WARP_N, _WARP_K = FIELD_INDEX["warp_tile_m"], FIELD_INDEX["warp_tile_n"], FIELD_INDEX["warp_tile_k"]
_VEC_A, _VEC_B, _VEC_C = FIELD_INDEX["vec_a"], FIELD_INDEX["vec_b"], FIELD_INDEX["vec_c"]
_PIPELINE, _SCHEDULER = FIELD_INDEX["pipeline"], FIELD_INDEX["scheduler"]
_DSB, _SPEC = FIELD_INDEX["double_smem_buffer"], FIELD_INDEX["specialization"]


def _t(tile: list[int]) -> Triple:
    return (tile[0], tile[1], tile[2])


@cache
def waves_for(variant: Variant, tile: Triple) -> tuple[Triple, ...]:
    """Curated wave splits of a tile (upstream ``get_wave_strategies``): the variant's override, else the
    base list."""
    f = table("full")
    names = f["wave_strategy_overrides"].get(variant.value, {}).get(shape_key(tile))
    if names is None:
        names = f["base_tile_wave_strategies"].get(shape_key(tile), f["wave_strategy_fallback"])
    return tuple(_t(f["wave_strategy_counts"][n]) for n in names)


def _warp_candidates(variant: Variant, tile: Triple, wave: Triple) -> list[tuple[int, int]]:
    f = table("full")
    for entry in f["warp_mn_exceptions"]:
        if entry["variant"] == variant.value and _t(entry["tile"]) == tile and _t(entry["wave"]) == wave:
            return [(m, n) for m, n in entry["warp_mn"]]
    rule = f["warp_mn_default_rule"]
    per_m, per_n = tile[0] // wave[0], tile[1] // wave[1]
    big, step = rule["large_min_per_wave"], rule["large_multiple_of"]
    if per_m >= big and per_n >= big and per_m % step == 0 and per_n % step == 0:
        return [tuple(rule["large"])]  # type: ignore[list-item]
    return [tuple(rule["small"])]  # type: ignore[list-item]


@cache
def pairs(arch: str, variant: Variant, dtype: Dtype, tile: Triple) -> tuple[tuple[Triple, tuple[int, int]], ...]:
    """Wave / warp (m, n) pairs of a tile (upstream ``get_wave_warp_pairs``), with the structural
    fallback."""
    excluded = {tuple(mn) for mn in table("full")["excluded_warp_mn"]}
    shapes = {(m, n) for m, n, _ in arch_facts(arch).warp_tiles_for(dtype) or ()}
    structural = structural_pairs(arch, dtype, tile)
    allowed = {(wave, (shape[0], shape[1])) for wave, shape in structural}
    chosen: dict[tuple[Triple, tuple[int, int]], None] = {}
    for wave in waves_for(variant, tile):
        for mn in _warp_candidates(variant, tile, wave):
            if mn in excluded or mn not in shapes:
                continue
            if tile[0] % (wave[0] * mn[0]) or tile[1] % (wave[1] * mn[1]):
                continue
            if (wave, mn) in allowed:
                chosen.setdefault((wave, mn), None)
    if chosen:
        return tuple(chosen)
    return tuple((wave, (shape[0], shape[1])) for wave, shape in structural)


@cache
def vec_candidates(variant: Variant, tile: Triple, dtype_class: str) -> tuple[Triple, ...]:
    """Sorted candidate vector triples of a tile: its vector strategies' triples and the extra ones
    (upstream ``get_vec_strategies``, ``compute_vector_size``, ``get_extra_vec_triples``)."""
    f = table("full")
    top = f["max_vec"][dtype_class]
    symbols = {"m": top, "h": max(1, top // 2), "q": max(1, top // 4), "1": 1}
    per_tile = f["tile_vec_strategies"].get(variant.value, {})
    entry = per_tile.get(shape_key(tile))
    strategies = f["tile_vec_strategies_fallback"] if entry is None else entry.get(dtype_class, [])
    triples = {tuple(symbols[s] for s in f["vec_strategy_triples"][name]) for name in strategies}
    extra = f["extra_vec_triples"].get(variant.value, {}).get(shape_key(tile), {}).get(dtype_class, [])
    triples |= {_t(v) for v in extra}
    return tuple(sorted(triples))  # type: ignore[arg-type]


@cache
def pipelines_for(variant: Variant, tile: Triple, dtype_class: str) -> PipelineList:
    """(pipeline, scheduler) list of a tile: the dtype-class override, else the curated per-tile list,
    else the shape rule (``full.json`` ``tile_pipelines_dclass``, ``tile_pipelines``)."""
    f = table("full")
    dclass = f["tile_pipelines_dclass"].get(variant.value, {}).get(shape_key(tile))
    if dclass is not None and dtype_class in dclass:
        return tuple((p, s) for p, s in dclass[dtype_class])
    curated = f["tile_pipelines"].get(variant.value, {}).get(shape_key(tile))
    if curated is not None:
        return tuple((p, s) for p, s in curated)
    return shape_rule_pipelines(variant, tile)


def shape_rule_pipelines(variant: Variant, tile: Triple) -> PipelineList:
    """The pipeline rule for tiles no table lists (upstream's shape-based fallback; no shipped tile
    needs it)."""
    tm, tn, tk = tile
    area = tm * tn
    compv4 = tile in {_t(t) for t in table("full")["shape_rule_compv4_tiles"]} or (area >= 16384 and tk >= 32)
    intra, inter = "intrawave", "interwave"
    out: list[tuple[str, str]] = [("compv1", intra)]
    if variant is Variant.BWD_DATA:
        return tuple(out)
    if variant is Variant.FORWARD:
        if tk >= 32:
            out.append(("compv1", inter))
        if min(tm, tn) <= 32 and tk >= 64:
            out += [("mem", intra), ("mem", inter)]
        if area >= 4096 and tk >= 32:
            out.append(("compv3", intra))
        if compv4:
            out.append(("compv4", intra))
        if area >= 4096 and tk >= 32:
            out.append(("compv6", intra))
        return tuple(out)
    if tk >= 64:
        out.append(("compv1", inter))
    if tk >= 32:
        out.append(("mem", intra))
    if tk >= 64:
        out.append(("mem", inter))
    if area >= 4096 and tk >= 32:
        out.append(("compv3", intra))
    if compv4:
        out.append(("compv4", intra))
    if tk >= 32:
        out.append(("compv6", intra))
    if tk == 64:
        out.append(("basic_async_v1", intra))
    return tuple(out)


def specializations_for(variant: Variant, tile: Triple) -> tuple[str, ...]:
    """Conv specializations emitted for a tile (``full.json`` ``specializations``)."""
    s = table("full")["specializations"][variant.value]
    if variant is not Variant.FORWARD:
        return tuple(s["base"])
    if tile[2] == s["tile_k_default_only"]:
        return tuple(s["default_only"])
    extra = s["small_area_extra"] if tile[0] * tile[1] <= s["small_area_max_mn"] else []
    return tuple(s["base"]) + tuple(extra)


def _feature_flags(feature: dict[str, Any] | None) -> dict[str, int]:
    if feature is None:
        return {}
    streamk = feature["streamk"]
    flags = {
        "split_image": int(feature["split_image"]),
        "explicit_gemm": int(feature["explicit_gemm"]),
        "two_stage": int(feature["two_stage"]),
        "num_groups_to_merge": feature["num_groups_to_merge"],
    }
    if streamk is not None:
        flags.update(
            streamk_enabled=1,
            streamk_persistent=int(streamk["persistent"]),
            streamk_strategy=encode("streamk_strategy", streamk["strategy"]),
        )
    return flags


def _emit(
    arch: str, cell: Cell, tile: Triple, pipelines: PipelineList, feature: dict[str, Any] | None, out: dict[Row, int]
) -> None:
    f = table("full")
    variant, dclass = cell.variant, cell.dtype.dtype_class
    legacy_spec = f["legacy_warp_k"]
    legacy = variant.value == legacy_spec["variant"] and tile in {_t(t) for t in legacy_spec["tiles"]}
    streamk = feature is not None and feature["streamk"] is not None
    skip_explicit = f["feature_skip_pipelines_if_explicit_gemm"] if feature and feature["explicit_gemm"] else []
    feature_dsb = bool(feature and feature["double_smem_buffer"])
    base = make_row(
        default_row(),
        tagged=1,
        tile_m=tile[0],
        tile_n=tile[1],
        tile_k=tile[2],
        epilogue=encode("epilogue", f["epilogue"]),
        **_feature_flags(feature),
    )
    specs = [encode("specialization", s) for s in specializations_for(variant, tile)]
    vecs = vec_candidates(variant, tile, dclass)
    codes = [(p, encode("pipeline", p), encode("scheduler", s)) for p, s in pipelines if p not in skip_explicit]
    row = list(base)  # filled in place: this loop builds most of the space, so it avoids dicts
    for wave, (wm, wn) in pairs(arch, variant, cell.dtype, tile):
        gate = vec_gate(tile, wave, element_size(cell.dtype))
        row[_WAVE_M], row[_WAVE_N], row[_WAVE_K] = wave
        row[_WARP_M], row[_WARP_N] = wm, wn
        for vec in (v for v in vecs if v in gate):
            row[_VEC_A], row[_VEC_B], row[_VEC_C] = vec
            for pipeline, pipeline_code, scheduler_code in codes:
                row[_WARP_K] = warp_tile_k(
                    dclass, wm, tile[2], streamk=streamk, legacy=legacy and pipeline == legacy_spec["pipeline"]
                )
                row[_PIPELINE], row[_SCHEDULER] = pipeline_code, scheduler_code
                row[_DSB] = int(pipeline in f["dsb_pipelines"] or feature_dsb)
                for spec in specs:
                    row[_SPEC] = spec
                    key = tuple(row)
                    out[key] = out.get(key, 0) + 1


def cell_candidates(arch: str, cell: Cell) -> tuple[list[Row], int]:
    """Every GEMM config the tables generate for a cell, deduplicated, in emission order, and how
    many repeats the deduplication dropped."""
    f = table("full")
    variant, dclass = cell.variant, cell.dtype.dtype_class
    out: dict[Row, int] = {}
    tiles = [_t(t) for t in f["base_tiles"].get(variant.value, {}).get(str(cell.ndim), {}).get(cell.dtype.value, [])]
    for tile in tiles:
        _emit(arch, cell, tile, pipelines_for(variant, tile, dclass), None, out)
    for feature in f["features"][variant.value]:
        if feature["dtype_classes"] is not None and dclass not in feature["dtype_classes"]:
            continue
        if feature["ndims"] is not None and cell.ndim not in feature["ndims"]:
            continue
        feature_tiles = tiles if feature["tiles"] is None else [_t(t) for t in feature["tiles"]]
        for tile in feature_tiles:
            override = feature["pipelines"]
            pipes = tuple((p, s) for p, s in override) if override is not None else pipelines_for(variant, tile, dclass)
            _emit(arch, cell, tile, pipes, feature, out)
    return list(out), sum(out.values()) - len(out)


def depthwise_rows(cell: Cell) -> list[Row]:
    """The depthwise block's configs of a forward 2D cell (upstream ``get_depthwise_configs``), in
    parameter order."""
    d = table("depthwise")
    if cell.variant.value != d["variant"] or cell.ndim != d["requires_ndim"]:
        return []
    return [tuple({**p, **DEPTHWISE_DEFAULTS}[name] for name in DEPTHWISE_FIELDS) for p in d["params"]]
