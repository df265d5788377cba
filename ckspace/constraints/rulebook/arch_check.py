"""The rules of upstream's arch check, ``GroupedConvKernelConfig.is_valid_for_arch``
(``unified_grouped_conv_codegen.py``), one function per step in the order it runs them.

The ``default`` and ``full`` rule sets call this check on their own proposals; its steps call
helpers of ``grouped_conv/grouped_config_rules_full.py`` and ``grouped_conv/grouped_config_rules_default.py``,
which each rule names as its source.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import partial

from ckspace.constraints.language.expr import TRUE, Expr, Not, all_of, any_of, implies, in_table
from ckspace.constraints.language.rule import WAVE, Rule, TableValue, or_words
from ckspace.constraints.rulebook.gemm_cell import TRAIT, F, GemmCell, combos, shapes, trait_rows
from ckspace.core.revisions import Quirk
from ckspace.core.vocab import Pipeline, Predicate

FOR_ARCH = "unified_grouped_conv_codegen.py GroupedConvKernelConfig.is_valid_for_arch"
FULL_RULES = "grouped_conv/grouped_config_rules_full.py"
DEFAULT_RULES = "grouped_conv/grouped_config_rules_default.py"


def arch_check_rules(cell: GemmCell) -> tuple[Rule, ...]:
    """The rules of ``is_valid_for_arch`` in ``cell``, step by step."""
    return (
        _trait_combo(cell),
        _streamk_variant(cell),
        _pipeline_variant(cell),
        _vec_parity(cell),
        _wave_combo(cell),
        *_wmma_instance(cell),
        *_tile_coverage(cell),
        _streamk_wave32(cell),
    )


def _step(
    step: int, helper: str, name: str, expr: Expr, text: str, reads: Iterable[TableValue] = (), quirk: str | None = None
) -> Rule:
    """A rule of step ``step``, which calls upstream's ``helper``."""
    return Rule(name, Predicate.IS_VALID_FOR_ARCH, expr, text, f"{FOR_ARCH} step {step}: {helper}", quirk, tuple(reads))


def _blocked(by_variant: dict[str, list[str]]) -> str:
    """The pipelines each variant rejects, variants sharing a list named together."""
    variants_of: dict[tuple[str, ...], list[str]] = {}
    for variant, pipelines in by_variant.items():
        variants_of.setdefault(tuple(pipelines), []).append(variant)
    return "; ".join(f"{or_words(p)} is not allowed for {or_words(v)}" for p, v in variants_of.items() if p)


def _trait_combo(cell: GemmCell) -> Rule:
    invalid = cell.revised("validity", "trait_invalid_combos")
    return _step(
        1,
        "codegen_common.py TraitConfigBase.is_valid",
        "trait_combo",
        Not(in_table(TRAIT, trait_rows(invalid.value))),
        f"no {combos(invalid.value)}",
        [invalid],
    )


def _streamk_variant(cell: GemmCell) -> Rule:
    streamk = cell.for_arch("streamk_variants")
    return _step(
        2,
        f"{FULL_RULES} is_streamk_valid_for_variant",
        "streamk_variant",
        TRUE if cell.variant.value in streamk.value else F("streamk_enabled").eq(0),
        f"stream-K is only for {or_words(streamk.value)}",
        [streamk],
    )


def _pipeline_variant(cell: GemmCell) -> Rule:
    blocked = cell.for_arch("blocked_pipelines_by_variant")
    pipelines = blocked.value.get(cell.variant.value, [])
    return _step(
        3,
        f"{FULL_RULES} is_valid_pipeline_for_variant",
        "pipeline_variant",
        Not(F("pipeline").isin(Pipeline.codes_of(pipelines))) if pipelines else TRUE,
        _blocked(blocked.value),
        [blocked],
    )


def _vec_parity(cell: GemmCell) -> Rule:
    odd = cell.for_arch("vector_width_rule", "odd_allowed")
    return _step(
        4,
        f"{FULL_RULES} check_vectors",
        "vec_parity",
        all_of(*(any_of(v.isin(odd.value), (v % 2).eq(0)) for v in (F("vec_a"), F("vec_b"), F("vec_c")))),
        f"every vector width is even or {or_words(odd.value)}",
        [odd],
    )


def _wave_combo(cell: GemmCell) -> Rule:
    wave_combos = cell.wave_combos
    return _step(
        5,
        "arch_specs_generated.py WARP_SUPPORTED_COMBINATIONS",
        "wave_combo",
        in_table(WAVE, wave_combos.value),
        f"(wave_m, wave_n, wave_k) is one of {cell.arch}'s wave combos: {shapes(wave_combos.value)}",
        [wave_combos],
    )


def _wmma_instance(cell: GemmCell) -> tuple[Rule, ...]:
    """Step 6: what upstream's WMMA instances (the archs of one warp size) need of the warp tile."""
    wmma_size = cell.for_arch("wmma", "applies_to_warp_size")
    k_floor, exempt, untagged = (
        cell.for_arch("wmma", key) for key in ("min_warp_tile_k_unless_float", "exempt_dtype", "untagged_dtype")
    )
    forbidden_m = cell.for_arch("wmma", "forbidden_warp_tile_m")
    is_wmma = cell.w == wmma_size.value
    tag_exempt = cell.dtype.value == exempt.value
    untagged_exempt = untagged.value == exempt.value
    k_min = F("warp_tile_k") >= k_floor.value
    wmma_k: Expr = TRUE
    if is_wmma and not (tag_exempt and untagged_exempt):
        wmma_k = all_of(
            TRUE if tag_exempt else implies(F("tagged").eq(1), k_min),
            TRUE if untagged_exempt else implies(F("tagged").eq(0), k_min),
        )
    helper = f"{DEFAULT_RULES} check_wmma_instance"
    step = partial(_step, 6, helper)
    on_wmma = f"on warp-size-{wmma_size.value} archs"
    return (
        _step(
            6,
            helper + _revised_by(cell, "wmma", "min_warp_tile_k_unless_float"),
            "wmma_warp_tile_k",
            wmma_k,
            f"{on_wmma} warp_tile_k >= {k_floor.value} unless the config's dtype tag is '{exempt.value}' "
            f"(untagged configs count as '{untagged.value}')",
            [cell.warp_size_rule, wmma_size, k_floor, exempt, untagged],
            quirk=Quirk.WMMA_DTYPE_TAG,
        ),
        step(
            "wmma_k_coverage",
            (F("wave_k") * F("warp_tile_k") <= F("tile_k")) if is_wmma else TRUE,
            f"{on_wmma} wave_k x warp_tile_k <= tile_k",
            [cell.warp_size_rule, wmma_size],
        ),
        step(
            "wmma_warp_tile_m",
            Not(F("warp_tile_m").isin(forbidden_m.value)) if is_wmma else TRUE,
            f"{on_wmma} warp_tile_m is not {or_words(forbidden_m.value)}",
            [cell.warp_size_rule, wmma_size, forbidden_m],
        ),
    )


def _revised_by(cell: GemmCell, *keys: str) -> str:
    """Where a parameter of this check comes from when a later rule revision changed it (empty for
    the shipped value): the WMMA warp_tile_k floor is the shipped one in the merged revisions and an
    upstream pull request's in ``pr12289``, and the rule's source says which."""
    changed = cell.rev.changed_by("validity", ("is_valid_for_arch", *keys))
    return "" if changed is None or changed.parent is None else f", rules revision {changed.name}: {changed.upstream}"


def _tile_coverage(cell: GemmCell) -> tuple[Rule, ...]:
    """Step 7: the pipelines that need one vector load per thread along each operand's tile."""
    coverage = cell.for_arch("tile_coverage_pipelines")
    cover = F("pipeline").isin(Pipeline.codes_of(coverage.value))
    block = cell.w * F("wave_m") * F("wave_n") * F("wave_k")
    return tuple(
        _step(
            7,
            f"{DEFAULT_RULES} check_tile_coverage",
            f"compv6_coverage_{side}",
            implies(cover, F(dim) * F("tile_k") >= block * F(vec)),
            f"{or_words(coverage.value)}: {dim} x tile_k covers one {vec} load per thread ({cell.w} x waves threads)",
            [cell.warp_size_rule, coverage],
        )
        for side, dim, vec in (("a", "tile_m", "vec_a"), ("b", "tile_n", "vec_b"))
    )


def _streamk_wave32(cell: GemmCell) -> Rule:
    no_streamk = cell.for_arch("streamk_forbidden_warp_size")
    return _step(
        8,
        f"{DEFAULT_RULES} check_wmma_native_warp_tile",
        "streamk_wave32",
        F("streamk_enabled").eq(0) if cell.w == no_streamk.value else TRUE,
        f"no stream-K on warp-size-{no_streamk.value} archs",
        [cell.warp_size_rule, no_streamk],
    )
