"""Every validity rule of the upstream generator, as named expressions (RULES.md sections 5, 8.11).

Rules are built per cell: arch facts, variant and dtype are folded in as constants, so a rule that
cannot apply in a cell (the WMMA rules on a wave64 arch, say) becomes the constant TRUE there but
keeps its name. Each rule belongs to one *predicate*, the upstream function that checks it:

* ``tile_divisibility`` -- ``TileConfig.is_valid`` (5.2), which only the ``full`` rule set calls;
* ``is_valid_for_arch`` -- 5.3, which the ``default`` and ``full`` rule sets call on their proposals;
* ``is_config_valid`` -- 5.4, which the generator applies to everything it emits;
* ``structure`` -- consistency of ckspace's own fields (stream-K flags), true of every proposal;
* ``depthwise`` -- the generation-time depthwise checks (8.11).

The parameters come from the shipped tables (``validity.json``, ``arch.json``, ``depthwise.json``);
the logic lives here and only here.
"""

from __future__ import annotations

from functools import cache

from ckspace.constraints.expr import (
    TRUE,
    Expr,
    Field,
    Not,
    all_of,
    any_of,
    implies,
    in_table,
    lookup,
)
from ckspace.constraints.rule import Rule
from ckspace.core.arch import arch_facts, element_size, lds_bytes, lds_limit_bytes
from ckspace.core.tables import table
from ckspace.core.vocab import (
    Dtype,
    Epilogue,
    Pipeline,
    Predicate,
    Scheduler,
    StreamKStrategy,
    Variant,
)

F = Field
TILE = (F("tile_m"), F("tile_n"), F("tile_k"))
WAVE = (F("wave_m"), F("wave_n"), F("wave_k"))
WARP = (F("warp_tile_m"), F("warp_tile_n"), F("warp_tile_k"))
TRAIT = (F("pipeline"), F("epilogue"), F("scheduler"))


def _trait_rows(combos: list[list[str]]) -> list[tuple[int, int, int]]:
    return [(Pipeline(p).code, Epilogue(e).code, Scheduler(s).code) for p, e, s in combos]


def _codes(names: list[str]) -> list[int]:
    return [Pipeline(p).code for p in names]


@cache
def gemm_rules(arch: str, variant: Variant, dtype: Dtype) -> tuple[Rule, ...]:
    """The rules of a GEMM config in cell (arch, variant, *, dtype), in upstream check order."""
    facts = arch_facts(arch)
    validity = table("validity")
    va = validity["is_valid_for_arch"]
    cv = validity["is_config_valid"]
    w = facts.warp_size
    wmma = va["wmma"]
    rules: list[Rule] = []

    def add(name: str, predicate: Predicate, expr: Expr, text: str, source: str, quirk: str | None = None) -> None:
        rules.append(Rule(name, predicate, expr, text, source, quirk))

    # -- structure: fields of ckspace's own model that must agree with each other --------------
    add("streamk_fields", Predicate.STRUCTURE,
        all_of(F("streamk_enabled").eq(F("streamk_strategy").ne(StreamKStrategy.NONE.code)),
               implies(F("streamk_persistent").eq(1), F("streamk_enabled").eq(1))),
        "stream-K is enabled exactly when a strategy is set, and persistence needs stream-K",
        "ckspace model")

    # -- 5.2 TileConfig.is_valid (full only) -----------------------------------------------------
    add("tile_divisibility", Predicate.TILE_DIVISIBILITY,
        all_of(*(t > 0 for t in TILE),
               *((t % (wv * wp)).eq(0) for t, wv, wp in zip(TILE, WAVE, WARP))),
        "each tile dimension is positive and a multiple of waves x warp tile along it (wave_k counted)",
        "RULES.md 5.2")

    # -- 5.3 is_valid_for_arch ------------------------------------------------------------------
    add("trait_combo", Predicate.IS_VALID_FOR_ARCH,
        Not(in_table(TRAIT, _trait_rows(validity["trait_invalid_combos"]))),
        "interwave scheduling is not allowed with compv3/4/5/6, comp_async or basic_async_v1",
        "RULES.md 5.1, 5.3 step 1")
    streamk_ok = variant.value in va["streamk_variants"]
    add("streamk_variant", Predicate.IS_VALID_FOR_ARCH,
        TRUE if streamk_ok else F("streamk_enabled").eq(0),
        "stream-K is only for " + ", ".join(va["streamk_variants"]), "RULES.md 5.3 step 2")
    blocked = va["blocked_pipelines_by_variant"].get(variant.value, [])
    add("pipeline_variant", Predicate.IS_VALID_FOR_ARCH,
        Not(F("pipeline").isin(_codes(blocked))) if blocked else TRUE,
        "compv5 is not allowed for bwd_data or bwd_weight", "RULES.md 5.3 step 3")
    odd_ok = va["vector_width_rule"]["odd_allowed"]
    add("vec_parity", Predicate.IS_VALID_FOR_ARCH,
        all_of(*(any_of(v.isin(odd_ok), (v % 2).eq(0)) for v in (F("vec_a"), F("vec_b"), F("vec_c")))),
        "every vector width is 1 or even", "RULES.md 5.3 step 4")
    add("wave_combo", Predicate.IS_VALID_FOR_ARCH, in_table(WAVE, facts.wave_combos),
        f"(wave_m, wave_n, wave_k) is one of {arch}'s wave combos", "RULES.md 4, 5.3 step 5")
    is_wmma = w == wmma["applies_to_warp_size"]
    tag_exempt = dtype.value == wmma["exempt_dtype"]
    untagged_exempt = wmma["untagged_dtype"] == wmma["exempt_dtype"]
    k_min = F("warp_tile_k") >= wmma["min_warp_tile_k_unless_float"]
    wmma_k: Expr = TRUE
    if is_wmma and not (tag_exempt and untagged_exempt):
        wmma_k = all_of(
            TRUE if tag_exempt else implies(F("tagged").eq(1), k_min),
            TRUE if untagged_exempt else implies(F("tagged").eq(0), k_min),
        )
    add("wmma_warp_tile_k", Predicate.IS_VALID_FOR_ARCH, wmma_k,
        f"on warp-size-{wmma['applies_to_warp_size']} archs warp_tile_k >= "
        f"{wmma['min_warp_tile_k_unless_float']} unless the config's dtype tag is 'float' "
        "(untagged configs count as 'float')", "RULES.md 5.3 step 6a, 14.3", quirk="14.3")
    add("wmma_k_coverage", Predicate.IS_VALID_FOR_ARCH,
        (F("wave_k") * F("warp_tile_k") <= F("tile_k")) if is_wmma else TRUE,
        "on warp-size-32 archs wave_k x warp_tile_k <= tile_k", "RULES.md 5.3 step 6b")
    add("wmma_warp_tile_m", Predicate.IS_VALID_FOR_ARCH,
        Not(F("warp_tile_m").isin(wmma["forbidden_warp_tile_m"])) if is_wmma else TRUE,
        "on warp-size-32 archs warp_tile_m is not 32", "RULES.md 5.3 step 6c")
    cover = F("pipeline").isin(_codes(va["tile_coverage_pipelines"]))
    block = w * F("wave_m") * F("wave_n") * F("wave_k")
    add("compv6_coverage_a", Predicate.IS_VALID_FOR_ARCH,
        implies(cover, F("tile_m") * F("tile_k") >= block * F("vec_a")),
        f"compv6: tile_m x tile_k covers one vec_a load per thread ({w} x waves threads)",
        "RULES.md 5.3 step 7")
    add("compv6_coverage_b", Predicate.IS_VALID_FOR_ARCH,
        implies(cover, F("tile_n") * F("tile_k") >= block * F("vec_b")),
        f"compv6: tile_n x tile_k covers one vec_b load per thread ({w} x waves threads)",
        "RULES.md 5.3 step 7")
    add("streamk_wave32", Predicate.IS_VALID_FOR_ARCH,
        F("streamk_enabled").eq(0) if w == va["streamk_forbidden_warp_size"] else TRUE,
        f"no stream-K on warp-size-{va['streamk_forbidden_warp_size']} archs", "RULES.md 5.3 step 8")

    # -- 5.4 is_config_valid (ArchFilter, non-strict, wave_k forced) ----------------------------
    op = cv["operators"][variant.value]
    wave_k = cv["forced_wave_k"]
    add("op_min_tile", Predicate.IS_CONFIG_VALID,
        all_of(*(t >= m for t, m in zip(TILE, op["min_tile"]))),
        f"{op['operator']}: tile >= {op['min_tile']} (m, n, k)", "RULES.md 5.4 check 1")
    add("op_tile_alignment", Predicate.IS_CONFIG_VALID,
        all_of(*((t % a).eq(0) for t, a in zip(TILE, op["tile_alignment"]) if a > 1)),
        f"{op['operator']}: tile is a multiple of {op['tile_alignment']} (m, n, k)",
        "RULES.md 5.4 check 1")
    add("positive_dims", Predicate.IS_CONFIG_VALID,
        all_of(*(d > 0 for d in (*TILE, F("wave_m"), F("wave_n"), *WARP))),
        "tile, waves and warp tile are positive", "RULES.md 5.4 check 2")
    add("fit_m", Predicate.IS_CONFIG_VALID, F("wave_m") * F("warp_tile_m") <= F("tile_m"),
        "wave_m x warp_tile_m <= tile_m", "RULES.md 5.4 check 2")
    add("fit_n", Predicate.IS_CONFIG_VALID, F("wave_n") * F("warp_tile_n") <= F("tile_n"),
        "wave_n x warp_tile_n <= tile_n", "RULES.md 5.4 check 2")
    add("fit_k", Predicate.IS_CONFIG_VALID, F("warp_tile_k") * wave_k <= F("tile_k"),
        f"warp_tile_k x {wave_k} (wave_k forced) <= tile_k", "RULES.md 5.4 check 2")
    forced = [(m, n) for m, n, k in facts.wave_combos if k == wave_k]
    add("wave_list", Predicate.IS_CONFIG_VALID, in_table((F("wave_m"), F("wave_n")), forced),
        f"(wave_m, wave_n, {wave_k}) is one of {arch}'s wave combos (wave_k forced to {wave_k})",
        "RULES.md 5.4 check 3, 14.2", quirk="14.2")
    tiles = facts.warp_tiles_for(dtype)
    add("warp_tile_list", Predicate.IS_CONFIG_VALID, in_table(WARP, tiles) if tiles is not None else TRUE,
        f"the warp tile is one of {arch}'s {dtype.key} warp tiles (no table: only a warning)",
        "RULES.md 5.4 check 4, 14.4", quirk="14.7" if w == 32 else "14.8")
    back = variant.value in cv["backward_variants"]
    add("backward_pipeline", Predicate.IS_CONFIG_VALID,
        F("pipeline").isin(_codes(cv["backward_allowed_pipelines"])) if back else TRUE,
        "bwd_data and bwd_weight only run " + " or ".join(cv["backward_allowed_pipelines"]),
        "RULES.md 5.4 check 5, 14.1", quirk="14.1")
    add("arch_trait_table", Predicate.IS_CONFIG_VALID,
        Not(in_table(TRAIT, _trait_rows(table("arch")["trait_unsupported_combos"]))),
        "(pipeline, epilogue, scheduler) is not in the arch table's unsupported set",
        "RULES.md 4, 5.4 check 5")
    limits = {p.code: lds_limit_bytes(p) for p in Pipeline}
    add("lds_budget", Predicate.IS_CONFIG_VALID,
        lds_bytes(F("tile_m"), F("tile_n"), F("tile_k"), element_size(dtype))
        <= lookup(F("pipeline"), limits, max(limits.values())),
        f"(tile_m + tile_n) x tile_k x {element_size(dtype)} B fits the pipeline's LDS limit",
        "RULES.md 5.4 check 6, 14.5", quirk="14.5")
    add("align_m", Predicate.IS_CONFIG_VALID, (F("tile_m") % (F("wave_m") * F("warp_tile_m"))).eq(0),
        "tile_m is a multiple of wave_m x warp_tile_m", "RULES.md 5.4 check 7")
    add("align_n", Predicate.IS_CONFIG_VALID, (F("tile_n") % (F("wave_n") * F("warp_tile_n"))).eq(0),
        "tile_n is a multiple of wave_n x warp_tile_n", "RULES.md 5.4 check 7")
    add("align_k", Predicate.IS_CONFIG_VALID, (F("tile_k") % (F("warp_tile_k") * wave_k)).eq(0),
        f"tile_k is a multiple of warp_tile_k x {wave_k} (wave_k forced)", "RULES.md 5.4 check 7")
    return tuple(rules)


def _ceil_div(a: Expr, b: Expr) -> Expr:
    return (a + b - 1) // b


@cache
def depthwise_rules() -> tuple[Rule, ...]:
    """The depthwise generation-time checks (RULES.md 8.11), on depthwise fields."""
    v = table("depthwise")["validation"]
    bs, es, smem = v["block_size"], v["element_size_bytes"], v["max_smem_bytes"]
    th, tw, flt = F("tile_h"), F("tile_w"), F("filter")
    sh, sw, ph, pw = F("stride_h"), F("stride_w"), F("pad_h"), F("pad_w")
    sub_h, sub_w, in_vec, out_vec = F("sub_h"), F("sub_w"), F("in_vec"), F("out_vec")
    pow2 = [1 << i for i in range(8)]
    subtiles = _ceil_div(th, sub_h) * _ceil_div(tw, sub_w)
    tpw = bs // subtiles
    cap = v["in_vec_internal_cap"]
    ivi = lookup(in_vec, {x: min(x, cap) for x in pow2}, cap)
    lds_w = tw * sw + 2 * pw
    lds_h = th * sh + 2 * ph
    roundup_a = _ceil_div(lds_w, in_vec) * in_vec
    roundup_b = _ceil_div(lds_w + pw, ivi) * ivi
    stride_a_wins = roundup_a >= roundup_b
    smem_a = lds_h * roundup_a * tpw * es <= smem
    smem_b = lds_h * roundup_b * tpw * es <= smem
    src = "RULES.md 8.11"
    return (
        Rule("dw_filter", Predicate.DEPTHWISE, all_of(flt >= 1, (flt % 2).eq(1)), "filter is odd and >= 1", src),
        Rule("dw_vec_pow2", Predicate.DEPTHWISE, all_of(in_vec.isin(pow2), out_vec.isin(pow2)),
             "in_vec and out_vec are powers of two", src),
        Rule("dw_sub_tile", Predicate.DEPTHWISE, all_of(sub_h >= 1, sub_h <= th, sub_w >= 1, sub_w <= tw),
             "1 <= sub <= tile in each dimension", src),
        Rule("dw_stride_w", Predicate.DEPTHWISE, any_of(sw.eq(1), (sw % 2).eq(0)), "stride_w is 1 or even", src),
        Rule("dw_pad_w", Predicate.DEPTHWISE, pw > 0, "pad_w > 0", src),
        Rule("dw_subtiles", Predicate.DEPTHWISE, subtiles <= bs, f"ceil(th/sub_h) x ceil(tw/sub_w) <= {bs}", src),
        Rule("dw_nbatch", Predicate.DEPTHWISE, all_of(tpw >= 1, (F("nbatch") % tpw).eq(0)),
             f"nbatch is a multiple of {bs} // subtiles", src),
        Rule("dw_in_vec_sub_w", Predicate.DEPTHWISE, ((sub_w * sw) % ivi).eq(0),
             f"sub_w x stride_w is a multiple of min(in_vec, {cap})", src),
        Rule("dw_lds_w", Predicate.DEPTHWISE, _ceil_div(lds_w, in_vec) <= bs,
             f"ceil((tw x sw + 2 pw) / in_vec) <= {bs}", src),
        Rule("dw_smem", Predicate.DEPTHWISE,
             any_of(all_of(stride_a_wins, smem_a), all_of(Not(stride_a_wins), smem_b)),
             f"the LDS tile fits {smem} B", src),
    )
