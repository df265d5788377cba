"""The ``default`` generator: upstream's small hand-curated list (RULES.md section 7)."""

from __future__ import annotations

from ckspace.core.fields import Row, default_row, encode, make_row
from ckspace.core.tables import table
from ckspace.core.vocab import Variant


def _key(tile: list[int]) -> str:
    return "x".join(map(str, tile))


def proposals(variant: Variant) -> list[Row]:
    """The untagged configs of one variant, in upstream loop order (pipeline, tile, two_stage)."""
    t = table("default")
    tiles = t["tiles_bwd_weight"] if variant is Variant.BWD_WEIGHT else t["tiles_fwd_bwd_data"]
    compv4 = {_key(tile) for tile in t["compv4_tiles"]}
    base = make_row(default_row(), tagged=0, scheduler=encode("scheduler", t["scheduler"]))
    rows: list[Row] = []
    for pipeline, epilogue in t["variant_pipelines"][variant.value]:
        dsb = pipeline in t["dsb_pipelines"]
        for tile in tiles:
            if pipeline == "compv4" and _key(tile) not in compv4:
                continue
            wave = t["tile_to_wave"][_key(tile)]
            warp = t["tile_to_warp_tile"][_key(tile)]
            tile_k = tile[2] * (t["compv4_tile_k_multiplier"] if pipeline == "compv4" else 1)
            for two_stage in t["two_stage_values"][variant.value]:
                rows.append(make_row(
                    base, tile_m=tile[0], tile_n=tile[1], tile_k=tile_k,
                    wave_m=wave[0], wave_n=wave[1], wave_k=t["forced_wave_k"],
                    warp_tile_m=warp[0], warp_tile_n=warp[1], warp_tile_k=warp[2],
                    pipeline=encode("pipeline", pipeline), epilogue=encode("epilogue", epilogue),
                    double_smem_buffer=int(dsb), two_stage=int(two_stage),
                ))
    return rows
