"""Tile arithmetic the ``full`` rule set builds on (upstream ``grouped_conv/tile_math.py``).

Pure functions of the tables and the arch facts, cached: the same (tile, wave) questions recur in
every cell.
"""

from __future__ import annotations

from functools import cache

from ckspace.core.arch import Triple, arch_facts
from ckspace.core.tables import table
from ckspace.core.vocab import Dtype


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


@cache
def structural_pairs(arch: str, dtype: Dtype, tile: Triple) -> tuple[tuple[Triple, Triple], ...]:
    """(wave, warp tile) pairs that tile ``tile`` exactly on ``arch`` (``get_valid_wave_warp_pairs``),
    in order."""
    facts = arch_facts(arch)
    waves = set(facts.wave_combos)
    tm, tn, _ = tile
    found: dict[tuple[Triple, Triple], None] = {}
    for shape in facts.warp_tiles_for(dtype) or ():
        wm, wn, _ = shape
        if tm % wm or tn % wn:
            continue
        for iter_m in _divisors(tm // wm):
            wave_m = tm // (wm * iter_m)
            for iter_n in _divisors(tn // wn):
                wave_n = tn // (wn * iter_n)
                for wave_k in (1, 2):
                    if (wave_m, wave_n, wave_k) in waves:
                        found.setdefault(((wave_m, wave_n, wave_k), shape), None)
    return tuple(found)


@cache
def vec_gate(tile: Triple, wave: Triple, size: int) -> frozenset[Triple]:
    """The (vec_a, vec_b, vec_c) triples the tile arithmetic allows (``get_valid_vec_sizes``) for
    elements of ``size`` bytes."""
    gate = table("full")["vec_gate"]
    block = gate["block_warp_size"] * wave[0] * wave[1] * wave[2]
    tm, tn, tk = tile
    if (tm * tk) % block or (tn * tk) % block:
        return frozenset()
    per_a, per_b = tm * tk // block, tn * tk // block
    cap = gate["max_vec_bytes"] // size

    def lds_legal(v: int) -> bool:
        bits = v * size * 8
        return v <= cap and bits <= gate["max_lds_bits"] and bits & (bits - 1) == 0

    widths = [v for v in gate["widths"] if lds_legal(v)]
    va = [v for v in widths if per_a % v == 0 or v % per_a == 0]
    vb = [v for v in widths if per_b % v == 0 or v % per_b == 0]
    vc = [v for v in widths if tn % v == 0]
    return frozenset((a, b, c) for a in va for b in vb for c in vc)


def warp_tile_k(dtype_class: str, warp_m: int, tile_k: int, *, streamk: bool, legacy: bool) -> int:
    """The derived fragment K (``grouped_config_rules_full.py`` ``compute_warp_tile_k``)."""
    p = table("full")["warp_tile_k"]
    which = "if_wtm_32" if warp_m == 32 else "otherwise"
    if streamk or legacy:
        cap = tile_k // p["legacy_float_cap_divisor"] if dtype_class == "float" else tile_k
        return min(p["legacy_k"][which], cap)
    k1 = p["k1_small"] if tile_k <= p["k1_small_max_tile_k"] else p["k1_large"]
    return min(max(k1, p["k_mfma"][dtype_class][which]), tile_k)
