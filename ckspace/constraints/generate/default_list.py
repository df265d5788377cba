"""The ``default`` generator: upstream's small hand-curated list (``get_configs`` of
``grouped_config_rules_default.py``; commit in ``default.json``'s ``_source_commits``)."""

from __future__ import annotations

from collections.abc import Sequence

from ckspace.core.errors import InvalidChoiceError
from ckspace.core.fields import GEMM_DEFAULTS, Row, default_row, encode, make_row
from ckspace.core.tables import shape_key, table
from ckspace.core.vocab import Pipeline, Variant


def curated_row(variant: Variant, tile: Sequence[int], pipeline: Pipeline) -> Row:
    """The untagged config the curated list gives ``tile`` (a key of its tile tables) under
    ``pipeline``: the tile's one wave split (wave_k forced) and warp tile, the list's scheduler,
    the LDS ping-pong for its dsb pipelines, the epilogue it pairs with the pipeline for
    ``variant`` (the config default for a pipeline it does not list), config defaults otherwise.
    The tile is taken as is: :func:`proposals` doubles compv4's tile_k itself, and tile-engine
    benchmark names (:mod:`ckspace.space.benchmark_names`) carry the tile already doubled.
    Raises :class:`InvalidChoiceError` for a tile the list does not have."""
    t = table("default")
    key = shape_key(tile)
    if key not in t["tile_to_wave"]:
        raise InvalidChoiceError("default rule set tile", key, t["tile_to_wave"])
    wave = t["tile_to_wave"][key]
    warp = t["tile_to_warp_tile"][key]
    epilogue = dict(t["variant_pipelines"][variant.value]).get(pipeline.value, GEMM_DEFAULTS["epilogue"])
    return make_row(
        default_row(),
        tile_m=tile[0],
        tile_n=tile[1],
        tile_k=tile[2],
        wave_m=wave[0],
        wave_n=wave[1],
        wave_k=t["forced_wave_k"],
        warp_tile_m=warp[0],
        warp_tile_n=warp[1],
        warp_tile_k=warp[2],
        pipeline=pipeline.code,
        epilogue=encode("epilogue", epilogue),
        scheduler=encode("scheduler", t["scheduler"]),
        double_smem_buffer=int(pipeline.value in t["dsb_pipelines"]),
    )


def proposals(variant: Variant) -> list[Row]:
    """The untagged configs of one variant, in upstream loop order (pipeline, tile, two_stage)."""
    t = table("default")
    tiles = t["tiles_bwd_weight"] if variant is Variant.BWD_WEIGHT else t["tiles_fwd_bwd_data"]
    compv4 = {shape_key(tile) for tile in t["compv4_tiles"]}
    rows: list[Row] = []
    for name, _ in t["variant_pipelines"][variant.value]:
        pipeline = Pipeline.parse(name)
        for tile in tiles:
            if pipeline is Pipeline.COMPV4 and shape_key(tile) not in compv4:
                continue
            row = curated_row(variant, tile, pipeline)
            tile_k = tile[2] * (t["compv4_tile_k_multiplier"] if pipeline is Pipeline.COMPV4 else 1)
            rows += [
                make_row(row, tile_k=tile_k, two_stage=int(two_stage))
                for two_stage in t["two_stage_values"][variant.value]
            ]
    return rows
