"""Lint a rule set: what it proposes that the generator throws away, and why.

For every arch and cell the rule set's proposals are classified rule by rule, and the report lists
empty cells, proposals the validity predicates remove (grouped by the rules responsible), table
entries (tiles, pipelines, features) that never yield a valid kernel, duplicates, checks that
pass only because arch data is missing, proposals whose verdict an inconsistent upstream rule decides
(:mod:`ckspace.constraints.linting.lint_run` measures them) and arch facts upstream's two tables disagree on.
A finding that shows an upstream inconsistency is tagged with it (``Finding.spec``, a key of
:data:`QUIRKS`; ``docs/rules.md`` lists them), and appears only where the rule set's proposals or
the arch's facts show it under the rules revision asked for. Lint is a report: findings are not
errors.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

from ckspace.constraints.evaluators.classify import satisfies_all
from ckspace.constraints.generate.sampling import category
from ckspace.constraints.linting.lint_run import (
    COVERAGE_RULES,
    TABLE_DISPUTES,
    Finding,
    Removals,
    Run,
    VerdictChanges,
    gate_block_changes,
    removals,
    table_disputes,
    vec_gate_warp,
    wmma_tag_changes,
)
from ckspace.constraints.rulebook.known_wrong import known_wrong_rules
from ckspace.constraints.rulesets import get_rule_set
from ckspace.core.fields import DEPTHWISE_DEFAULTS, FIELD_INDEX, GEMM_FIELD_NAMES
from ckspace.core.naming import gemm_name
from ckspace.core.revisions import Quirk
from ckspace.core.vocab import Layout

_I = FIELD_INDEX

QUIRKS: dict[Quirk, str] = {
    Quirk.BACKWARD_PIPELINES: (
        "The two validity checks disagree on backward pipelines: is_config_valid lets bwd_data and "
        "bwd_weight run only compv3 or mem, is_valid_for_arch bans only compv5, and `full` proposes mostly "
        "other pipelines, so all of its bwd_data and most of its bwd_weight proposals are discarded."
    ),
    Quirk.WAVE_K_FORCED: (
        "is_config_valid checks every config as if wave_k were 1: a proposal with wave_k > 1 that passed "
        "is_valid_for_arch fails when (wave_m, wave_n, 1) is not one of the arch's wave combos, and the "
        "tile_k alignment ignores wave_k."
    ),
    Quirk.WMMA_DTYPE_TAG: (
        "The WMMA warp_tile_k floor exempts the dtype tag 'float', which no tagged config carries: "
        "fp32-tagged configs are held to it, while untagged ones (all of `default`) never are."
    ),
    Quirk.MISSING_WARP_TILES: (
        "An arch without a warp-tile list for the dtype turns the warp-tile check into a warning, so the "
        "config passes unchecked (fp32 on the warp-size-32 archs)."
    ),
    Quirk.LDS_ARCH_BLIND: (
        "The LDS budget depends on the pipeline alone (64 KiB unless listed): neither the arch's LDS size "
        "(160 KiB on gfx950) nor the double LDS buffer changes it."
    ),
    Quirk.VECTOR_GATE_WARP_SIZE: (
        "tile_math's vector gate sizes a proposal's vectors for blocks of 64 threads per wave on every arch, "
        "while the compv6 tile-coverage rule of is_valid_for_arch counts the arch's real warp size: on the "
        "warp-size-32 archs some compv6 proposals pass the coverage rule only because the two disagree."
    ),
    Quirk.WARP_TILE_K_UNCHECKED: (
        "`full` derives warp_tile_k by formula and never checks it against the arch's warp-tile list, so on "
        "gfx1100, gfx1200 and gfx1201 no GEMM proposal survives the config check."
    ),
    Quirk.STRUCTURAL_FALLBACK: (
        "When none of a tile's curated waves fits the arch, `full` falls back to every structural (wave, "
        "warp tile) pair, ignoring its curated tables and exclusions; the fallback can repeat a pair, which "
        "the deduplication then drops."
    ),
    Quirk.NO_1D_TILES: (
        "The tile tables have no 1D entries, so `full` proposes only feature configs (no base tiles) in 1D cells."
    ),
    Quirk.LAYOUT_NAME: (
        "`default` and `full` name 3D kernels with layout nhwgc, other rule sets with ndhwgc: one kernel can "
        "carry two names."
    ),
    Quirk.TINY_PER_CATEGORY: (
        "`tiny` picks per category and ndim, not per variant, so a request for several variants can give a "
        "variant nothing (bwd_data in every combined request)."
    ),
    Quirk.COMPV4_DOUBLED_TILE_K: (
        "`default` doubles tile_k for its compv4 tiles, and the doubled tiles exceed compv4's 32 KiB LDS "
        "budget: they are generated only to be rejected."
    ),
    Quirk.KNOWN_WRONG_EMITTED: (
        "Upstream documents some configs as giving wrong results (bwd_weight fp16/bf16 interwave compv1/mem "
        "with more than one wave along M and N) in a comment, yet `full` still proposes and emits them."
    ),
    Quirk.ARCH_TABLES_DISAGREE: (
        "Upstream's two arch tables, arch_specs.json and the arch_specs_generated.py the rules read, "
        "disagree for gfx1250 (8-bit warp tiles only the .json lists, a preshuffle warp-tile table only the "
        ".py has): they are not generated from each other at these commits. Later upstream regenerates the "
        ".py from the .json, and they agree."
    ),
    Quirk.DEPTHWISE_UNCHECKED: (
        "Depthwise configs are emitted without any arch check, on warp-size-32 archs too, where their fixed "
        "64-thread blocks are doubtful."
    ),
}
"""The upstream inconsistencies lint findings and rules are tagged with (``Finding.spec``, ``Rule.quirk``),
in words; their ids are stated once, by :class:`~ckspace.core.revisions.Quirk`."""


def lint(rule_set: str, arch: str, rules_revision: str | None = None) -> list[Finding]:
    """Findings for one rule set on one arch (all variants, ndims and dtypes the rule set answers
    there, in one request; none when it refuses them all) under rule revision ``rules_revision``
    (None: the default): a quirk that revision fixes is not reported, because no rule of it carries
    the quirk any more and its facts no longer show it."""
    run = Run.of(rule_set, arch, rules_revision)
    if run is None:
        return []
    tally = removals(run)
    return [
        *_empty_cells(run),
        *_removed_by_rules(run, tally),
        *_no_gemm_kernels(run),
        *_wave_k_forced(run, tally),
        *_wmma_dtype_tag(run),
        *_lds_limit_arch_blind(run, tally),
        *_vec_gate_warp_size(run),
        *_dead_entries(run, tally),
        *_duplicates(run),
        *_name_collisions(run),
        *_unchecked_warp_tiles(run),
        *_depthwise_on_wave32(run),
        *_known_wrong_emitted(run),
        *_arch_tables_disagree(run),
        *_feature_only_cells(run),
        *_layout_names(run),
    ]


def _empty_cells(run: Run) -> Iterator[Finding]:
    """Cells that emit nothing, by variant, and variants nothing is proposed for."""
    results = run.results
    for variant in run.request.variants:
        cells = [c for c in run.request.cells if c.variant is variant]
        empty = [c for c in cells if results[c].count_valid == 0]
        proposed = sum(results[c].count_raw for c in empty)
        if empty:
            why = f"{proposed} proposals there, all rejected" if proposed else "nothing proposed there"
            yield run.finding(
                "empty_cells",
                f"{variant.value}: {len(empty)} of {len(cells)} cells emit nothing ({why})",
                len(empty),
                empty,
                spec=Quirk.BACKWARD_PIPELINES if proposed and variant.is_backward else None,
            )
        if not any(results[c].count_raw for c in cells):
            yield run.finding(
                "variant_without_proposals",
                f"{variant.value} gets no proposal at all in a request for every cell",
                1,
                spec=Quirk.TINY_PER_CATEGORY if get_rule_set(run.rule_set).request_wide else None,
            )


def _removed_by_rules(run: Run, tally: Removals) -> Iterator[Finding]:
    for names, count in tally.removed.most_common():
        yield run.finding(
            "removed_by_rules",
            f"{count} proposals removed by {' + '.join(names)}",
            count,
            rules=names,
            spec=tally.quirk_of[names],
        )


def _no_gemm_kernels(run: Run) -> Iterator[Finding]:
    results = run.results.values()
    gemm_raw = sum(len(r.gemm) for r in results)
    if gemm_raw and not any(any(r.gemm_valid) for r in results):
        depthwise = sum(sum(r.depthwise_valid) for r in results)
        yield run.finding(
            "no_gemm_kernels",
            f"none of {gemm_raw} GEMM proposals is valid on {run.arch}; only {depthwise} depthwise kernels are emitted",
            gemm_raw,
            spec=Quirk.WARP_TILE_K_UNCHECKED,
        )


def _wave_k_forced(run: Run, tally: Removals) -> Iterator[Finding]:
    if tally.forced_wave_k:
        yield run.finding(
            "wave_k_forced",
            f"{tally.forced_wave_k} proposals with wave_k > 1 pass is_valid_for_arch "
            "but fail the config check, which forces wave_k to 1",
            tally.forced_wave_k,
            rules=["wave_list"],
            spec=Quirk.WAVE_K_FORCED,
        )


def _wmma_dtype_tag(run: Run) -> Iterator[Finding]:
    """Proposals whose arch-check verdict the WMMA rule's dtype-tag comparison decides (quirk 14.3):
    untagged ones with a small warp_tile_k that pass as 'float' whatever their dtype, fp32-tagged ones
    it holds to the floor although fp32 is the 'float' it means to exempt."""
    changes = wmma_tag_changes(run)
    if changes.decided:
        yield run.finding(
            "wmma_dtype_tag",
            _verdicts(
                changes,
                "pass is_valid_for_arch only because untagged configs count as 'float' in its WMMA warp_tile_k floor",
                "fail it only because the floor takes their tag 'fp32' for a dtype other than 'float'",
            ),
            changes.decided,
            changes.cells,
            rules=["wmma_warp_tile_k"],
            spec=Quirk.WMMA_DTYPE_TAG,
        )


def _lds_limit_arch_blind(run: Run, tally: Removals) -> Iterator[Finding]:
    if tally.lds_blind:
        yield run.finding(
            "lds_limit_arch_blind",
            f"{tally.lds_blind} proposals exceed the per-pipeline LDS limit "
            f"although {run.arch} has {run.facts.lds_capacity_kb} KiB of LDS",
            tally.lds_blind,
            rules=["lds_budget"],
            spec=Quirk.LDS_ARCH_BLIND,
        )


def _vec_gate_warp_size(run: Run) -> Iterator[Finding]:
    """compv6 proposals whose coverage verdict turns on the two block sizes (quirk 14.6): the vector
    gate counted 64 threads per wave, the coverage rule counts the arch's warp size."""
    changes = gate_block_changes(run)
    if changes.decided:
        gate = vec_gate_warp()
        yield run.finding(
            "vec_gate_warp_size",
            _verdicts(
                changes,
                f"pass is_valid_for_arch only because its compv6 coverage rule counts {run.facts.warp_size} threads "
                f"per wave where the vector gate that chose their widths counted {gate}",
                f"fail its compv6 coverage rule, which counts {run.facts.warp_size} threads per wave, although "
                f"they cover a block of {gate} threads per wave as the vector gate sized them",
            ),
            changes.decided,
            changes.cells,
            rules=COVERAGE_RULES,
            spec=Quirk.VECTOR_GATE_WARP_SIZE,
        )


def _verdicts(changes: VerdictChanges, admitted: str, rejected: str) -> str:
    """The words for proposals an inconsistency decides: those it admits, those it rejects, and
    whether it decides what the generator emits or only the arch check's verdict."""
    counts = ((changes.admitted, admitted), (changes.decided - changes.admitted, rejected))
    said = "; ".join(f"{n} proposals {words}" for n, words in counts if n)
    if changes.emitted:
        return f"{said} ({changes.emitted} of them pass the config check too: it decides whether they are emitted)"
    return f"{said} (the config check removes them all: it decides the arch check's verdict, not what is emitted)"


def _dead_entries(run: Run, tally: Removals) -> Iterator[Finding]:
    """Table entries (tiles, pipelines, features) proposed but never valid."""
    for kind, groups in tally.dead.items():
        for key, (proposed, valid) in sorted(groups.items()):
            if proposed and not valid:
                yield run.finding(
                    f"dead_{kind}",
                    f"{key[0]} {kind} {key[1]}: {proposed} proposals, none valid",
                    proposed,
                    spec=Quirk.COMPV4_DOUBLED_TILE_K if run.rule_set == "default" and kind == "tile" else None,
                )


def _duplicates(run: Run) -> Iterator[Finding]:
    duplicates = sum(p.duplicates for p in run.proposals.values())
    if duplicates:
        yield run.finding(
            "duplicates",
            f"{duplicates} generated configs repeat an earlier one and are dropped",
            duplicates,
            spec=Quirk.STRUCTURAL_FALLBACK,
        )


def _name_collisions(run: Run) -> Iterator[Finding]:
    names: Counter[str] = Counter()
    for cell, result in run.results.items():
        names.update(gemm_name(cell.variant, cell.dtype, cell.ndim, row) for row in result.gemm)
    collisions = sum(n - 1 for n in names.values() if n > 1)
    if collisions:
        yield run.finding("name_collisions", f"{collisions} proposals share a name with a different config", collisions)


def _unchecked_warp_tiles(run: Run) -> Iterator[Finding]:
    results = run.results
    no_table = [c for c in run.request.cells if results[c].gemm_valid and run.facts.warp_tiles_for(c.dtype) is None]
    if no_table:
        count = sum(sum(results[c].gemm_valid) for c in no_table)
        yield run.finding(
            "unchecked_warp_tiles",
            f"{count} valid configs whose warp tile was never checked: "
            f"{run.arch} has no warp-tile table for their dtype, which the config check treats as a pass",
            count,
            no_table,
            rules=["warp_tile_list"],
            spec=Quirk.MISSING_WARP_TILES,
        )


def _depthwise_on_wave32(run: Run) -> Iterator[Finding]:
    if run.facts.warp_size != 32:
        return
    results = run.results
    dw = [c for c in run.request.cells if any(results[c].depthwise_valid)]
    if dw:
        count = sum(sum(results[c].depthwise_valid) for c in dw)
        yield run.finding(
            "depthwise_on_wave32",
            f"{count} depthwise kernels with {DEPTHWISE_DEFAULTS['block_size']}-thread blocks are emitted without "
            "an arch check on a warp-size-32 arch",
            count,
            dw,
            spec=Quirk.DEPTHWISE_UNCHECKED,
        )


def _known_wrong_emitted(run: Run) -> Iterator[Finding]:
    """Valid kernels upstream documents as wrong (quirk 14.15), and the cells that have them."""
    cells, total = [], 0
    for cell, result in run.results.items():
        rules = known_wrong_rules(cell.variant, cell.dtype)
        valid = [row for row, ok in zip(result.gemm, result.gemm_valid, strict=True) if ok]
        if not rules or not valid:
            continue
        wrong = len(valid) - sum(satisfies_all(rules, valid, GEMM_FIELD_NAMES))
        if wrong:
            cells.append(cell)
            total += wrong
    if total:
        yield run.finding(
            "known_wrong_emitted",
            f"{total} valid kernels are ones upstream documents as giving wrong "
            "results (every target leaves them out; --rules-only keeps them)",
            total,
            cells,
            rules=["bwd_weight_half_interwave_multiwave"],
            spec=Quirk.KNOWN_WRONG_EMITTED,
        )


def _arch_tables_disagree(run: Run) -> Iterator[Finding]:
    """Entries of the arch upstream's two arch tables hold differently (quirk 14.16), and whether a
    rule of the run's cells reads one (the warp-tile lists of their dtypes)."""
    disputed = table_disputes(run)
    if disputed:
        read = sorted({f"warp_tiles.{d.key}" for d in run.request.dtypes} & set(disputed))
        yield run.finding(
            "arch_tables_disagree",
            f"upstream's arch tables disagree on {run.arch}'s {', '.join(disputed)} ({TABLE_DISPUTES} of the arch "
            "table); " + (f"the rules read {', '.join(read)}" if read else "no rule of these cells reads them"),
            len(disputed),
            spec=Quirk.ARCH_TABLES_DISAGREE,
        )


def _feature_only_cells(run: Run) -> Iterator[Finding]:
    results = run.results
    feature_only = [
        c
        for c in run.request.cells
        if results[c].gemm and all(category(c, False, row)[0] != "regular" for row in results[c].gemm)
    ]
    if feature_only:
        yield run.finding(
            "feature_only_cells",
            "cells proposed only feature configs (no base tiles)",
            len(feature_only),
            feature_only,
            spec=Quirk.NO_1D_TILES,
        )


def _layout_names(run: Run) -> Iterator[Finding]:
    misnamed = [
        c
        for c in run.request.cells
        if c.ndim == 3 and any(row[_I["layout"]] == Layout.NHWGC.code for row in run.results[c].gemm)
    ]
    if misnamed:
        yield run.finding(
            "layout_name", "3D kernels are named with layout nhwgc", len(misnamed), misnamed, spec=Quirk.LAYOUT_NAME
        )
