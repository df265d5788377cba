"""The rules of upstream's config check, ``UnifiedGroupedConvCodegen.is_config_valid``, one function
per check in the order it runs them.

The generator applies this check to everything it emits: ``arch_filter.py``
``ArchFilter.is_kernel_valid`` in non-strict mode with wave_k forced to 1, whose ``_validate_*``
checks run in order. The LDS budget is the one check upstream changed between rule revisions: it
has one formulation per state (:data:`LDS_BUDGETS`), and each revision names the one it uses.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from ckspace.constraints.language.expr import TRUE, Const, Expr, Not, all_of, in_table, lookup
from ckspace.constraints.language.rule import TILE, WARP, Rule, TableValue, or_words
from ckspace.constraints.rulebook.gemm_cell import TRAIT, F, GemmCell, Reader, combos, shapes, trait_rows
from ckspace.core.arch import lds_bytes, pipeline_lds_limit
from ckspace.core.revisions import Quirk
from ckspace.core.vocab import Pipeline, Predicate


def config_check_rules(cell: GemmCell) -> tuple[Rule, ...]:
    """The rules of ``is_config_valid`` in ``cell``, check by check."""
    return (
        *_operator_constraints(cell),
        *_dimensions(cell),
        _wave_list(cell),
        _warp_tile_list(cell),
        *_trait_checks(cell),
        _lds_budget(cell),
        *_dimension_alignment(cell),
    )


def _config_check(number: int, method: str) -> str:
    """Where check ``number`` of ``is_config_valid`` lives upstream."""
    return f"arch_filter.py ArchFilter.{method} (is_config_valid check {number})"


def _rule(
    name: str, expr: Expr, text: str, source: str, reads: Iterable[TableValue] = (), quirk: str | None = None
) -> Rule:
    return Rule(name, Predicate.IS_CONFIG_VALID, expr, text, source, quirk, tuple(reads))


def _operator_constraints(cell: GemmCell) -> tuple[Rule, ...]:
    """Check 1: the variant's operator's smallest tile and tile alignment."""
    operator, min_tile, alignment = (
        cell.config_valid("operators", cell.variant.value, key) for key in ("operator", "min_tile", "tile_alignment")
    )
    source = _config_check(1, "_validate_operator_constraints")
    return (
        _rule(
            "op_min_tile",
            all_of(*(t >= m for t, m in zip(TILE, min_tile.value, strict=True))),
            f"{operator.value}: tile >= {min_tile.value} (m, n, k)",
            source,
            [operator, min_tile],
        ),
        _rule(
            "op_tile_alignment",
            all_of(*((t % a).eq(0) for t, a in zip(TILE, alignment.value, strict=True) if a > 1)),
            f"{operator.value}: tile is a multiple of {alignment.value} (m, n, k; 1 = unchecked)",
            source,
            [operator, alignment],
        ),
    )


def _dimensions(cell: GemmCell) -> tuple[Rule, ...]:
    """Check 2: positive dimensions, and waves x warp tile within the tile (wave_k forced)."""
    wave_k = cell.forced_wave_k
    source = _config_check(2, "_validate_dimensions")
    return (
        _rule(
            "positive_dims",
            all_of(*(d > 0 for d in (*TILE, F("wave_m"), F("wave_n"), *WARP))),
            "tile, waves and warp tile are positive",
            source,
        ),
        _rule("fit_m", F("wave_m") * F("warp_tile_m") <= F("tile_m"), "wave_m x warp_tile_m <= tile_m", source),
        _rule("fit_n", F("wave_n") * F("warp_tile_n") <= F("tile_n"), "wave_n x warp_tile_n <= tile_n", source),
        _rule(
            "fit_k",
            F("warp_tile_k") * wave_k.value <= F("tile_k"),
            f"warp_tile_k x {wave_k.value} (wave_k forced) <= tile_k",
            source,
            [wave_k],
        ),
    )


def _wave_list(cell: GemmCell) -> Rule:
    """Check 3: the wave split, wave_k forced, is one of the arch's."""
    wave_k, wave_combos = cell.forced_wave_k, cell.wave_combos
    forced = [(m, n) for m, n, k in wave_combos.value if k == wave_k.value]
    return _rule(
        "wave_list",
        in_table((F("wave_m"), F("wave_n")), forced),
        f"(wave_m, wave_n, {wave_k.value}) is one of {cell.arch}'s wave combos (wave_k forced to {wave_k.value}): "
        f"{shapes((m, n, wave_k.value) for m, n in forced)}",
        _config_check(3, "_validate_warp_config"),
        [wave_k, wave_combos],
        quirk=Quirk.WAVE_K_FORCED,
    )


def _warp_tile_list(cell: GemmCell) -> Rule:
    """Check 4: the warp tile is one of the arch's for the dtype (a pass where it has none)."""
    arch, key = cell.arch, cell.dtype.key
    tiles = cell.revised("arch", "archs", arch, "warp_tiles", key, default=None)
    return _rule(
        "warp_tile_list",
        in_table(WARP, tiles.value) if tiles.value is not None else TRUE,
        f"the warp tile is one of {arch}'s {key} warp tiles: {shapes(tiles.value)}"
        if tiles.value is not None
        else f"{arch} has no {key} warp tiles, which the config check lets pass with a warning",
        _config_check(4, "_validate_warp_tile_combo"),
        [tiles],
        quirk=Quirk.WARP_TILE_K_UNCHECKED if cell.w == 32 else Quirk.STRUCTURAL_FALLBACK,
    )


def _trait_checks(cell: GemmCell) -> tuple[Rule, ...]:
    """Check 5: the pipelines backward variants run, and the arch table's unsupported traits."""
    backward, allowed = cell.config_valid("backward_variants"), cell.config_valid("backward_allowed_pipelines")
    unsupported = cell.revised("arch", "trait_unsupported_combos")
    source = _config_check(5, "_validate_trait_combo")
    return (
        _rule(
            "backward_pipeline",
            F("pipeline").isin(Pipeline.codes_of(allowed.value)) if cell.variant.value in backward.value else TRUE,
            f"{' and '.join(backward.value)} only run {or_words(allowed.value)}",
            source,
            [backward, allowed],
            quirk=Quirk.BACKWARD_PIPELINES,
        ),
        _rule(
            "arch_trait_table",
            Not(in_table(TRAIT, trait_rows(unsupported.value))),
            f"no {combos(unsupported.value)} (the arch table's unsupported combos)",
            source + " with arch_specs_generated.py TRAIT_UNSUPPORTED_COMBINATIONS",
            [unsupported],
        ),
    )


def _lds_budget(cell: GemmCell) -> Rule:
    """Check 6: the LDS budget, in the formulation the rule revision names."""
    size = cell.revised("arch", "element_size_bytes", cell.dtype.value)
    formulation, introduced = cell.rev.formulation("lds_budget")
    expr, text, reads, quirk = LDS_BUDGETS[formulation](cell.revised, cell.arch, size)
    source = _config_check(6, "_validate_lds_capacity")
    if introduced.parent is not None:
        source += f", rules revision {introduced.name}: {introduced.upstream}"
    return _rule("lds_budget", expr, text, source, reads, quirk=quirk)


def _dimension_alignment(cell: GemmCell) -> tuple[Rule, ...]:
    """Check 7: each tile dimension a multiple of waves x warp tile along it (wave_k forced)."""
    wave_k = cell.forced_wave_k
    source = _config_check(7, "_validate_dimension_alignment")
    return (
        _rule(
            "align_m",
            (F("tile_m") % (F("wave_m") * F("warp_tile_m"))).eq(0),
            "tile_m is a multiple of wave_m x warp_tile_m",
            source,
        ),
        _rule(
            "align_n",
            (F("tile_n") % (F("wave_n") * F("warp_tile_n"))).eq(0),
            "tile_n is a multiple of wave_n x warp_tile_n",
            source,
        ),
        _rule(
            "align_k",
            (F("tile_k") % (F("warp_tile_k") * wave_k.value)).eq(0),
            f"tile_k is a multiple of warp_tile_k x {wave_k.value} (wave_k forced)",
            source,
            [wave_k],
        ),
    )


# -- the LDS budget's formulations --------------------------------------------------------------

LdsBudget = tuple[Expr, str, list[TableValue], "str | None"]
"""An LDS-budget formulation's expression, words, table values read and quirk."""


def _lds_limits(limits: dict[str, int]) -> str:
    """The per-pipeline LDS limits of the pipelines ckspace knows, grouped by limit."""
    by_limit: dict[int, list[str]] = {}
    default = limits["default"]
    for pipeline in Pipeline:
        by_limit.setdefault(pipeline_lds_limit(limits, pipeline), []).append(pipeline.value)
    named = [f"{limit} B for {or_words(p)}" for limit, p in by_limit.items() if limit != default]
    return "; ".join([*named, f"{default} B for the others"])


def _lds_per_pipeline(revised: Reader, arch: str, size: TableValue) -> LdsBudget:
    """Upstream at 7cd53015: a budget per pipeline (64 KiB unless the table lists it), whatever the
    arch's LDS and whether the pipeline double-buffers it."""
    table = revised("arch", "lds_limit_bytes_by_pipeline")
    limits = {p.code: pipeline_lds_limit(table.value, p) for p in Pipeline}
    return (
        lds_bytes(*TILE, size.value) <= lookup(F("pipeline"), limits, max(limits.values())),
        f"(tile_m + tile_n) x tile_k x {size.value} B fits the pipeline's LDS limit "
        f"({_lds_limits(table.value)}), whatever the arch's LDS",
        [table, size],
        Quirk.LDS_ARCH_BLIND,
    )


def _lds_arch_capacity(revised: Reader, arch: str, size: TableValue) -> LdsBudget:
    """Upstream since PR #12173: the arch's LDS capacity, halved for a pipeline that double-buffers
    LDS (some always do, some only with double_smem_buffer set)."""
    capacity = revised("arch", "archs", arch, "lds_capacity_kb_arch_specs_json")
    double = revised("arch", "lds_double_buffered_pipelines")
    always, optional = double.value["always"], double.value["with_double_smem_buffer"]
    buffers = lookup(F("pipeline"), dict.fromkeys(Pipeline.codes_of(always), 2), 1, "buffers") + lookup(
        F("pipeline"), dict.fromkeys(Pipeline.codes_of(optional), 1), 0, "extra_buffer_with_dsb"
    ) * F("double_smem_buffer")
    single = [p.value for p in Pipeline if p.value not in always + optional]
    return (
        lds_bytes(*TILE, size.value) <= Const(capacity.value * 1024) // buffers,
        f"(tile_m + tile_n) x tile_k x {size.value} B fits {arch}'s {capacity.value} KiB of LDS, halved when "
        f"the pipeline double-buffers it: {or_words(always)} always, {or_words(optional)} with double_smem_buffer "
        f"({or_words(single)} single-buffered)",
        [capacity, double, size],
        None,
    )


LDS_BUDGETS: dict[str, Callable[[Reader, str, TableValue], LdsBudget]] = {
    "per_pipeline": _lds_per_pipeline,
    "arch_capacity": _lds_arch_capacity,
}
"""The LDS budget's formulations by the name a rule revision gives them (``revisions.json`` ``rules``)."""
