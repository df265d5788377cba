"""What lint's checks (:mod:`ckspace.constraints.linting.lint`) read: one run of a rule set on an arch, the
proposals the validity predicates remove, and the proposals whose answer an upstream inconsistency
decides.

An inconsistency bites a proposal when upstream's formulation of some rules and a consistent one
(the same rules read the way the rest of upstream reads them) disagree on it while every other rule
of the arch check passes it: that proposal is in the rule set's output, or not, only because of the
inconsistency. :func:`verdict_changes` counts them, so a finding appears exactly where a rule set on
an arch has such proposals, under the rules revision asked for.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from functools import cache, partial

import numpy as np
from pydantic import BaseModel

from ckspace.constraints.enumeration.enumerator import classify_cells, propose
from ckspace.constraints.evaluators.classify import columns, rule_masks
from ckspace.constraints.generate.sampling import category
from ckspace.constraints.language.rule import Rule, read
from ckspace.constraints.rulebook.arch_check import arch_check_rules
from ckspace.constraints.rulebook.gemm_cell import GemmCell
from ckspace.constraints.rulebook.validity import gemm_rules
from ckspace.constraints.rulesets import get_rule_set
from ckspace.core.arch import ArchFacts, arch_facts, arch_table, lds_limit_bytes
from ckspace.core.cells import Cell, CellProposals, CellResult, Request
from ckspace.core.fields import FIELD_INDEX, GEMM_FIELD_NAMES, decode, plain
from ckspace.core.revisions import Quirk, rules_revision
from ckspace.core.tables import shape_key, table
from ckspace.core.vocab import EMITTED_PREDICATES, Dtype, Predicate, Variant

_I = FIELD_INDEX

MEASURED = frozenset({Quirk.WMMA_DTYPE_TAG})
"""Quirks whose rule removes proposals that do not all show the quirk, and which a check of their own
measures proposal by proposal (:func:`verdict_changes`): a removal by their rule is not tagged with
them (the WMMA floor rejects tagged fp16/bf16 configs as it means to)."""
COVERAGE_RULES = ("compv6_coverage_a", "compv6_coverage_b")
"""The arch-check rules that count a block's threads as warp size x waves."""
TABLE_DISPUTES = "arch_specs_disagreements"
"""The arch table's section of the values upstream's two arch tables hold differently, per arch and
key path, each file's value under its name; a rules revision in which they agree deletes it."""


class Finding(BaseModel):
    """One lint finding for a rule set on an arch."""

    rule_set: str
    arch: str
    code: str
    message: str
    count: int
    cells: list[str] = []
    rules: list[str] = []
    spec: Quirk | None = None


@dataclass(frozen=True)
class Run:
    """One lint run: the request for every cell of a rule set on an arch that the rule set answers,
    its proposals, their classification and the arch's facts, with which every check makes its
    findings."""

    rule_set: str
    arch: str
    request: Request
    proposals: Mapping[Cell, CellProposals]
    results: Mapping[Cell, CellResult]
    facts: ArchFacts

    @classmethod
    def of(cls, rule_set: str, arch: str, rules_revision: str | None) -> Run | None:
        """The run, or None when the rule set refuses every cell on ``arch`` (upstream raises for
        such a request: there is nothing proposed to lint). The cells it refuses are left out, so
        that it answers the request as upstream answers a call for the rest."""
        rs = get_rule_set(rule_set)
        every = Request.build(arch, rs.name, rules_revision=rules_revision)
        answered = [c for c in every.cells if rs.refusal(every.arch, c) is None]
        if not answered:
            return None
        parts = (list(dict.fromkeys(c[i] for c in answered)) for i in range(3))
        request = Request.build(arch, rs.name, *parts, rules_revision=rules_revision)
        proposals = propose(request)
        facts = arch_facts(arch, request.rules_revision)
        return cls(rs.name, request.arch, request, proposals, classify_cells(request, proposals), facts)

    def finding(
        self,
        code: str,
        message: str,
        count: int,
        cells: Iterable[Cell] = (),
        rules: Iterable[str] = (),
        spec: Quirk | None = None,
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


@dataclass
class Removals:
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


def removals(run: Run) -> Removals:
    """Classify every proposal rule by rule (the emitted predicates) and tally what is removed."""
    out = Removals()
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
            for table_name, key in (("tile", tile), ("pipeline", pipe), ("feature", feat)):
                out.dead[table_name][key][0] += 1
                out.dead[table_name][key][1] += not failing
    return out


def _tally_removal(run: Run, out: Removals, failing: list[Rule], row: tuple[int, ...]) -> None:
    """Count one removed proposal under the rules that remove it, and under the quirks it shows."""
    names = tuple(r.name for r in failing)
    out.removed[names] += 1
    quirks = {r.quirk for r in failing}
    out.quirk_of[names] = next((r.quirk for r in failing if r.quirk and r.quirk not in MEASURED), None)
    if Quirk.WAVE_K_FORCED in quirks and row[_I["wave_k"]] != 1:
        out.forced_wave_k += 1
    budget = lds_limit_bytes(decode("pipeline", row[_I["pipeline"]]), run.request.rules_revision)  # type: ignore[arg-type]
    arch_lds = run.facts.lds_capacity_kb * 1024
    if Quirk.LDS_ARCH_BLIND in quirks and arch_lds > budget * (1 + row[_I["double_smem_buffer"]]):
        out.lds_blind += 1


@dataclass
class VerdictChanges:
    """Proposals whose arch-check verdict an inconsistency decides (``decided``: every other rule of
    the arch check and of the rule set's own checks passes them), how many of those upstream's
    formulation passes (``admitted``; the rest it rejects), how many of them the generator's answer
    turns on (``emitted``: they pass every other rule it applies too), and their cells."""

    decided: int = 0
    admitted: int = 0
    emitted: int = 0
    cells: list[Cell] = field(default_factory=list)


Replaced = Callable[[tuple[Rule, ...]], tuple[Rule, ...]]
"""Picks, from a cell's rules, the ones upstream formulates inconsistently."""
Consistent = Callable[[Cell, dict[str, np.ndarray]], np.ndarray]
"""A cell's consistent verdict on the picked rules, per proposal (its columns)."""


def verdict_changes(run: Run, replaced: Replaced, consistent: Consistent) -> VerdictChanges:
    """Over every cell's proposals (before the rule set's own checks), those on which the rules
    ``replaced`` picks and ``consistent`` disagree, where nothing else decides the verdict."""
    out = VerdictChanges()
    revision = run.request.rules_revision
    for cell in run.request.cells:
        proposals = run.proposals[cell]
        rules = gemm_rules(run.arch, cell.variant, cell.dtype, revision)
        picked = replaced(rules)
        if not proposals.candidates or not picked:
            continue
        cols = columns(proposals.candidates, GEMM_FIELD_NAMES)
        size = len(proposals.candidates)
        upstream = np.logical_and.reduce(list(rule_masks(picked, cols, size).values()))
        differs = upstream != consistent(cell, cols)
        if not differs.any():
            continue
        others = [r for r in rules if r not in picked]
        masks = rule_masks(others, cols, size)
        own = {*proposals.applies, Predicate.IS_VALID_FOR_ARCH}
        decided = differs & _passing(others, masks, own, size)
        emitted = decided & _passing(others, masks, {*own, *EMITTED_PREDICATES}, size)
        if decided.any():
            out.decided += int(decided.sum())
            out.admitted += int((decided & upstream).sum())
            out.emitted += int(emitted.sum())
            out.cells.append(cell)
    return out


def _passing(rules: list[Rule], masks: dict[str, np.ndarray], predicates: set[Predicate], size: int) -> np.ndarray:
    """Where every rule of ``predicates`` holds."""
    return np.logical_and.reduce([masks[r.name] for r in rules if r.predicate in predicates] + [np.ones(size, bool)])


def wmma_tag_changes(run: Run) -> VerdictChanges:
    """Quirk 14.3: the WMMA warp_tile_k floor as upstream compares the dtype tag ('fp32' never equals
    the exempt 'float', and untagged configs count as 'float') against the floor applied exactly to
    the configs whose dtype is of the exempt class (fp32), on the archs the floor applies to."""
    wmma = read("validity", "is_valid_for_arch", "wmma", revision=rules_revision(run.request.rules_revision)).value
    if run.facts.warp_size != wmma["applies_to_warp_size"]:
        return VerdictChanges()

    def consistent(cell: Cell, cols: dict[str, np.ndarray]) -> np.ndarray:
        exempt = cell.dtype.dtype_class == wmma["exempt_dtype"]
        return (cols["warp_tile_k"] >= wmma["min_warp_tile_k_unless_float"]) | exempt

    return verdict_changes(run, lambda rules: tuple(r for r in rules if r.quirk == Quirk.WMMA_DTYPE_TAG), consistent)


def gate_block_changes(run: Run) -> VerdictChanges:
    """Quirk 14.6: the compv6 coverage rules with the arch's warp size, as upstream has them, against
    the same rules with the vector gate's block size, for which the gate of the ``full`` tables (which
    every rule set that samples ``full`` inherits) chose the proposals' vector widths."""
    rs = get_rule_set(run.rule_set)
    if run.facts.warp_size == vec_gate_warp() or "full" not in (rs.name, rs.derives_from):
        return VerdictChanges()

    def consistent(cell: Cell, cols: dict[str, np.ndarray]) -> np.ndarray:
        rules = _gated_coverage(run.arch, cell.variant, cell.dtype, run.request.rules_revision)
        return np.logical_and.reduce(list(rule_masks(rules, cols, cols["tile_k"].size).values()))

    return verdict_changes(run, lambda rules: tuple(r for r in rules if r.name in COVERAGE_RULES), consistent)


def vec_gate_warp() -> int:
    """The threads per wave the vector gate of the ``full`` tables sizes blocks with, on every arch."""
    return table("full")["vec_gate"]["block_warp_size"]


@cache
def _gated_coverage(arch: str, variant: Variant, dtype: Dtype, revision: str) -> tuple[Rule, ...]:
    """The coverage rules of a cell as they read on an arch whose warp size is the vector gate's."""
    rev = rules_revision(revision)
    facts = arch_facts(arch, revision).model_copy(update={"warp_size": vec_gate_warp()})
    gated = GemmCell(rev, partial(read, revision=rev), facts, variant, dtype)
    return tuple(r for r in arch_check_rules(gated) if r.name in COVERAGE_RULES)


def table_disputes(run: Run) -> list[str]:
    """Quirk 14.16: the key paths of the arch at which upstream's two arch tables hold different
    values in the run's rules revision."""
    disputes = arch_table(run.request.rules_revision).get(TABLE_DISPUTES, {}).get(run.arch, {})
    return [path for path, sides in disputes.items() if any(v != next(iter(sides.values())) for v in sides.values())]
