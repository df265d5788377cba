"""Plain nested-loop enumerator of the upstream grouped-convolution config rules.

Two uses: an independent second statement of the rule sets, which the tests compare with ckspace
name for name on every arch (``tests/test_other_archs.py``, ``tests/test_properties.py``), and the
*baseline* ``bench/enumerate.py`` times ckspace's listing against. ckspace lists a cell by walking
the rule set's tables and classifying the proposals in bulk on numpy columns
(``ckspace/constraints/evaluators/classify.py``; CP-SAT answers membership, blame and partial configs, not
listings); this module walks the same tables in plain loops and checks each config with ``if``s.
It deliberately imports nothing from ``ckspace``: it is a standalone, loops-and-filters generator
in the style of the upstream dispatcher code generator, written from upstream's rule files and
driven by the JSON rule tables shipped in ``ckspace/data/tables``, under the rules revision the
oracle fixtures pin (``7cd53015``: an LDS budget per pipeline).

Implemented (the rule names are those of ``docs/rules.md``, the quirk ids those of its table of
upstream quirks):

* validity predicates: the trait check (``trait_combo``), tile divisibility
  (``tile_divisibility``), ``is_valid_for_arch`` (including the untagged/"float" WMMA quirk, 14.3)
  and ``is_config_valid`` (wave_k forced to 1, quirk 14.2; warning-only missing warp-tile tables,
  quirk 14.4; LDS limit by pipeline, quirk 14.5);
* rule sets ``default``, ``full``, ``full-tests`` and ``tiny``;
* upstream ``generate_all``'s sampling over the whole request, and kernel names.

Public entry point: :func:`enumerate_request`.

CLI::

    python tests/nested_loop.py --arch gfx942 --rule-set full
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

TABLES_DIR = Path(__file__).resolve().parents[1] / "ckspace" / "data" / "tables"

RULE_SETS = ("default", "full", "full-tests", "tiny")

Tile = tuple[int, int, int]
Wave = tuple[int, int, int]
Vec = tuple[int, int, int]
PipeSched = tuple[str, str]
Cell = tuple[str, int, str]


# --------------------------------------------------------------------------------------
# Tables
# --------------------------------------------------------------------------------------


def _tile_key(tile: Iterable[int]) -> str:
    """Return the ``"MxNxK"`` key used by the JSON tables for a tile."""
    return "x".join(str(int(x)) for x in tile)


class Tables:
    """The JSON rule tables, loaded once and reshaped into lookup-friendly forms."""

    def __init__(self, tables_dir: Path = TABLES_DIR) -> None:
        def load(name: str) -> dict[str, Any]:
            with open(tables_dir / f"{name}.json", encoding="utf-8") as fh:
                return json.load(fh)

        self.arch_raw = load("arch")
        self.common = load("common")
        self.default = load("default")
        self.full = load("full")
        self.validity = load("validity")
        self.depthwise = load("depthwise")
        self.sampling = load("sampling")

        # ---- arch facts (arch.json)
        rule = self.arch_raw["warp_size_rule"]
        self.warp_prefix: str = rule["prefix"]
        self.warp_if_prefix: int = rule["warp_size_if_prefix"]
        self.warp_otherwise: int = rule["warp_size_otherwise"]
        self.arch_waves: dict[str, list[Wave]] = {}
        self.arch_wave_set: dict[str, frozenset[Wave]] = {}
        self.arch_warp_tiles: dict[str, dict[str, list[Tile]]] = {}
        self.arch_warp_tile_set: dict[str, dict[str, frozenset[Tile]]] = {}
        for arch, facts in self.arch_raw["archs"].items():
            waves = [tuple(w) for w in facts["wave_combos"]]
            self.arch_waves[arch] = waves  # type: ignore[assignment]
            self.arch_wave_set[arch] = frozenset(waves)  # type: ignore[arg-type]
            wt = {k: [tuple(t) for t in v] for k, v in facts["warp_tiles"].items()}
            self.arch_warp_tiles[arch] = wt  # type: ignore[assignment]
            self.arch_warp_tile_set[arch] = {k: frozenset(v) for k, v in wt.items()}  # type: ignore[misc]
        lds = self.arch_raw["lds_limit_bytes_by_pipeline"]
        self.lds_limits: dict[str, int] = {k: v for k, v in lds.items() if k != "default"}
        self.lds_default: int = lds["default"]
        self.elem_size: dict[str, int] = dict(self.arch_raw["element_size_bytes"])
        self.dtype_key: dict[str, str] = dict(self.arch_raw["dtype_key"])
        self.arch_unsupported_traits: frozenset[tuple[str, str, str]] = frozenset(
            tuple(c)
            for c in self.arch_raw["trait_unsupported_combos"]  # type: ignore[misc]
        )

        # ---- validity parameters (validity.json)
        self.trait_invalid: frozenset[tuple[str, str, str]] = frozenset(
            tuple(c)
            for c in self.validity["trait_invalid_combos"]  # type: ignore[misc]
        )
        via = self.validity["is_valid_for_arch"]
        self.streamk_variants = frozenset(via["streamk_variants"])
        self.blocked_pipelines: dict[str, frozenset[str]] = {
            k: frozenset(v) for k, v in via["blocked_pipelines_by_variant"].items()
        }
        wmma = via["wmma"]
        self.wmma_warp_size: int = wmma["applies_to_warp_size"]
        self.wmma_min_k: int = wmma["min_warp_tile_k_unless_float"]
        self.wmma_exempt_dtype: str = wmma["exempt_dtype"]
        self.wmma_untagged_dtype: str = wmma["untagged_dtype"]
        self.wmma_forbidden_wtm = frozenset(wmma["forbidden_warp_tile_m"])
        self.coverage_pipelines = frozenset(via["tile_coverage_pipelines"])
        self.streamk_forbidden_ws: int = via["streamk_forbidden_warp_size"]
        icv = self.validity["is_config_valid"]
        self.op_min_tile: dict[str, Tile] = {
            v: tuple(o["min_tile"])
            for v, o in icv["operators"].items()  # type: ignore[misc]
        }
        self.op_align: dict[str, Tile] = {
            v: tuple(o["tile_alignment"])
            for v, o in icv["operators"].items()  # type: ignore[misc]
        }
        self.icv_forced_wave_k: int = icv["forced_wave_k"]
        self.backward_variants = frozenset(icv["backward_variants"])
        self.backward_pipelines = frozenset(icv["backward_allowed_pipelines"])

        # ---- naming / defaults (common.json)
        self.variant_token: dict[str, str] = dict(self.common["variant_token"])
        defaults = self.common["config_defaults"]
        self.default_vec: Vec = tuple(defaults["vec"])  # type: ignore[assignment]
        self.default_layout: str = defaults["layout"]
        self.streamk_token: dict[str, str] = dict(self.common["streamk_strategy_token"])

        # ---- full rule set (full.json)
        f = self.full
        self.dtype_class: dict[str, str] = dict(f["dtype_class"])
        self.base_tiles: dict[str, dict[int, dict[str, list[Tile]]]] = {
            v: {
                int(nd): {dt: [tuple(t) for t in tl] for dt, tl in per_dt.items()}  # type: ignore[misc]
                for nd, per_dt in per_nd.items()
            }
            for v, per_nd in f["base_tiles"].items()
        }
        counts = {k: tuple(v) for k, v in f["wave_strategy_counts"].items()}
        self.base_waves: dict[str, list[Wave]] = {
            t: [counts[s] for s in strats]
            for t, strats in f["base_tile_wave_strategies"].items()  # type: ignore[misc]
        }
        self.wave_overrides: dict[str, dict[str, list[Wave]]] = {
            v: {t: [counts[s] for s in strats] for t, strats in per.items()}  # type: ignore[misc]
            for v, per in f["wave_strategy_overrides"].items()
        }
        self.wave_fallback: list[Wave] = [counts[s] for s in f["wave_strategy_fallback"]]  # type: ignore[misc]
        wr = f["warp_mn_default_rule"]
        self.warp_large: tuple[int, int] = tuple(wr["large"])  # type: ignore[assignment]
        self.warp_small: tuple[int, int] = tuple(wr["small"])  # type: ignore[assignment]
        self.warp_large_min: int = wr["large_min_per_wave"]
        self.warp_large_mult: int = wr["large_multiple_of"]
        self.warp_exceptions: dict[tuple[str, Tile, Wave], list[tuple[int, int]]] = {
            (e["variant"], tuple(e["tile"]), tuple(e["wave"])): [tuple(w) for w in e["warp_mn"]]  # type: ignore[misc]
            for e in f["warp_mn_exceptions"]
        }
        self.excluded_warp_mn = frozenset(tuple(x) for x in f["excluded_warp_mn"])
        self.wtk = f["warp_tile_k"]
        lw = f["legacy_warp_k"]
        self.legacy_variant: str = lw["variant"]
        self.legacy_pipeline: str = lw["pipeline"]
        self.legacy_tiles = frozenset(tuple(t) for t in lw["tiles"])
        vg = f["vec_gate"]
        self.gate_warp: int = vg["block_warp_size"]
        self.gate_widths: list[int] = list(vg["widths"])
        self.gate_max_vec_bytes: int = vg["max_vec_bytes"]
        self.gate_max_lds_bits: int = vg["max_lds_bits"]
        self.max_vec: dict[str, int] = dict(f["max_vec"])
        self.vec_strategy_triples: dict[str, list[str]] = f["vec_strategy_triples"]
        self.tile_vec_strategies: dict[str, dict[str, dict[str, list[str]]]] = f["tile_vec_strategies"]
        self.tile_vec_fallback: list[str] = f["tile_vec_strategies_fallback"]
        self.extra_vec: dict[str, dict[str, dict[str, list[list[int]]]]] = f["extra_vec_triples"]
        self.tile_pipelines: dict[str, dict[str, list[PipeSched]]] = {
            v: {t: [tuple(p) for p in pl] for t, pl in per.items()}  # type: ignore[misc]
            for v, per in f["tile_pipelines"].items()
        }
        self.tile_pipelines_dclass: dict[str, dict[str, dict[str, list[PipeSched]]]] = {
            v: {
                t: {c: [tuple(p) for p in pl] for c, pl in per_c.items()}  # type: ignore[misc]
                for t, per_c in per.items()
            }
            for v, per in f["tile_pipelines_dclass"].items()
        }
        self.shape_compv4_tiles = frozenset(tuple(t) for t in f["shape_rule_compv4_tiles"])
        self.specializations = f["specializations"]
        self.features: dict[str, list[dict[str, Any]]] = f["features"]
        self.skip_if_explicit = frozenset(f["feature_skip_pipelines_if_explicit_gemm"])
        self.full_dsb_pipelines = frozenset(f["dsb_pipelines"])
        self.full_epilogue: str = f["epilogue"]

        # ---- default rule set (default.json)
        d = self.default
        self.def_tiles: dict[str, list[Tile]] = {
            "forward": [tuple(t) for t in d["tiles_fwd_bwd_data"]],  # type: ignore[misc]
            "bwd_data": [tuple(t) for t in d["tiles_fwd_bwd_data"]],  # type: ignore[misc]
            "bwd_weight": [tuple(t) for t in d["tiles_bwd_weight"]],  # type: ignore[misc]
        }
        self.def_wave: dict[str, Wave] = {k: tuple(v) for k, v in d["tile_to_wave"].items()}  # type: ignore[misc]
        self.def_warp: dict[str, Tile] = {k: tuple(v) for k, v in d["tile_to_warp_tile"].items()}  # type: ignore[misc]
        self.def_compv4_tiles = frozenset(tuple(t) for t in d["compv4_tiles"])
        self.def_compv4_mult: int = d["compv4_tile_k_multiplier"]
        self.def_dsb_pipelines = frozenset(d["dsb_pipelines"])
        self.def_forced_wave_k: int = d["forced_wave_k"]
        self.def_scheduler: str = d["scheduler"]
        self.def_variant_pipelines: dict[str, list[tuple[str, str]]] = {
            v: [tuple(p) for p in pl]
            for v, pl in d["variant_pipelines"].items()  # type: ignore[misc]
        }
        self.def_two_stage: dict[str, list[bool]] = d["two_stage_values"]

        # ---- depthwise block (depthwise.json)
        dw = self.depthwise
        self.dw_variant: str = dw["variant"]
        self.dw_requires_ndim: int = dw["requires_ndim"]
        self.dw_ndim: int = dw["ndim"]
        self.dw_layout: str = dw["layout"]
        self.dw_default_dtypes: list[str] = dw["default_dtypes_if_none_requested"]
        self.dw_params: list[dict[str, int]] = dw["params"]

        # ---- sampling (sampling.json)
        ft = self.sampling["full_tests"]
        self.ft_untagged: str = ft["untagged_dtype"]
        self.ft_stride: int = ft["stride"]
        self.tiny_min: int = self.sampling["tiny"]["min_count"]

    def warp_size(self, arch: str) -> int:
        """Warp size used by the validity rules: 64 for ``gfx9*`` archs, else 32."""
        return self.warp_if_prefix if arch.startswith(self.warp_prefix) else self.warp_otherwise

    def lds_limit(self, pipeline: str) -> int:
        """Per-pipeline LDS limit in bytes (arch.json), ``default`` for unlisted pipelines."""
        return self.lds_limits.get(pipeline, self.lds_default)


@lru_cache(maxsize=1)
def load_tables() -> Tables:
    """Load (once) and return the rule tables."""
    return Tables()


# --------------------------------------------------------------------------------------
# Config records
# --------------------------------------------------------------------------------------


@dataclass(slots=True)
class GemmConfig:
    """A GEMM-style grouped-conv kernel configuration (upstream GroupedConvKernelConfig)."""

    variant: str
    ndim: int
    tile: Tile
    wave: Wave
    warp: Tile
    pipeline: str
    scheduler: str
    epilogue: str
    vec: Vec
    dsb: bool = False
    two_stage: bool = False
    explicit_gemm: bool = False
    split_image: bool = False
    groups_to_merge: int = 1
    specialization: str = "default"
    streamk: bool = False
    streamk_persistent: bool = False
    streamk_strategy: str = "TREE"
    datatype: str | None = None
    layout: str = "nhwgc"
    num_wave_groups: int = 1
    pads: tuple[bool, bool, bool] = (True, True, True)


@dataclass(slots=True)
class DepthwiseConfig:
    """A depthwise forward convolution configuration (``full``'s depthwise block)."""

    datatype: str
    params: dict[str, int]
    ndim: int
    layout: str
    variant: str = "forward"


AnyConfig = GemmConfig | DepthwiseConfig


# --------------------------------------------------------------------------------------
# Validity predicates (their rules: docs/rules.md)
# --------------------------------------------------------------------------------------


def is_trait_valid(t: Tables, pipeline: str, epilogue: str, scheduler: str) -> bool:
    """The trait check (``trait_combo``): interwave is invalid with the compute/async pipelines."""
    return (pipeline, epilogue, scheduler) not in t.trait_invalid


def tile_divisible(tile: Tile, wave: Wave, warp: Tile) -> bool:
    """Tile divisibility (``TileConfig.is_valid``): positive tile and wave·warp divides the tile."""
    tm, tn, tk = tile
    if tm <= 0 or tn <= 0 or tk <= 0:
        return False
    dm, dn, dk = wave[0] * warp[0], wave[1] * warp[1], wave[2] * warp[2]
    if dm <= 0 or dn <= 0 or dk <= 0:
        return False
    return tm % dm == 0 and tn % dn == 0 and tk % dk == 0


def is_valid_for_arch(t: Tables, cfg: GemmConfig, arch: str) -> bool:
    """``GroupedConvKernelConfig.is_valid_for_arch``."""
    if not is_trait_valid(t, cfg.pipeline, cfg.epilogue, cfg.scheduler):
        return False
    if cfg.streamk and cfg.variant not in t.streamk_variants:
        return False
    if cfg.pipeline in t.blocked_pipelines.get(cfg.variant, ()):
        return False
    for v in cfg.vec:
        if v != 1 and v % 2 != 0:
            return False
    waves = t.arch_wave_set.get(arch)
    if waves is None or cfg.wave not in waves:
        return False
    ws = t.warp_size(arch)
    tm, tn, tk = cfg.tile
    wm, wn, wk = cfg.wave
    if ws == t.wmma_warp_size:
        dtype = cfg.datatype if cfg.datatype is not None else t.wmma_untagged_dtype
        if cfg.warp[2] < t.wmma_min_k and dtype != t.wmma_exempt_dtype:
            return False
        if wk * cfg.warp[2] > tk:
            return False
        if cfg.warp[0] in t.wmma_forbidden_wtm:
            return False
    if cfg.pipeline in t.coverage_pipelines:
        block = ws * wm * wn * wk
        if (tm * tk) // (block * cfg.vec[0]) < 1 or (tn * tk) // (block * cfg.vec[1]) < 1:
            return False
    return not (ws == t.streamk_forbidden_ws and cfg.streamk)


def is_config_valid(t: Tables, cfg: GemmConfig, dtype: str, arch: str) -> bool:
    """``is_config_valid``: ``ArchFilter(arch, strict_mode=False).is_kernel_valid``.

    wave_k is forced to 1; a missing warp-tile table (or dtype key) and a missing
    wave list only warn, so they pass.
    """
    tm, tn, tk = cfg.tile
    wm, wn, _real_wk = cfg.wave
    wk = t.icv_forced_wave_k
    wtm, wtn, wtk = cfg.warp
    # 1. operator limits
    mins = t.op_min_tile[cfg.variant]
    align = t.op_align[cfg.variant]
    for dim, lo, al in zip((tm, tn, tk), mins, align, strict=True):
        if dim < lo or dim % al != 0:
            return False
    # 2. positivity and fit
    if min(tm, tn, tk, wm, wn, wk, wtm, wtn, wtk) <= 0:
        return False
    if wm * wtm > tm or wn * wtn > tn or wk * wtk > tk:
        return False
    # 3. wave list (warning only when the arch has no list)
    waves = t.arch_wave_set.get(arch)
    if waves is not None and (wm, wn, wk) not in waves:
        return False
    # 4. warp-tile list (warning only when the table / dtype key is missing)
    tables = t.arch_warp_tile_set.get(arch)
    if tables is not None:
        allowed = tables.get(t.dtype_key.get(dtype, f"{dtype}_{dtype}_fp32"))
        if allowed is not None and cfg.warp not in allowed:
            return False
    # 5. trait
    if cfg.variant in t.backward_variants and cfg.pipeline not in t.backward_pipelines:
        return False
    if (cfg.pipeline, cfg.epilogue, cfg.scheduler) in t.arch_unsupported_traits:
        return False
    # 6. LDS
    if (tm + tn) * tk * t.elem_size[dtype] > t.lds_limit(cfg.pipeline):
        return False
    # 7. alignment
    return tm % (wm * wtm) == 0 and tn % (wn * wtn) == 0 and tk % (wk * wtk) == 0


# --------------------------------------------------------------------------------------
# Names (the grammar of ckspace/core/naming.py)
# --------------------------------------------------------------------------------------


def kernel_name(t: Tables, cfg: GemmConfig, dtype: str) -> str:
    """Kernel name of a GEMM config for ``dtype``."""
    tm, tn, tk = cfg.tile
    wm, wn, wk = cfg.wave
    a, b, c = cfg.warp
    parts = [
        f"grouped_conv_{t.variant_token[cfg.variant]}_{dtype}_{cfg.layout.lower()}_{cfg.ndim}d_"
        f"{cfg.pipeline}_{cfg.epilogue}_{cfg.scheduler}_{tm}x{tn}x{tk}_{wm}x{wn}x{wk}_{a}x{b}x{c}"
    ]
    if cfg.vec != t.default_vec:
        parts.append(f"_vec{cfg.vec[0]}_{cfg.vec[1]}_{cfg.vec[2]}")
    if cfg.num_wave_groups != 1:
        parts.append(f"_wg{cfg.num_wave_groups}")
    if cfg.groups_to_merge != 1:
        parts.append(f"_gm{cfg.groups_to_merge}")
    if cfg.dsb:
        parts.append("_dsb")
    if cfg.two_stage:
        parts.append("_2stage")
    if cfg.specialization != "default":
        parts.append(f"_{cfg.specialization}")
    if cfg.explicit_gemm:
        parts.append("_explicit_gemm")
    if cfg.streamk:
        parts.append(f"_streamk_{t.streamk_token.get(cfg.streamk_strategy, cfg.streamk_strategy.lower())}")
        if cfg.streamk_persistent:
            parts.append("_persistent")
    if cfg.split_image:
        parts.append("_large_tensor")
    if not all(cfg.pads):
        parts.append("_pad" + "".join("1" if p else "0" for p in cfg.pads))
    return "".join(parts)


def depthwise_name(cfg: DepthwiseConfig) -> str:
    """Kernel name of a depthwise config."""
    p = cfg.params
    return (
        f"grouped_conv_fwd_depthwise_{cfg.datatype}_{cfg.layout.lower()}_{cfg.ndim}d_"
        f"{p['tile_h']}x{p['tile_w']}_f{p['filter']}_s{p['stride_h']}x{p['stride_w']}_"
        f"p{p['pad_h']}x{p['pad_w']}_nb{p['nbatch']}_sub{p['sub_h']}x{p['sub_w']}_"
        f"vec{p['in_vec']}_{p['out_vec']}"
    )


# --------------------------------------------------------------------------------------
# Rule set `default` (upstream grouped_config_rules_default.py)
# --------------------------------------------------------------------------------------


def rules_default(t: Tables, arch: str, variants: list[str], ndims: list[int]) -> list[GemmConfig]:
    """The ``default`` rule set: untagged configs, dtypes ignored."""
    out: list[GemmConfig] = []
    for variant in variants:
        if variant not in t.def_variant_pipelines:
            continue
        tiles = t.def_tiles[variant]
        for ndim in ndims:
            for pipeline, epilogue in t.def_variant_pipelines[variant]:
                is_dsb = pipeline in t.def_dsb_pipelines
                for tile in tiles:
                    key = _tile_key(tile)
                    if is_dsb:
                        if tile not in t.def_compv4_tiles:
                            continue
                        tile = (tile[0], tile[1], tile[2] * t.def_compv4_mult)
                    wm, wn, _ = t.def_wave[key]
                    warp = t.def_warp[key]
                    for two_stage in t.def_two_stage[variant]:
                        cfg = GemmConfig(
                            variant=variant,
                            ndim=ndim,
                            tile=tile,
                            wave=(wm, wn, t.def_forced_wave_k),
                            warp=warp,
                            pipeline=pipeline,
                            scheduler=t.def_scheduler,
                            epilogue=epilogue,
                            vec=t.default_vec,
                            dsb=is_dsb,
                            two_stage=two_stage,
                            layout=t.default_layout,
                        )
                        if is_trait_valid(t, pipeline, epilogue, cfg.scheduler) and is_valid_for_arch(t, cfg, arch):
                            out.append(cfg)
    return out


# --------------------------------------------------------------------------------------
# Rule set `full` (upstream grouped_config_rules_full.py over tile_math.py)
# --------------------------------------------------------------------------------------


def _divisors(n: int) -> list[int]:
    """Positive divisors of ``n`` in ascending order."""
    return [d for d in range(1, n + 1) if n % d == 0]


class _FullGenerator:
    """Per-call state of the ``full`` rule set: caches for one arch."""

    def __init__(self, t: Tables, arch: str) -> None:
        self.t = t
        self.arch = arch
        self.waves = t.arch_wave_set.get(arch, frozenset())
        self.warp_tiles = t.arch_warp_tiles.get(arch, {})
        self._struct_cache: dict[tuple[int, int, str], list[tuple[Wave, Tile]]] = {}
        self._pairs_cache: dict[tuple[str, Tile, str], list[tuple[Wave, tuple[int, int]]]] = {}
        self._gate_cache: dict[tuple[Tile, Wave, int], frozenset[Vec]] = {}
        self._vec_cache: dict[tuple[str, Tile, str], list[Vec]] = {}
        self.seen: set[tuple] = set()

    # ---- tile_math get_valid_wave_warp_pairs
    def structural_pairs(self, tm: int, tn: int, dkey: str) -> list[tuple[Wave, Tile]]:
        """(wave, warp tile) pairs the arch can build for a tile (tile_k ignored)."""
        ck = (tm, tn, dkey)
        hit = self._struct_cache.get(ck)
        if hit is not None:
            return hit
        out: list[tuple[Wave, Tile]] = []
        seen: set[tuple[Wave, Tile]] = set()
        for shape in self.warp_tiles.get(dkey, []):
            wm_, wn_, _ = shape
            if tm % wm_ != 0 or tn % wn_ != 0:
                continue
            for it_m in _divisors(tm // wm_):
                wave_m = tm // (wm_ * it_m)
                for it_n in _divisors(tn // wn_):
                    wave_n = tn // (wn_ * it_n)
                    for wk in (1, 2):
                        wave = (wave_m, wave_n, wk)
                        if wave in self.waves and (wave, shape) not in seen:
                            seen.add((wave, shape))
                            out.append((wave, shape))
        self._struct_cache[ck] = out
        return out

    # ---- get_wave_warp_pairs
    def pairs(self, variant: str, tile: Tile, dkey: str) -> list[tuple[Wave, tuple[int, int]]]:
        """Curated wave/warp(m,n) pairs for a tile, with the tile_math gate and fallback."""
        ck = (variant, tile, dkey)
        hit = self._pairs_cache.get(ck)
        if hit is not None:
            return hit
        t = self.t
        tm, tn, _ = tile
        key = _tile_key(tile)
        waves = t.wave_overrides.get(variant, {}).get(key)
        if waves is None:
            waves = t.base_waves.get(key, t.wave_fallback)
        arch_mn = {(s[0], s[1]) for s in self.warp_tiles.get(dkey, [])}
        struct = self.structural_pairs(tm, tn, dkey)
        struct_mn = {(w, (s[0], s[1])) for w, s in struct}
        out: list[tuple[Wave, tuple[int, int]]] = []
        seen: set[tuple[Wave, tuple[int, int]]] = set()
        for wave in waves:
            cands = t.warp_exceptions.get((variant, tile, wave))
            if cands is None:
                pm, pn = tm // wave[0], tn // wave[1]
                big = t.warp_large_min
                mult = t.warp_large_mult
                if pm >= big and pn >= big and pm % mult == 0 and pn % mult == 0:
                    cands = [t.warp_large]
                else:
                    cands = [t.warp_small]
            for mn in cands:
                mn = (mn[0], mn[1])
                if mn in t.excluded_warp_mn or mn not in arch_mn:
                    continue
                if tm % (wave[0] * mn[0]) != 0 or tn % (wave[1] * mn[1]) != 0:
                    continue
                item = (wave, mn)
                if item in seen or item not in struct_mn:
                    continue
                seen.add(item)
                out.append(item)
        if not out and struct:
            out = [(w, (s[0], s[1])) for w, s in struct]
        self._pairs_cache[ck] = out
        return out

    # ---- tile_math get_valid_vec_sizes
    def vec_gate(self, tile: Tile, wave: Wave, elem: int) -> frozenset[Vec]:
        """tile_math vector-size gate: the allowed (vec_a, vec_b, vec_c) set."""
        ck = (tile, wave, elem)
        hit = self._gate_cache.get(ck)
        if hit is not None:
            return hit
        t = self.t
        tm, tn, tk = tile
        block = t.gate_warp * wave[0] * wave[1] * wave[2]
        if (tm * tk) % block != 0 or (tn * tk) % block != 0:
            res: frozenset[Vec] = frozenset()
        else:
            pa, pb = tm * tk // block, tn * tk // block
            cap = t.gate_max_vec_bytes // elem
            legal = []
            for v in t.gate_widths:
                bits = v * elem * 8
                if v <= cap and bits <= t.gate_max_lds_bits and bits & (bits - 1) == 0:
                    legal.append(v)
            va = [v for v in legal if pa % v == 0 or v % pa == 0]
            vb = [v for v in legal if pb % v == 0 or v % pb == 0]
            vc = [v for v in legal if tn % v == 0]
            res = frozenset((a, b, c) for a in va for b in vb for c in vc)
        self._gate_cache[ck] = res
        return res

    # ---- get_vec_strategies, compute_vector_size, get_extra_vec_triples
    def vec_candidates(self, variant: str, tile: Tile, dclass: str) -> list[Vec]:
        """Sorted candidate vec triples for (variant, tile, dtype class), before gating."""
        ck = (variant, tile, dclass)
        hit = self._vec_cache.get(ck)
        if hit is not None:
            return hit
        t = self.t
        key = _tile_key(tile)
        m = t.max_vec[dclass]
        sym = {"m": m, "h": max(1, m // 2), "q": max(1, m // 4), "1": 1}
        per_tile = t.tile_vec_strategies.get(variant, {})
        strategies = per_tile[key].get(dclass, []) if key in per_tile else t.tile_vec_fallback
        cands: set[Vec] = set()
        for s in strategies:
            a, b, c = t.vec_strategy_triples[s]
            cands.add((sym[a], sym[b], sym[c]))
        for trip in t.extra_vec.get(variant, {}).get(key, {}).get(dclass, []):
            cands.add((trip[0], trip[1], trip[2]))
        res = sorted(cands)
        self._vec_cache[ck] = res
        return res

    # ---- per-tile pipelines
    def pipelines(self, variant: str, tile: Tile, dclass: str) -> list[PipeSched]:
        """(pipeline, scheduler) list for a tile: dtype-class override, curated, shape rule."""
        t = self.t
        key = _tile_key(tile)
        over = t.tile_pipelines_dclass.get(variant, {}).get(key)
        if over is not None and dclass in over:
            return over[dclass]
        cur = t.tile_pipelines.get(variant, {}).get(key)
        if cur is not None:
            return cur
        return self._shape_rule(variant, tile)

    def _shape_rule(self, variant: str, tile: Tile) -> list[PipeSched]:
        """The shape rule for tiles no table lists (never reached with the shipped tables)."""
        tm, tn, tk = tile
        area = tm * tn
        v4 = tile in self.t.shape_compv4_tiles or (area >= 16384 and tk >= 32)
        intra, inter = "intrawave", "interwave"
        out: list[PipeSched] = [("compv1", intra)]
        if variant == "forward":
            if tk >= 32:
                out.append(("compv1", inter))
            if min(tm, tn) <= 32 and tk >= 64:
                out += [("mem", intra), ("mem", inter)]
            if area >= 4096 and tk >= 32:
                out.append(("compv3", intra))
            if v4:
                out.append(("compv4", intra))
            if area >= 4096 and tk >= 32:
                out.append(("compv6", intra))
        elif variant == "bwd_weight":
            if tk >= 64:
                out.append(("compv1", inter))
            if tk >= 32:
                out.append(("mem", intra))
            if tk >= 64:
                out.append(("mem", inter))
            if area >= 4096 and tk >= 32:
                out.append(("compv3", intra))
            if v4:
                out.append(("compv4", intra))
            if tk >= 32:
                out.append(("compv6", intra))
            if tk == 64:
                out.append(("basic_async_v1", intra))
        return out

    # ---- specializations
    def specs(self, variant: str, tile: Tile) -> list[str]:
        """Specializations for a tile."""
        sp = self.t.specializations[variant]
        if "tile_k_default_only" in sp and tile[2] == sp["tile_k_default_only"]:
            return list(sp["default_only"])
        out = list(sp["base"])
        if "small_area_extra" in sp and tile[0] * tile[1] <= sp["small_area_max_mn"]:
            out += sp["small_area_extra"]
        return out

    # ---- compute_warp_tile_k
    def warp_tile_k(self, dclass: str, wtm: int, tile_k: int, streamk: bool, legacy: bool) -> int:
        """Derived warp_tile_k."""
        w = self.t.wtk
        if streamk or legacy:
            base = w["legacy_k"]["if_wtm_32" if wtm == 32 else "otherwise"]
            cap = tile_k // w["legacy_float_cap_divisor"] if dclass == "float" else tile_k
            return min(base, cap)
        k1 = w["k1_small"] if tile_k <= w["k1_small_max_tile_k"] else w["k1_large"]
        kmfma = w["k_mfma"][dclass]["if_wtm_32" if wtm == 32 else "otherwise"]
        return min(max(k1, kmfma), tile_k)

    # ---- emitting one (tile, pipelines, feature)
    def emit(
        self,
        out: list[AnyConfig],
        variant: str,
        ndim: int,
        dtype: str,
        tile: Tile,
        pipelines: list[PipeSched],
        feature: dict[str, Any] | None,
    ) -> None:
        """Emit every config of one (tile, pipelines, feature) into ``out``."""
        t = self.t
        if not pipelines:
            return
        dkey = t.dtype_key[dtype]
        dclass = t.dtype_class[dtype]
        pairs = self.pairs(variant, tile, dkey)
        if not pairs:
            return
        vecs = self.vec_candidates(variant, tile, dclass)
        if not vecs:
            return
        specs = self.specs(variant, tile)
        elem = t.elem_size[dtype]
        legacy = variant == t.legacy_variant and tile in t.legacy_tiles
        epi = t.full_epilogue
        if feature is None:
            split = explicit = two_stage = f_dsb = False
            gm = 1
            sk = None
        else:
            split = bool(feature["split_image"])
            explicit = bool(feature["explicit_gemm"])
            two_stage = bool(feature["two_stage"])
            f_dsb = bool(feature["double_smem_buffer"])
            gm = int(feature["num_groups_to_merge"])
            sk = feature["streamk"]
        streamk = sk is not None
        sk_persist = bool(sk["persistent"]) if streamk else False
        sk_strategy = sk["strategy"] if streamk else "TREE"
        _, _, tk = tile
        seen = self.seen
        arch = self.arch
        for wave, (wtm, wtn) in pairs:
            # The k0 upstream computes here feeds only the vector gate, which ignores it.
            gate = self.vec_gate(tile, wave, elem)
            for vec in vecs:
                if vec not in gate:
                    continue
                for pipeline, sched in pipelines:
                    if explicit and pipeline in t.skip_if_explicit:
                        continue
                    if not is_trait_valid(t, pipeline, epi, sched):
                        continue
                    dsb = pipeline in t.full_dsb_pipelines or f_dsb
                    k = self.warp_tile_k(dclass, wtm, tk, streamk, legacy and pipeline == t.legacy_pipeline)
                    warp = (wtm, wtn, k)
                    if not tile_divisible(tile, wave, warp):
                        continue
                    for spec in specs:
                        cfg = GemmConfig(
                            variant=variant,
                            ndim=ndim,
                            tile=tile,
                            wave=wave,
                            warp=warp,
                            pipeline=pipeline,
                            scheduler=sched,
                            epilogue=epi,
                            vec=vec,
                            dsb=dsb,
                            two_stage=two_stage,
                            explicit_gemm=explicit,
                            split_image=split,
                            groups_to_merge=gm,
                            specialization=spec,
                            streamk=streamk,
                            streamk_persistent=sk_persist,
                            streamk_strategy=sk_strategy,
                            datatype=dtype,
                            layout=t.default_layout,
                        )
                        if not is_valid_for_arch(t, cfg, arch):
                            continue
                        dkey_ = (
                            variant,
                            ndim,
                            tile,
                            wave,
                            warp,
                            pipeline,
                            sched,
                            epi,
                            vec,
                            dsb,
                            two_stage,
                            explicit,
                            split,
                            gm,
                            spec,
                            streamk,
                            sk_persist,
                            dtype,
                        )
                        if dkey_ in seen:
                            continue
                        seen.add(dkey_)
                        out.append(cfg)

    def run(self, variants: list[str], ndims: list[int], dtypes: list[str]) -> list[AnyConfig]:
        """The whole ``full`` rule set for one request, in emission order."""
        t = self.t
        out: list[AnyConfig] = []
        for variant in variants:
            if variant not in t.base_tiles and variant not in t.features:
                continue
            features = t.features.get(variant, [])
            for ndim in ndims:
                for dtype in dtypes:
                    if dtype not in t.dtype_key or dtype not in t.dtype_class:
                        continue
                    dclass = t.dtype_class[dtype]
                    for tile in t.base_tiles.get(variant, {}).get(ndim, {}).get(dtype, []):
                        self.emit(out, variant, ndim, dtype, tile, self.pipelines(variant, tile, dclass), None)
                    for feat in features:
                        if feat["dtype_classes"] is not None and dclass not in feat["dtype_classes"]:
                            continue
                        if feat["ndims"] is not None and ndim not in feat["ndims"]:
                            continue
                        for tl in feat["tiles"]:
                            tile = (tl[0], tl[1], tl[2])
                            if feat["pipelines"] is not None:
                                pls = [(p[0], p[1]) for p in feat["pipelines"]]
                            else:
                                pls = self.pipelines(variant, tile, dclass)
                            self.emit(out, variant, ndim, dtype, tile, pls, feat)
            if variant == t.dw_variant and t.dw_requires_ndim in ndims:
                dw_dtypes = dtypes if dtypes else t.dw_default_dtypes
                out.extend(
                    DepthwiseConfig(datatype=dtype, params=params, ndim=t.dw_ndim, layout=t.dw_layout)
                    for params in t.dw_params
                    for dtype in dw_dtypes
                )
        return out


def rules_full(t: Tables, arch: str, variants: list[str], ndims: list[int], dtypes: list[str]) -> list[AnyConfig]:
    """The ``full`` rule set."""
    return _FullGenerator(t, arch).run(variants, ndims, dtypes)


# --------------------------------------------------------------------------------------
# Rule sets `full-tests` and `tiny` (sampling.json)
# --------------------------------------------------------------------------------------


def category(t: Tables, cfg: AnyConfig) -> str:
    """full-tests category of a config: first matching tag + ':' + dtype tag."""
    tag = cfg.datatype if cfg.datatype is not None else t.ft_untagged
    if isinstance(cfg, DepthwiseConfig):
        name = "depthwise"
    elif cfg.streamk:
        name = "streamk"
    elif cfg.split_image:
        name = "split_image"
    elif cfg.groups_to_merge > 1:
        name = "merged_groups"
    elif cfg.two_stage:
        name = "two_stage"
    elif cfg.explicit_gemm:
        name = "explicit_gemm"
    else:
        name = "regular"
    return f"{name}:{tag}"


def rules_full_tests(t: Tables, arch: str, variants: list[str], ndims: list[int], dtypes: list[str]) -> list[AnyConfig]:
    """The ``full-tests`` rule set: stride-5 stratified subset of ``full`` plus coverage."""
    full = rules_full(t, arch, variants, ndims, dtypes)
    stride = t.ft_stride
    groups: dict[str, list[int]] = {}
    for i, cfg in enumerate(full):
        groups.setdefault(category(t, cfg), []).append(i)
    selected: set[int] = set()
    for members in groups.values():
        if len(members) < stride:
            selected.add(members[0])
        else:
            selected.update(members[stride - 1 :: stride])
    # Coverage top-up per (variant, dtype tag) over (pipeline, scheduler).
    first_of: dict[tuple[str, str, str, str], int] = {}
    covered: set[tuple[str, str, str, str]] = set()
    for i, cfg in enumerate(full):
        if isinstance(cfg, DepthwiseConfig):
            continue
        key = (cfg.variant, cfg.datatype or t.ft_untagged, cfg.pipeline, cfg.scheduler)
        first_of.setdefault(key, i)
        if i in selected:
            covered.add(key)
    for key, i in first_of.items():
        if key not in covered:
            selected.add(i)
    return [full[i] for i in sorted(selected)]


def rules_tiny(t: Tables, arch: str, variants: list[str], ndims: list[int], dtypes: list[str]) -> list[AnyConfig]:
    """The ``tiny`` rule set: first per (category, ndim) group, then round-robin to 10."""
    ft = rules_full_tests(t, arch, variants, ndims, dtypes)
    groups: dict[tuple[str, int], list[AnyConfig]] = {}
    for cfg in ft:
        groups.setdefault((category(t, cfg), cfg.ndim), []).append(cfg)
    glist = list(groups.values())
    out = [g[0] for g in glist]
    idx = 1
    while len(out) < t.tiny_min:
        added = False
        for g in glist:
            if idx < len(g):
                out.append(g[idx])
                added = True
                if len(out) >= t.tiny_min:
                    break
        if not added:
            break
        idx += 1
    return out


# --------------------------------------------------------------------------------------
# generate_all and the public entry point
# --------------------------------------------------------------------------------------


def get_configs(
    t: Tables, arch: str, rule_set: str, variants: list[str], ndims: list[int], dtypes: list[str]
) -> list[AnyConfig]:
    """Dispatch to a rule set (upstream ``get_default_configs``)."""
    if rule_set == "default":
        return list(rules_default(t, arch, variants, ndims))
    if rule_set == "full":
        return rules_full(t, arch, variants, ndims, dtypes)
    if rule_set == "full-tests":
        return rules_full_tests(t, arch, variants, ndims, dtypes)
    if rule_set == "tiny":
        return rules_tiny(t, arch, variants, ndims, dtypes)
    raise ValueError(f"unknown rule set {rule_set!r} (expected one of {RULE_SETS})")


def generate_all(
    t: Tables, arch: str, configs: list[AnyConfig], variants: list[str], ndims: list[int], dtypes: list[str]
) -> dict[Cell, tuple[list[str], list[str]]]:
    """Split configs into cells: per dtype, raw names and the names passing both filters."""
    result: dict[Cell, tuple[list[str], list[str]]] = {
        (v, n, d): ([], []) for v in variants for n in ndims for d in dtypes
    }
    for dtype in dtypes:
        for cfg in configs:
            if isinstance(cfg, DepthwiseConfig):
                if cfg.datatype != dtype:
                    continue
                cell = (cfg.variant, cfg.ndim, dtype)
                name = depthwise_name(cfg)
                raw, valid = result.setdefault(cell, ([], []))
                raw.append(name)
                valid.append(name)
                continue
            if cfg.datatype is not None and cfg.datatype != dtype:
                continue
            cell = (cfg.variant, cfg.ndim, dtype)
            name = kernel_name(t, cfg, dtype)
            raw, valid = result.setdefault(cell, ([], []))
            raw.append(name)
            if is_config_valid(t, cfg, dtype, arch):
                valid.append(name)
    return result


def enumerate_request(
    arch: str, rule_set: str, variants: list[str], ndims: list[int], dtypes: list[str]
) -> dict[tuple[str, int, str], tuple[list[str], list[str]]]:
    """Run ONE upstream-style call for the whole request and split it into cells.

    Returns ``{(variant, ndim, dtype): (raw_names, valid_names)}`` for every
    requested cell (empty lists where the rule set proposes nothing). ``raw`` is
    what the rule set returns for the cell (after the rule set's own
    ``is_valid_for_arch`` filtering, where it applies one); ``valid`` is the
    subset passing ``is_config_valid`` as well (depthwise configs are always valid
    for their own dtype). Both lists are in emission (for ``tiny``: selection) order.
    """
    t = load_tables()
    configs = get_configs(t, arch, rule_set, list(variants), list(ndims), list(dtypes))
    return generate_all(t, arch, configs, list(variants), list(ndims), list(dtypes))


def main(argv: list[str] | None = None) -> int:
    """CLI: print total raw/valid counts of one request and the elapsed seconds."""
    t0 = time.perf_counter()
    t = load_tables()
    load_s = time.perf_counter() - t0
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--arch", required=True, choices=list(t.arch_raw["arch_order"]))
    p.add_argument("--rule-set", default="full", choices=list(RULE_SETS))
    p.add_argument("--variants", nargs="+", default=list(t.common["variants"]))
    p.add_argument("--ndims", nargs="+", type=int, default=[1, 2, 3])
    p.add_argument("--dtypes", nargs="+", default=list(t.common["dtypes"]))
    args = p.parse_args(argv)
    t1 = time.perf_counter()
    cells = enumerate_request(args.arch, args.rule_set, args.variants, args.ndims, args.dtypes)
    elapsed = time.perf_counter() - t1
    raw = sum(len(r) for r, _ in cells.values())
    valid = sum(len(v) for _, v in cells.values())
    print(
        f"arch={args.arch} rule_set={args.rule_set} cells={len(cells)} "
        f"raw={raw} valid={valid} elapsed={elapsed:.3f}s (table load {load_s:.3f}s)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
