"""What the families of a cell's GEMM validity rules read (:mod:`ckspace.constraints.rulebook.arch_check`,
:mod:`ckspace.constraints.rulebook.config_check`), and the words both families build from the tables.

A cell's rules are built with its arch facts, variant and dtype folded in as constants, from the
tables as one rule revision has them; :class:`GemmCell` carries those, and reads each table value
with its place (:func:`~ckspace.constraints.language.rule.read`) so that a rule lists what it read.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from ckspace.constraints.language.expr import Field
from ckspace.constraints.language.rule import TableValue, or_words
from ckspace.core.arch import ArchFacts
from ckspace.core.revisions import RulesRevision
from ckspace.core.tables import shape_key
from ckspace.core.vocab import Dtype, Epilogue, Pipeline, Scheduler, Variant

F = Field
TRAIT = (F("pipeline"), F("epilogue"), F("scheduler"))
"""The (pipeline, epilogue, scheduler) fields the trait tables list."""

Reader = Callable[..., TableValue]
"""``read`` bound to a rule revision: (table, *keys, default=...) -> TableValue."""


@dataclass(frozen=True)
class GemmCell:
    """One cell (arch, variant, *, dtype) under one rule revision: its tables (``revised`` reads them
    with their place) and the arch's facts in it."""

    rev: RulesRevision
    revised: Reader
    facts: ArchFacts
    variant: Variant
    dtype: Dtype

    @property
    def arch(self) -> str:
        return self.facts.name

    @property
    def w(self) -> int:
        """The arch's warp size, which several upstream checks branch on."""
        return self.facts.warp_size

    def for_arch(self, *keys: str) -> TableValue:
        """A parameter of ``is_valid_for_arch`` (``validity.json``)."""
        return self.revised("validity", "is_valid_for_arch", *keys)

    def config_valid(self, *keys: str) -> TableValue:
        """A parameter of ``is_config_valid`` (``validity.json``)."""
        return self.revised("validity", "is_config_valid", *keys)

    @property
    def warp_size_rule(self) -> TableValue:
        """Where the warp size comes from, for the rules that branch on it."""
        return self.revised("arch", "warp_size_rule")

    @property
    def wave_combos(self) -> TableValue:
        return self.revised("arch", "archs", self.arch, "wave_combos")

    @property
    def forced_wave_k(self) -> TableValue:
        """The wave_k ``is_config_valid`` checks every config with, whatever its own."""
        return self.config_valid("forced_wave_k")


def trait_rows(combos: list[list[str]]) -> list[tuple[int, int, int]]:
    """A trait table's (pipeline, epilogue, scheduler) rows as codes of :data:`TRAIT`."""
    return [(Pipeline(p).code, Epilogue(e).code, Scheduler(s).code) for p, e, s in combos]


def shapes(rows: Iterable[Sequence[int]]) -> str:
    """``1x1x1, 1x2x1``: tiles and wave splits as the kernel names write them."""
    return ", ".join(shape_key(row) for row in rows)


def combos(rows: list[list[str]]) -> str:
    """(pipeline, epilogue, scheduler) triples in words: as a product when they form one."""
    columns = [list(dict.fromkeys(row[i] for row in rows)) for i in range(3)]
    pipelines, epilogues, schedulers = columns
    if len({tuple(r) for r in rows}) == len(pipelines) * len(epilogues) * len(schedulers):
        return f"{or_words(schedulers)} scheduling with {or_words(pipelines)} (epilogue {or_words(epilogues)})"
    return "any of " + ", ".join("/".join(row) for row in rows)
