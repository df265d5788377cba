"""Lint a rule set: what it proposes that the generator throws away, and why.

For every arch and cell the rule set's proposals are classified rule by rule, and the report lists
empty cells, proposals the validity predicates remove (grouped by the rules responsible), table
entries (tiles, pipelines, features) that never yield a valid kernel, duplicates, and checks that
pass only because arch data is missing. A finding that shows an upstream inconsistency is tagged
with it (``Finding.spec``, a key of :data:`QUIRKS`; ``docs/rules.md`` lists them). Lint is a report:
findings are not errors.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field

import numpy as np
from pydantic import BaseModel

from ckspace.constraints.classify import columns, rule_masks, satisfies_all
from ckspace.constraints.enumerator import classify_cells, propose
from ckspace.constraints.generate.sampling import category
from ckspace.constraints.known_wrong import known_wrong_rules
from ckspace.constraints.rule import Rule
from ckspace.constraints.rulesets import get_rule_set
from ckspace.constraints.validity import gemm_rules
from ckspace.core.arch import ArchFacts, arch_facts, lds_limit_bytes
from ckspace.core.cells import Cell, CellProposals, CellResult, Request
from ckspace.core.fields import DEPTHWISE_DEFAULTS, FIELD_INDEX, GEMM_FIELD_NAMES, decode, plain
from ckspace.core.naming import gemm_name
from ckspace.core.tables import shape_key
from ckspace.core.vocab import EMITTED_PREDICATES, Layout

_I = FIELD_INDEX

QUIRKS: dict[str, str] = {
    "14.1": "The two validity checks disagree on backward pipelines: is_config_valid lets bwd_data and "
    "bwd_weight run only compv3 or mem, is_valid_for_arch bans only compv5, and `full` proposes mostly "
    "other pipelines, so all of its bwd_data and most of its bwd_weight proposals are discarded.",
    "14.2": "is_config_valid checks every config as if wave_k were 1: a proposal with wave_k > 1 that passed "
    "is_valid_for_arch fails when (wave_m, wave_n, 1) is not one of the arch's wave combos, and the "
    "tile_k alignment ignores wave_k.",
    "14.3": "The WMMA warp_tile_k floor exempts the dtype tag 'float', which no tagged config carries: "
    "fp32-tagged configs are held to it, while untagged ones (all of `default`) never are.",
    "14.4": "An arch without a warp-tile list for the dtype turns the warp-tile check into a warning, so the "
    "config passes unchecked (fp32 on the warp-size-32 archs).",
    "14.5": "The LDS budget depends on the pipeline alone (64 KiB unless listed): neither the arch's LDS size "
    "(160 KiB on gfx950) nor the double LDS buffer changes it.",
    "14.7": "`full` derives warp_tile_k by formula and never checks it against the arch's warp-tile list, so on "
    "gfx1100, gfx1200 and gfx1201 no GEMM proposal survives the config check.",
    "14.8": "When none of a tile's curated waves fits the arch, `full` falls back to every structural "
    "(wave, warp tile) pair, ignoring its curated tables and exclusions; the fallback can repeat a "
    "pair, which the deduplication then drops.",
    "14.9": "The tile tables have no 1D entries, so `full` proposes only feature configs (no base tiles) in 1D cells.",
    "14.10": "`default` and `full` name 3D kernels with layout nhwgc, other rule sets with ndhwgc: one kernel "
    "can carry two names.",
    "14.11": "`tiny` picks per category and ndim, not per variant, so a request for several variants can give "
    "a variant nothing (bwd_data in every combined request).",
    "14.13": "`default` doubles tile_k for its compv4 tiles, and the doubled tiles exceed compv4's 32 KiB LDS "
    "budget: they are generated only to be rejected.",
    "14.15": "Upstream documents some configs as giving wrong results (bwd_weight fp16/bf16 interwave compv1/mem "
    "with more than one wave along M and N) in a comment, yet `full` still proposes and emits them.",
    "14.18": "Depthwise configs are emitted without any arch check, on warp-size-32 archs too, where their "
    "fixed 64-thread blocks are doubtful.",
}
"""The upstream inconsistencies lint findings and rules are tagged with (``Finding.spec``, ``Rule.quirk``).
The ids are those of the reference specification ckspace was written against."""

WAVE_K_FORCED = "14.2"
"""The upstream inconsistency whose rule (``Rule.quirk``) rejects proposals with wave_k > 1."""
LDS_ARCH_BLIND = "14.5"
"""The one whose rule applies an LDS budget smaller than the arch's LDS."""


class Finding(BaseModel):
    """One lint finding for a rule set on an arch."""

    rule_set: str
    arch: str
    code: str
    message: str
    count: int
    cells: list[str] = []
    rules: list[str] = []
    spec: str | None = None


def lint(rule_set: str, arch: str, rules_revision: str | None = None) -> list[Finding]:
    """Findings for one rule set on one arch (all variants, ndims and dtypes in one request) under
    rule revision ``rules_revision`` (None: the newest): a quirk that revision fixes is not reported,
    because no rule of it carries the quirk any more."""
    run = _Run.of(rule_set, arch, rules_revision)
    removals = _removals(run)
    return [
        *_empty_cells(run),
        *_removed_by_rules(run, removals),
        *_no_gemm_kernels(run),
        *_wave_k_forced(run, removals),
        *_lds_limit_arch_blind(run, removals),
        *_dead_entries(run, removals),
        *_duplicates(run),
        *_name_collisions(run),
        *_unchecked_warp_tiles(run),
        *_depthwise_on_wave32(run),
        *_known_wrong_emitted(run),
        *_feature_only_cells(run),
        *_layout_names(run),
    ]


@dataclass(frozen=True)
class _Run:
    """One lint run: the request for every cell of a rule set on an arch, its proposals, their
    classification and the arch's facts, with which every check makes its findings."""

    rule_set: str
    arch: str
    request: Request
    proposals: Mapping[Cell, CellProposals]
    results: Mapping[Cell, CellResult]
    facts: ArchFacts

    @classmethod
    def of(cls, rule_set: str, arch: str, rules_revision: str | None) -> _Run:
        request = Request.build(arch, get_rule_set(rule_set).name, rules_revision=rules_revision)
        proposals = propose(request)
        return cls(
            rule_set,
            arch,
            request,
            proposals,
            classify_cells(request, proposals),
            arch_facts(arch, request.rules_revision),
        )

    def finding(
        self,
        code: str,
        message: str,
        count: int,
        cells: Iterable[Cell] = (),
        rules: Iterable[str] = (),
        spec: str | None = None,
    ) -> Finding:
        return Finding(
            rule_set=self.rule_set,
            arch=self.arch,
            code=code,
            message=message,
            count=count,
            cells=[c.label() for c in cells],
            rules=sorted(rules),
            spec=spec,
        )


def _empty_cells(run: _Run) -> Iterator[Finding]:
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
                spec="14.1" if proposed and variant.is_backward else None,
            )
        if not any(results[c].count_raw for c in cells):
            yield run.finding(
                "variant_without_proposals",
                f"{variant.value} gets no proposal at all in a request for every cell",
                1,
                spec="14.11" if get_rule_set(run.rule_set).request_wide else None,
            )


@dataclass
class _Removals:
    """What the validity predicates remove from the proposals: per set of rules responsible, how many
    (and the quirk the first of them carries); the removals that show the forced wave_k and the
    arch-blind LDS limit; per table entry (tile, pipeline, feature), proposals and valid ones."""

    removed: Counter[tuple[str, ...]] = field(default_factory=Counter)
    quirk_of: dict[tuple[str, ...], str | None] = field(default_factory=dict)
    forced_wave_k: int = 0
    lds_blind: int = 0
    dead: dict[str, dict[tuple, list[int]]] = field(
        default_factory=lambda: {table: defaultdict(lambda: [0, 0]) for table in ("tile", "pipeline", "feature")}
    )


def _removals(run: _Run) -> _Removals:
    """Classify every proposal rule by rule (the emitted predicates) and tally what is removed."""
    out = _Removals()
    revision = run.request.rules_revision
    for cell in run.request.cells:
        rows = run.results[cell].gemm
        if not rows:
            continue
        rules = [
            r for r in gemm_rules(run.arch, cell.variant, cell.dtype, revision) if r.predicate in EMITTED_PREDICATES
        ]
        masks = rule_masks(rules, columns(rows, GEMM_FIELD_NAMES), len(rows))
        broken = np.stack([~masks[r.name] for r in rules], axis=1)
        for i, row in enumerate(rows):
            failing = [r for r, bad in zip(rules, broken[i], strict=True) if bad]
            if failing:
                _tally_removal(run, out, failing, row)
            tile = (cell.variant.value, shape_key(row[:3]))
            pipe = (cell.variant.value, plain(decode("pipeline", row[_I["pipeline"]])))
            feat = (cell.variant.value, category(cell, False, row)[0])
            for table, key in (("tile", tile), ("pipeline", pipe), ("feature", feat)):
                out.dead[table][key][0] += 1
                out.dead[table][key][1] += not failing
    return out


def _tally_removal(run: _Run, out: _Removals, failing: list[Rule], row: tuple[int, ...]) -> None:
    """Count one removed proposal under the rules that remove it, and under the quirks it shows."""
    names = tuple(r.name for r in failing)
    out.removed[names] += 1
    quirks = {r.quirk for r in failing}
    out.quirk_of[names] = next((r.quirk for r in failing if r.quirk), None)
    if WAVE_K_FORCED in quirks and row[_I["wave_k"]] != 1:
        out.forced_wave_k += 1
    budget = lds_limit_bytes(decode("pipeline", row[_I["pipeline"]]), run.request.rules_revision)  # type: ignore[arg-type]
    if LDS_ARCH_BLIND in quirks and run.facts.lds_capacity_kb * 1024 > budget * (1 + row[_I["double_smem_buffer"]]):
        out.lds_blind += 1


def _removed_by_rules(run: _Run, removals: _Removals) -> Iterator[Finding]:
    for names, count in removals.removed.most_common():
        yield run.finding(
            "removed_by_rules",
            f"{count} proposals removed by {' + '.join(names)}",
            count,
            rules=names,
            spec=removals.quirk_of[names],
        )


def _no_gemm_kernels(run: _Run) -> Iterator[Finding]:
    results = run.results.values()
    gemm_raw = sum(len(r.gemm) for r in results)
    if gemm_raw and not any(any(r.gemm_valid) for r in results):
        depthwise = sum(sum(r.depthwise_valid) for r in results)
        yield run.finding(
            "no_gemm_kernels",
            f"none of {gemm_raw} GEMM proposals is valid on {run.arch}; only {depthwise} depthwise kernels are emitted",
            gemm_raw,
            spec="14.7",
        )


def _wave_k_forced(run: _Run, removals: _Removals) -> Iterator[Finding]:
    if removals.forced_wave_k:
        yield run.finding(
            "wave_k_forced",
            f"{removals.forced_wave_k} proposals with wave_k > 1 pass is_valid_for_arch "
            "but fail the config check, which forces wave_k to 1",
            removals.forced_wave_k,
            rules=["wave_list"],
            spec="14.2",
        )


def _lds_limit_arch_blind(run: _Run, removals: _Removals) -> Iterator[Finding]:
    if removals.lds_blind:
        yield run.finding(
            "lds_limit_arch_blind",
            f"{removals.lds_blind} proposals exceed the per-pipeline LDS limit "
            f"although {run.arch} has {run.facts.lds_capacity_kb} KiB of LDS",
            removals.lds_blind,
            rules=["lds_budget"],
            spec="14.5",
        )


def _dead_entries(run: _Run, removals: _Removals) -> Iterator[Finding]:
    """Table entries (tiles, pipelines, features) proposed but never valid."""
    for table, groups in removals.dead.items():
        for key, (proposed, valid) in sorted(groups.items()):
            if proposed and not valid:
                yield run.finding(
                    f"dead_{table}",
                    f"{key[0]} {table} {key[1]}: {proposed} proposals, none valid",
                    proposed,
                    spec="14.13" if run.rule_set == "default" and table == "tile" else None,
                )


def _duplicates(run: _Run) -> Iterator[Finding]:
    duplicates = sum(p.duplicates for p in run.proposals.values())
    if duplicates:
        yield run.finding(
            "duplicates",
            f"{duplicates} generated configs repeat an earlier one and are dropped",
            duplicates,
            spec="14.8",
        )


def _name_collisions(run: _Run) -> Iterator[Finding]:
    names: Counter[str] = Counter()
    for cell, result in run.results.items():
        names.update(gemm_name(cell.variant, cell.dtype, cell.ndim, row) for row in result.gemm)
    collisions = sum(n - 1 for n in names.values() if n > 1)
    if collisions:
        yield run.finding("name_collisions", f"{collisions} proposals share a name with a different config", collisions)


def _unchecked_warp_tiles(run: _Run) -> Iterator[Finding]:
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
            spec="14.4",
        )


def _depthwise_on_wave32(run: _Run) -> Iterator[Finding]:
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
            spec="14.18",
        )


def _known_wrong_emitted(run: _Run) -> Iterator[Finding]:
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
            spec="14.15",
        )


def _feature_only_cells(run: _Run) -> Iterator[Finding]:
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
            spec="14.9",
        )


def _layout_names(run: _Run) -> Iterator[Finding]:
    misnamed = [
        c
        for c in run.request.cells
        if c.ndim == 3 and any(row[_I["layout"]] == Layout.NHWGC.code for row in run.results[c].gemm)
    ]
    if misnamed:
        yield run.finding(
            "layout_name", "3D kernels are named with layout nhwgc", len(misnamed), misnamed, spec="14.10"
        )
