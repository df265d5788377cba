"""Every validity rule of the upstream generator, as named expressions.

Rules are built per cell: arch facts, variant and dtype are folded in as constants, so a rule that
cannot apply in a cell (the WMMA rules on a wave64 arch, say) becomes the constant TRUE there but
keeps its name. Each rule belongs to one *predicate*, the upstream function that checks it (files
of ROCm/rocm-libraries ``projects/composablekernel/dispatcher/codegen/``, at the commits the tables'
``_source_commits`` name):

* ``tile_divisibility`` -- ``codegen_common.py`` ``TileConfig.is_valid``, which only the ``full``
  rule set calls;
* ``is_valid_for_arch`` -- ``unified_grouped_conv_codegen.py``
  ``GroupedConvKernelConfig.is_valid_for_arch``, which the ``default`` and ``full`` rule sets call
  on their proposals; its steps call helpers of ``grouped_conv/grouped_config_rules_full.py`` and
  ``grouped_conv/grouped_config_rules_default.py``;
* ``is_config_valid`` -- ``UnifiedGroupedConvCodegen.is_config_valid``, which the generator applies
  to everything it emits: ``arch_filter.py`` ``ArchFilter.is_kernel_valid`` in non-strict mode with
  wave_k forced to 1, whose ``_validate_*`` checks run in order;
* ``structure`` -- consistency of ckspace's own fields (stream-K flags), true of every proposal;
* ``depthwise`` -- ``grouped_conv/tile_math.py`` ``is_valid_depthwise_config``, which
  ``grouped_config_rules_full.py`` ``get_depthwise_configs`` asserts for its parameter sets.

The parameters come from the shipped tables (``validity.json``, ``arch.json``, ``depthwise.json``)
as a rule revision has them (:mod:`ckspace.core.revisions`), each read with
:func:`~ckspace.constraints.rule.read` so that the rule lists it and its words are built from it; the
logic lives here and only here. A rule that upstream changed between revisions has one formulation
per state (:data:`FORMULATIONS`), and each revision names the one it uses. ``docs/rules.md`` lists
the rules of one cell.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from functools import cache, partial

from ckspace.constraints.expr import (
    TRUE,
    Const,
    Expr,
    Field,
    Not,
    all_of,
    any_of,
    implies,
    in_table,
    lookup,
)
from ckspace.constraints.rule import TILE, WARP, WAVE, Rule, TableValue, read
from ckspace.core.arch import arch_facts, lds_bytes
from ckspace.core.revisions import rules_revision
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
TRAIT = (F("pipeline"), F("epilogue"), F("scheduler"))

FOR_ARCH = "unified_grouped_conv_codegen.py GroupedConvKernelConfig.is_valid_for_arch"
FULL_RULES = "grouped_conv/grouped_config_rules_full.py"
DEFAULT_RULES = "grouped_conv/grouped_config_rules_default.py"
DEPTHWISE_CHECK = "grouped_conv/tile_math.py is_valid_depthwise_config"


def _config_check(number: int, method: str) -> str:
    """Where check ``number`` of ``is_config_valid`` lives upstream."""
    return f"arch_filter.py ArchFilter.{method} (is_config_valid check {number})"


def _trait_rows(combos: list[list[str]]) -> list[tuple[int, int, int]]:
    return [(Pipeline(p).code, Epilogue(e).code, Scheduler(s).code) for p, e, s in combos]


def _codes(names: list[str]) -> list[int]:
    return [Pipeline(p).code for p in names]


def _or(items: Iterable[object]) -> str:
    """``a, b or c``."""
    words = [str(i) for i in items]
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " or " + words[-1]


def _shapes(rows: Iterable[Sequence[int]]) -> str:
    """``1x1x1, 1x2x1``: tiles and wave splits as the kernel names write them."""
    return ", ".join("x".join(str(v) for v in row) for row in rows)


def _combos(rows: list[list[str]]) -> str:
    """(pipeline, epilogue, scheduler) triples in words: as a product when they form one."""
    columns = [list(dict.fromkeys(row[i] for row in rows)) for i in range(3)]
    pipelines, epilogues, schedulers = columns
    if len({tuple(r) for r in rows}) == len(pipelines) * len(epilogues) * len(schedulers):
        return f"{_or(schedulers)} scheduling with {_or(pipelines)} (epilogue {_or(epilogues)})"
    return "any of " + ", ".join("/".join(row) for row in rows)


def _blocked(by_variant: dict[str, list[str]]) -> str:
    """The pipelines each variant rejects, variants sharing a list named together."""
    variants_of: dict[tuple[str, ...], list[str]] = {}
    for variant, pipelines in by_variant.items():
        variants_of.setdefault(tuple(pipelines), []).append(variant)
    return "; ".join(f"{_or(p)} is not allowed for {_or(v)}" for p, v in variants_of.items() if p)


def _lds_limits(limits: dict[str, int]) -> str:
    """The per-pipeline LDS limits of the pipelines ckspace knows, grouped by limit."""
    by_limit: dict[int, list[str]] = {}
    default = limits["default"]
    for pipeline in Pipeline:
        by_limit.setdefault(limits.get(pipeline.value, default), []).append(pipeline.value)
    named = [f"{limit} B for {_or(p)}" for limit, p in by_limit.items() if limit != default]
    return "; ".join([*named, f"{default} B for the others"])


Reader = Callable[..., TableValue]
"""``read`` bound to a rule revision: (table, *keys, default=...) -> TableValue."""
LdsBudget = tuple[Expr, str, list[TableValue], "str | None"]
"""An LDS-budget formulation's expression, words, table values read and quirk."""


def _lds_per_pipeline(revised: Reader, arch: str, size: TableValue) -> LdsBudget:
    """Upstream at 7cd53015: a budget per pipeline (64 KiB unless the table lists it), whatever the
    arch's LDS and whether the pipeline double-buffers it."""
    table = revised("arch", "lds_limit_bytes_by_pipeline")
    limits = {p.code: table.value.get(p.value, table.value["default"]) for p in Pipeline}
    return (lds_bytes(*TILE, size.value) <= lookup(F("pipeline"), limits, max(limits.values())),
            f"(tile_m + tile_n) x tile_k x {size.value} B fits the pipeline's LDS limit "
            f"({_lds_limits(table.value)}), whatever the arch's LDS", [table, size], "14.5")


def _lds_arch_capacity(revised: Reader, arch: str, size: TableValue) -> LdsBudget:
    """Upstream since PR #12173: the arch's LDS capacity, halved for a pipeline that double-buffers
    LDS (some always do, some only with double_smem_buffer set)."""
    capacity = revised("arch", "archs", arch, "lds_capacity_kb_arch_specs_json")
    double = revised("arch", "lds_double_buffered_pipelines")
    always, optional = double.value["always"], double.value["with_double_smem_buffer"]
    buffers = (lookup(F("pipeline"), dict.fromkeys(_codes(always), 2), 1, "buffers")
               + lookup(F("pipeline"), dict.fromkeys(_codes(optional), 1), 0, "extra_buffer_with_dsb")
               * F("double_smem_buffer"))
    single = [p.value for p in Pipeline if p.value not in always + optional]
    return (lds_bytes(*TILE, size.value) <= Const(capacity.value * 1024) // buffers,
            f"(tile_m + tile_n) x tile_k x {size.value} B fits {arch}'s {capacity.value} KiB of LDS, halved when "
            f"the pipeline double-buffers it: {_or(always)} always, {_or(optional)} with double_smem_buffer "
            f"({_or(single)} single-buffered)", [capacity, double, size], None)


LDS_BUDGETS: dict[str, Callable[[Reader, str, TableValue], LdsBudget]] = {
    "per_pipeline": _lds_per_pipeline,
    "arch_capacity": _lds_arch_capacity,
}
FORMULATIONS: dict[str, dict[str, Callable]] = {"lds_budget": LDS_BUDGETS}
"""Per rule that has more than one, its formulations by the name a rule revision gives them
(``revisions.json`` ``rules``)."""


@cache
def gemm_rules(arch: str, variant: Variant, dtype: Dtype, revision: str | None = None) -> tuple[Rule, ...]:
    """The rules of a GEMM config in cell (arch, variant, *, dtype), in upstream check order, as rule
    revision ``revision`` (None: the newest) has them: its tables and its formulation of each rule."""
    rev = rules_revision(revision)
    revised = partial(read, revision=rev)
    facts = arch_facts(arch, rev.name)
    arch = facts.name
    w = facts.warp_size
    warp_size_rule = revised("arch", "warp_size_rule")
    rules: list[Rule] = []

    def add(name: str, predicate: Predicate, expr: Expr, text: str, source: str, reads: Iterable[TableValue] = (),
            quirk: str | None = None) -> None:
        rules.append(Rule(name, predicate, expr, text, source, quirk, tuple(reads)))

    def for_arch(*keys: str) -> TableValue:
        return revised("validity", "is_valid_for_arch", *keys)

    def config_valid(*keys: str) -> TableValue:
        return revised("validity", "is_config_valid", *keys)

    # -- structure: fields of ckspace's own model that must agree with each other --------------
    add("streamk_fields", Predicate.STRUCTURE,
        all_of(F("streamk_enabled").eq(F("streamk_strategy").ne(StreamKStrategy.NONE.code)),
               implies(F("streamk_persistent").eq(1), F("streamk_enabled").eq(1))),
        "stream-K is enabled exactly when a strategy is set, and persistence needs stream-K",
        "ckspace model")

    # -- TileConfig.is_valid (full only) -----------------------------------------------------------
    add("tile_divisibility", Predicate.TILE_DIVISIBILITY,
        all_of(*(t > 0 for t in TILE),
               *((t % (wv * wp)).eq(0) for t, wv, wp in zip(TILE, WAVE, WARP))),
        "each tile dimension is positive and a multiple of waves x warp tile along it (wave_k counted)",
        "codegen_common.py TileConfig.is_valid")

    # -- GroupedConvKernelConfig.is_valid_for_arch ---------------------------------------------------
    invalid = revised("validity", "trait_invalid_combos")
    add("trait_combo", Predicate.IS_VALID_FOR_ARCH, Not(in_table(TRAIT, _trait_rows(invalid.value))),
        f"no {_combos(invalid.value)}",
        f"{FOR_ARCH} step 1: codegen_common.py TraitConfigBase.is_valid", [invalid])
    streamk = for_arch("streamk_variants")
    add("streamk_variant", Predicate.IS_VALID_FOR_ARCH,
        TRUE if variant.value in streamk.value else F("streamk_enabled").eq(0),
        f"stream-K is only for {_or(streamk.value)}",
        f"{FOR_ARCH} step 2: {FULL_RULES} is_streamk_valid_for_variant", [streamk])
    blocked = for_arch("blocked_pipelines_by_variant")
    pipelines = blocked.value.get(variant.value, [])
    add("pipeline_variant", Predicate.IS_VALID_FOR_ARCH,
        Not(F("pipeline").isin(_codes(pipelines))) if pipelines else TRUE,
        _blocked(blocked.value), f"{FOR_ARCH} step 3: {FULL_RULES} is_valid_pipeline_for_variant", [blocked])
    odd = for_arch("vector_width_rule", "odd_allowed")
    add("vec_parity", Predicate.IS_VALID_FOR_ARCH,
        all_of(*(any_of(v.isin(odd.value), (v % 2).eq(0)) for v in (F("vec_a"), F("vec_b"), F("vec_c")))),
        f"every vector width is even or {_or(odd.value)}", f"{FOR_ARCH} step 4: {FULL_RULES} check_vectors",
        [odd])
    combos = revised("arch", "archs", arch, "wave_combos")
    add("wave_combo", Predicate.IS_VALID_FOR_ARCH, in_table(WAVE, combos.value),
        f"(wave_m, wave_n, wave_k) is one of {arch}'s wave combos: {_shapes(combos.value)}",
        f"{FOR_ARCH} step 5: arch_specs_generated.py WARP_SUPPORTED_COMBINATIONS", [combos])
    wmma_size = for_arch("wmma", "applies_to_warp_size")
    k_floor, exempt, untagged = (for_arch("wmma", key) for key in
                                 ("min_warp_tile_k_unless_float", "exempt_dtype", "untagged_dtype"))
    is_wmma = w == wmma_size.value
    tag_exempt = dtype.value == exempt.value
    untagged_exempt = untagged.value == exempt.value
    k_min = F("warp_tile_k") >= k_floor.value
    wmma_k: Expr = TRUE
    if is_wmma and not (tag_exempt and untagged_exempt):
        wmma_k = all_of(
            TRUE if tag_exempt else implies(F("tagged").eq(1), k_min),
            TRUE if untagged_exempt else implies(F("tagged").eq(0), k_min),
        )
    wmma_step = f"{FOR_ARCH} step 6: {DEFAULT_RULES} check_wmma_instance"
    add("wmma_warp_tile_k", Predicate.IS_VALID_FOR_ARCH, wmma_k,
        f"on warp-size-{wmma_size.value} archs warp_tile_k >= {k_floor.value} unless the config's dtype tag "
        f"is '{exempt.value}' (untagged configs count as '{untagged.value}')", wmma_step,
        [warp_size_rule, wmma_size, k_floor, exempt, untagged], quirk="14.3")
    add("wmma_k_coverage", Predicate.IS_VALID_FOR_ARCH,
        (F("wave_k") * F("warp_tile_k") <= F("tile_k")) if is_wmma else TRUE,
        f"on warp-size-{wmma_size.value} archs wave_k x warp_tile_k <= tile_k", wmma_step,
        [warp_size_rule, wmma_size])
    forbidden_m = for_arch("wmma", "forbidden_warp_tile_m")
    add("wmma_warp_tile_m", Predicate.IS_VALID_FOR_ARCH,
        Not(F("warp_tile_m").isin(forbidden_m.value)) if is_wmma else TRUE,
        f"on warp-size-{wmma_size.value} archs warp_tile_m is not {_or(forbidden_m.value)}", wmma_step,
        [warp_size_rule, wmma_size, forbidden_m])
    coverage = for_arch("tile_coverage_pipelines")
    cover = F("pipeline").isin(_codes(coverage.value))
    block = w * F("wave_m") * F("wave_n") * F("wave_k")
    for side, dim, vec in (("a", "tile_m", "vec_a"), ("b", "tile_n", "vec_b")):
        add(f"compv6_coverage_{side}", Predicate.IS_VALID_FOR_ARCH,
            implies(cover, F(dim) * F("tile_k") >= block * F(vec)),
            f"{_or(coverage.value)}: {dim} x tile_k covers one {vec} load per thread ({w} x waves threads)",
            f"{FOR_ARCH} step 7: {DEFAULT_RULES} check_tile_coverage", [warp_size_rule, coverage])
    no_streamk = for_arch("streamk_forbidden_warp_size")
    add("streamk_wave32", Predicate.IS_VALID_FOR_ARCH,
        F("streamk_enabled").eq(0) if w == no_streamk.value else TRUE,
        f"no stream-K on warp-size-{no_streamk.value} archs",
        f"{FOR_ARCH} step 8: {DEFAULT_RULES} check_wmma_native_warp_tile", [warp_size_rule, no_streamk])

    # -- is_config_valid: ArchFilter.is_kernel_valid, non-strict, wave_k forced -----------------------
    operator, min_tile, alignment = (config_valid("operators", variant.value, key)
                                     for key in ("operator", "min_tile", "tile_alignment"))
    wave_k = config_valid("forced_wave_k")
    add("op_min_tile", Predicate.IS_CONFIG_VALID,
        all_of(*(t >= m for t, m in zip(TILE, min_tile.value))),
        f"{operator.value}: tile >= {min_tile.value} (m, n, k)",
        _config_check(1, "_validate_operator_constraints"), [operator, min_tile])
    add("op_tile_alignment", Predicate.IS_CONFIG_VALID,
        all_of(*((t % a).eq(0) for t, a in zip(TILE, alignment.value) if a > 1)),
        f"{operator.value}: tile is a multiple of {alignment.value} (m, n, k; 1 = unchecked)",
        _config_check(1, "_validate_operator_constraints"), [operator, alignment])
    dimensions = _config_check(2, "_validate_dimensions")
    add("positive_dims", Predicate.IS_CONFIG_VALID,
        all_of(*(d > 0 for d in (*TILE, F("wave_m"), F("wave_n"), *WARP))),
        "tile, waves and warp tile are positive", dimensions)
    add("fit_m", Predicate.IS_CONFIG_VALID, F("wave_m") * F("warp_tile_m") <= F("tile_m"),
        "wave_m x warp_tile_m <= tile_m", dimensions)
    add("fit_n", Predicate.IS_CONFIG_VALID, F("wave_n") * F("warp_tile_n") <= F("tile_n"),
        "wave_n x warp_tile_n <= tile_n", dimensions)
    add("fit_k", Predicate.IS_CONFIG_VALID, F("warp_tile_k") * wave_k.value <= F("tile_k"),
        f"warp_tile_k x {wave_k.value} (wave_k forced) <= tile_k", dimensions, [wave_k])
    forced = [(m, n) for m, n, k in combos.value if k == wave_k.value]
    add("wave_list", Predicate.IS_CONFIG_VALID, in_table((F("wave_m"), F("wave_n")), forced),
        f"(wave_m, wave_n, {wave_k.value}) is one of {arch}'s wave combos (wave_k forced to {wave_k.value}): "
        f"{_shapes((m, n, wave_k.value) for m, n in forced)}",
        _config_check(3, "_validate_warp_config"), [wave_k, combos], quirk="14.2")
    tiles = revised("arch", "archs", arch, "warp_tiles", dtype.key, default=None)
    add("warp_tile_list", Predicate.IS_CONFIG_VALID, in_table(WARP, tiles.value) if tiles.value is not None else TRUE,
        f"the warp tile is one of {arch}'s {dtype.key} warp tiles: {_shapes(tiles.value)}" if tiles.value is not None
        else f"{arch} has no {dtype.key} warp tiles, which the config check lets pass with a warning",
        _config_check(4, "_validate_warp_tile_combo"), [tiles], quirk="14.7" if w == 32 else "14.8")
    backward, allowed = config_valid("backward_variants"), config_valid("backward_allowed_pipelines")
    add("backward_pipeline", Predicate.IS_CONFIG_VALID,
        F("pipeline").isin(_codes(allowed.value)) if variant.value in backward.value else TRUE,
        f"{' and '.join(backward.value)} only run {_or(allowed.value)}",
        _config_check(5, "_validate_trait_combo"), [backward, allowed], quirk="14.1")
    unsupported = revised("arch", "trait_unsupported_combos")
    add("arch_trait_table", Predicate.IS_CONFIG_VALID, Not(in_table(TRAIT, _trait_rows(unsupported.value))),
        f"no {_combos(unsupported.value)} (the arch table's unsupported combos)",
        _config_check(5, "_validate_trait_combo") + " with arch_specs_generated.py TRAIT_UNSUPPORTED_COMBINATIONS",
        [unsupported])
    size = revised("arch", "element_size_bytes", dtype.value)
    formulation, introduced = rev.formulation("lds_budget")
    expr, text, reads, quirk = LDS_BUDGETS[formulation](revised, arch, size)
    source = _config_check(6, "_validate_lds_capacity")
    if introduced.parent is not None:
        source += f", rules revision {introduced.name}: {introduced.upstream}"
    add("lds_budget", Predicate.IS_CONFIG_VALID, expr, text, source, reads, quirk=quirk)
    alignment_check = _config_check(7, "_validate_dimension_alignment")
    add("align_m", Predicate.IS_CONFIG_VALID, (F("tile_m") % (F("wave_m") * F("warp_tile_m"))).eq(0),
        "tile_m is a multiple of wave_m x warp_tile_m", alignment_check)
    add("align_n", Predicate.IS_CONFIG_VALID, (F("tile_n") % (F("wave_n") * F("warp_tile_n"))).eq(0),
        "tile_n is a multiple of wave_n x warp_tile_n", alignment_check)
    add("align_k", Predicate.IS_CONFIG_VALID, (F("tile_k") % (F("warp_tile_k") * wave_k.value)).eq(0),
        f"tile_k is a multiple of warp_tile_k x {wave_k.value} (wave_k forced)", alignment_check, [wave_k])
    return tuple(rules)


def _ceil_div(a: Expr, b: Expr) -> Expr:
    return (a + b - 1) // b


@cache
def depthwise_rules() -> tuple[Rule, ...]:
    """The generation-time depthwise checks, on depthwise fields; each names the constraint number
    upstream's ``is_valid_depthwise_config`` gives it."""
    def validation(key: str) -> TableValue:
        return read("depthwise", "validation", key)

    block, size, smem, capped, lds_loads = (validation(k) for k in (
        "block_size", "element_size_bytes", "max_smem_bytes", "in_vec_internal_cap", "max_lds_w_vector_loads"))
    bs, es, cap = block.value, size.value, capped.value
    th, tw, flt = F("tile_h"), F("tile_w"), F("filter")
    sh, sw, ph, pw = F("stride_h"), F("stride_w"), F("pad_h"), F("pad_w")
    sub_h, sub_w, in_vec, out_vec = F("sub_h"), F("sub_w"), F("in_vec"), F("out_vec")
    pow2 = [1 << i for i in range(8)]
    subtiles = _ceil_div(th, sub_h) * _ceil_div(tw, sub_w)
    tpw = bs // subtiles
    ivi = lookup(in_vec, {x: min(x, cap) for x in pow2}, cap)
    lds_w = tw * sw + 2 * pw
    lds_h = th * sh + 2 * ph
    roundup_a = _ceil_div(lds_w, in_vec) * in_vec
    roundup_b = _ceil_div(lds_w + pw, ivi) * ivi
    stride_a_wins = roundup_a >= roundup_b
    smem_a = lds_h * roundup_a * tpw * es <= smem.value
    smem_b = lds_h * roundup_b * tpw * es <= smem.value

    def rule(name: str, constraint: int, expr: Expr, text: str, *reads: TableValue) -> Rule:
        return Rule(name, Predicate.DEPTHWISE, expr, text, f"{DEPTHWISE_CHECK}, constraint {constraint}",
                    reads=reads)

    return (
        rule("dw_filter", 5, all_of(flt >= 1, (flt % 2).eq(1)), "filter is odd and >= 1"),
        rule("dw_vec_pow2", 6, all_of(in_vec.isin(pow2), out_vec.isin(pow2)), "in_vec and out_vec are powers of two"),
        rule("dw_sub_tile", 7, all_of(sub_h >= 1, sub_h <= th, sub_w >= 1, sub_w <= tw),
             "1 <= sub <= tile in each dimension"),
        rule("dw_stride_w", 9, any_of(sw.eq(1), (sw % 2).eq(0)), "stride_w is 1 or even"),
        rule("dw_pad_w", 15, pw > 0, "pad_w > 0"),
        rule("dw_subtiles", 8, subtiles <= bs, f"ceil(th/sub_h) x ceil(tw/sub_w) <= {bs} (threads per block)",
             block),
        rule("dw_nbatch", 13, all_of(tpw >= 1, (F("nbatch") % tpw).eq(0)),
             f"nbatch is a multiple of {bs} // subtiles (tiles per wave)", block),
        rule("dw_in_vec_sub_w", 14, ((sub_w * sw) % ivi).eq(0), f"sub_w x stride_w is a multiple of min(in_vec, {cap})",
             capped),
        rule("dw_lds_w", 16, _ceil_div(lds_w, in_vec) <= lds_loads.value,
             f"ceil((tw x sw + 2 pw) / in_vec) <= {lds_loads.value}", lds_loads),
        rule("dw_smem", 17, any_of(all_of(stride_a_wins, smem_a), all_of(Not(stride_a_wins), smem_b)),
             f"the LDS tile (rows x padded row stride x tiles per wave x {es} B) fits {smem.value} B",
             block, size, smem, capped),
    )
