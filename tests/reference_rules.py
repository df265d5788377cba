"""Reference statement of the upstream validity rules, in plain Python.

This module is deliberately independent of ``ckspace``: it reads only the JSON data
tables (``ckspace/data/tables/arch.json``, ``validity.json`` and ``depthwise.json``) and restates
the trait check, ``is_valid_for_arch``, ``is_config_valid`` and the depthwise checks (the rules
``docs/rules.md`` lists) check by check, as literally as possible, so that property-based tests can
compare it with the CP-SAT implementation.

A GEMM config is a plain dict (keys: variant, ndim, dtype, tagged, tile_m/n/k, wave_m/n/k,
warp_tile_m/n/k, vec_a/b/c, pipeline, scheduler, epilogue, pad_m/n/k, double_smem_buffer,
split_image, explicit_gemm, two_stage, num_groups_to_merge, num_wave_groups, specialization,
streamk_enabled, streamk_strategy, streamk_persistent, layout).

Every ``*_violations`` function evaluates all of its checks (not only up to the first failure)
and returns the set of ids of the failing checks; the empty set means "valid".
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

TABLES = Path(__file__).resolve().parents[1] / "ckspace" / "data" / "tables"


def _load(name: str) -> dict[str, Any]:
    with open(TABLES / name, encoding="utf-8") as f:
        return json.load(f)


ARCH = _load("arch.json")
VALIDITY = _load("validity.json")
DEPTHWISE_VALIDATION = _load("depthwise.json")["validation"]


def warp_size(arch: str) -> int:
    """Warp size (arch.json ``warp_size_rule``) is 64 if the arch string starts with ``gfx9``, else 32."""
    rule = ARCH["warp_size_rule"]
    return rule["warp_size_if_prefix"] if arch.startswith(rule["prefix"]) else rule["warp_size_otherwise"]


def trait_is_valid(pipeline: str, epilogue: str, scheduler: str) -> bool:
    """The trait check (rule ``trait_combo``): invalid iff interwave with compv3/4/5/6, comp_async or basic_async_v1."""
    return [pipeline, epilogue, scheduler] not in VALIDITY["trait_invalid_combos"]


def violations_is_valid_for_arch(cfg: dict[str, Any], arch: str) -> set[str]:
    """``GroupedConvKernelConfig.is_valid_for_arch``; all eight steps evaluated.

    Raises KeyError for an arch that is not in arch.json (step 5's "unknown arch").
    """
    arch_info = ARCH["archs"][arch]  # KeyError for an unknown arch
    rules = VALIDITY["is_valid_for_arch"]
    bad: set[str] = set()
    W = warp_size(arch)

    # Step 1: trait validity (5.1).
    if not trait_is_valid(cfg["pipeline"], cfg["epilogue"], cfg["scheduler"]):
        bad.add("trait")
    # Step 2: stream-K only for bwd_weight.
    if cfg["streamk_enabled"] and cfg["variant"] not in rules["streamk_variants"]:
        bad.add("streamk_variant")
    # Step 3: no compv5 for bwd_data / bwd_weight.
    if cfg["pipeline"] in rules["blocked_pipelines_by_variant"].get(cfg["variant"], []):
        bad.add("no_compv5_backward")
    # Step 4: each vector width is 1 or even.
    for v in (cfg["vec_a"], cfg["vec_b"], cfg["vec_c"]):
        if not (v == 1 or v % 2 == 0):
            bad.add("vec_parity")
    # Step 5: [wave_m, wave_n, wave_k] (the real wave_k) in the arch's supported list.
    if [cfg["wave_m"], cfg["wave_n"], cfg["wave_k"]] not in arch_info["wave_combos"]:
        bad.add("wave_combo")
    # Step 6: WMMA rule, only on warp-size-32 archs. Untagged configs test the literal "float".
    if W == 32:
        dtype_tested = cfg["dtype"] if cfg["tagged"] else "float"
        if cfg["warp_tile_k"] < 32 and dtype_tested != "float":  # (a)
            bad.add("wmma_warp_tile_k")
        if cfg["wave_k"] * cfg["warp_tile_k"] > cfg["tile_k"]:  # (b)
            bad.add("wmma_k_coverage")
        if cfg["warp_tile_m"] == 32:  # (c)
            bad.add("wmma_warp_tile_m")
    # Step 7: compv6 tile coverage with block = W * wave_m * wave_n * wave_k.
    if cfg["pipeline"] == "compv6":
        block = W * cfg["wave_m"] * cfg["wave_n"] * cfg["wave_k"]
        if (cfg["tile_m"] * cfg["tile_k"]) // (block * cfg["vec_a"]) < 1:
            bad.add("compv6_coverage_a")
        if (cfg["tile_n"] * cfg["tile_k"]) // (block * cfg["vec_b"]) < 1:
            bad.add("compv6_coverage_b")
    # Step 8: no stream-K on warp-size-32 archs.
    if W == 32 and cfg["streamk_enabled"]:
        bad.add("streamk_wave32")
    return bad


def violations_is_config_valid(cfg: dict[str, Any], arch: str) -> set[str]:
    """``is_config_valid``: ``ArchFilter(arch, strict_mode=False).is_kernel_valid``; all checks run.

    The dtype passed as A/B/C is ``cfg["dtype"]``; wave_k is forced to 1 (the real one is ignored).
    Warnings (missing wave list, missing warp-tile table or dtype key) do not reject.
    """
    arch_info = ARCH["archs"][arch]  # KeyError for an unknown arch
    tm, tn, tk = cfg["tile_m"], cfg["tile_n"], cfg["tile_k"]
    wm, wn, wk = cfg["wave_m"], cfg["wave_n"], 1  # wave_k forced to 1
    wtm, wtn, wtk = cfg["warp_tile_m"], cfg["warp_tile_n"], cfg["warp_tile_k"]
    bad: set[str] = set()

    # Check 1: operator limits (forward/bwd_data: n, k; bwd_weight: m, n).
    op = VALIDITY["is_config_valid"]["operators"][cfg["variant"]]
    for value, minimum, align in zip((tm, tn, tk), op["min_tile"], op["tile_alignment"], strict=True):
        if value < minimum:
            bad.add("op_min_tile")
        if value % align != 0:
            bad.add("op_tile_alignment")
    # Check 2: all dims > 0, and each wave*warp tile fits in the block tile (k uses wave_k = 1).
    if any(d <= 0 for d in (tm, tn, tk, wm, wn, wk, wtm, wtn, wtk)):
        bad.add("positive")
    if wm * wtm > tm:
        bad.add("fit_m")
    if wn * wtn > tn:
        bad.add("fit_n")
    if wk * wtk > tk:
        bad.add("fit_k")
    # Check 3: [wave_m, wave_n, 1] in the arch's wave list (no list -> warning only).
    wave_list = arch_info.get("wave_combos")
    if wave_list is not None and [wm, wn, wk] not in wave_list:
        bad.add("wave_list")
    # Check 4: warp tile in the arch's list for "{dtype}_{dtype}_fp32" (no table/key -> warning).
    dtype_key = ARCH["dtype_key"][cfg["dtype"]]
    warp_tiles = arch_info.get("warp_tiles") or {}
    if dtype_key in warp_tiles and [wtm, wtn, wtk] not in warp_tiles[dtype_key]:
        bad.add("warp_tile_list")
    # Check 5, first half: backward operators allow only compv3 and mem.
    icv = VALIDITY["is_config_valid"]
    if cfg["variant"] in icv["backward_variants"] and cfg["pipeline"] not in icv["backward_allowed_pipelines"]:
        bad.add("backward_pipeline")
    # Check 5, second half: (pipeline, epilogue, scheduler) not in the arch table's unsupported set.
    if [cfg["pipeline"], cfg["epilogue"], cfg["scheduler"]] in ARCH["trait_unsupported_combos"]:
        bad.add("arch_trait_table")
    # Check 6: LDS, limit by pipeline only (others use "default").
    limits = ARCH["lds_limit_bytes_by_pipeline"]
    limit = limits.get(cfg["pipeline"], limits["default"])
    if (tm + tn) * tk * ARCH["element_size_bytes"][cfg["dtype"]] > limit:
        bad.add("lds")
    # Check 7: alignment (k uses wave_k = 1). Guarded against zero divisors (already "positive").
    if wm * wtm == 0 or tm % (wm * wtm) != 0:
        bad.add("align_m")
    if wn * wtn == 0 or tn % (wn * wtn) != 0:
        bad.add("align_n")
    if wk * wtk == 0 or tk % (wk * wtk) != 0:
        bad.add("align_k")
    return bad


def is_valid_for_arch(cfg: dict[str, Any], arch: str) -> bool:
    """``is_valid_for_arch`` as a boolean."""
    return not violations_is_valid_for_arch(cfg, arch)


def is_config_valid(cfg: dict[str, Any], arch: str) -> bool:
    """``is_config_valid`` as a boolean."""
    return not violations_is_config_valid(cfg, arch)


def is_emitted_valid(cfg: dict[str, Any], arch: str) -> bool:
    """The oracle's "valid" set (what the generator emits): both ``is_valid_for_arch`` and
    ``is_config_valid`` hold."""
    return is_valid_for_arch(cfg, arch) and is_config_valid(cfg, arch)


def _is_pow2(v: int) -> bool:
    return v >= 1 and (v & (v - 1)) == 0


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def _roundup(x: int, a: int) -> int:
    return _ceil_div(x, a) * a


def depthwise_violations(params: dict[str, Any]) -> set[str]:
    """``full``'s depthwise block: generation-time depthwise constraints (block 64, element size 2).

    Ids: "filter" (odd and >= 1), "in_vec_pow2", "out_vec_pow2", "sub_h" / "sub_w"
    (1 <= sub <= tile), "stride_w" (1 or even), "pad_w" (> 0), "subtiles"
    (ceil(th/sub_h)*ceil(tw/sub_w) <= 64), "nbatch_tpw" (nbatch % (64 // subtiles) == 0),
    "in_vec_sub_w" ((sub_w*stride_w) % min(in_vec, 4) == 0), "lds_w"
    (ceil(lds_w/in_vec) <= 64), "smem" (lds_h*stride*tpw*2 <= 65536).
    Checks whose inputs are already broken (sub < 1, in_vec not a power of two, tpw = 0) are
    reported under the dependent ids too instead of dividing by zero.
    """
    v = DEPTHWISE_VALIDATION
    block, elem = v["block_size"], v["element_size_bytes"]
    th, tw, f = params["tile_h"], params["tile_w"], params["filter"]
    sh, sw, ph, pw = params["stride_h"], params["stride_w"], params["pad_h"], params["pad_w"]
    nbatch, sub_h, sub_w = params["nbatch"], params["sub_h"], params["sub_w"]
    in_vec, out_vec = params["in_vec"], params["out_vec"]
    bad: set[str] = set()

    if not (f >= 1 and f % 2 == 1):
        bad.add("filter")
    if not _is_pow2(in_vec):
        bad.add("in_vec_pow2")
    if not _is_pow2(out_vec):
        bad.add("out_vec_pow2")
    if not (1 <= sub_h <= th):
        bad.add("sub_h")
    if not (1 <= sub_w <= tw):
        bad.add("sub_w")
    if not (sw == 1 or sw % 2 == 0):
        bad.add("stride_w")
    if not pw > 0:
        bad.add("pad_w")

    tpw = 0
    if sub_h >= 1 and sub_w >= 1:
        subtiles = _ceil_div(th, sub_h) * _ceil_div(tw, sub_w)
        if subtiles > block:
            bad.add("subtiles")
        tpw = block // subtiles if subtiles >= 1 else 0
    else:
        bad.add("subtiles")
    if tpw == 0 or nbatch % tpw != 0:
        bad.add("nbatch_tpw")

    ivi = min(in_vec, v["in_vec_internal_cap"])
    if ivi < 1 or (sub_w * sw) % ivi != 0:
        bad.add("in_vec_sub_w")

    lds_w = tw * sw + 2 * pw
    lds_h = th * sh + 2 * ph
    if in_vec < 1 or _ceil_div(lds_w, in_vec) > v["max_lds_w_vector_loads"]:
        bad.add("lds_w")
    if in_vec < 1 or ivi < 1:
        bad.add("smem")
    else:
        stride = max(_roundup(lds_w, in_vec), _roundup(lds_w + pw, ivi))
        if lds_h * stride * tpw * elem > v["max_smem_bytes"]:
            bad.add("smem")
    return bad
