"""Architecture facts, read from the arch table (upstream ``arch_specs_generated.py`` and
``arch_specs.json``) as a rule revision has it (:mod:`ckspace.core.revisions`): a later upstream
state can correct a fact (gfx1250's LDS), so facts are read through the revision, the newest by
default."""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache
from typing import TypeVar

from pydantic import BaseModel, ConfigDict

from ckspace.core.revisions import rules_revision
from ckspace.core.tables import table
from ckspace.core.vocab import Dtype, Pipeline, parse_arch

Triple = tuple[int, int, int]
T = TypeVar("T")


class ArchFacts(BaseModel):
    """What the rules know about one GPU target.

    ``warp_size`` is the value the validity rules use (:func:`warp_size_of`). ``warp_tiles`` maps a
    dtype to its supported MFMA/WMMA shapes in upstream list order, which the ``full`` rule set's
    pairing depends on; a dtype missing from it means "no table", which upstream treats as a pass.
    ``lds_capacity_kb`` is the LDS per compute unit that arch_specs.json lists (in the revision's
    table: the newest says 320 KiB for gfx1250, the oldest 64).
    """

    model_config = ConfigDict(frozen=True)

    name: str
    family: str
    warp_size: int
    lds_capacity_kb: int
    wave_combos: tuple[Triple, ...]
    warp_tiles: dict[Dtype, tuple[Triple, ...]]

    def warp_tiles_for(self, dtype: Dtype) -> tuple[Triple, ...] | None:
        """The warp tiles for ``dtype``, or None when the arch has no table for it."""
        return self.warp_tiles.get(dtype)


@cache
def arch_table(revision: str | None = None) -> dict:
    """The arch table as rule revision ``revision`` has it (None: the newest merged one)."""
    return rules_revision(revision).patched("arch", table("arch"))


@cache
def arch_facts(name: str, revision: str | None = None) -> ArchFacts:
    """The facts of ``name`` in rule revision ``revision`` (None: the newest merged one); raises
    :class:`InvalidChoiceError` for an unknown arch or revision."""
    name = parse_arch(name)
    data = arch_table(revision)
    entry = data["archs"][name]
    tiles = {
        dtype: tuple(tuple(t) for t in entry["warp_tiles"][dtype.key])
        for dtype in Dtype
        if dtype.key in entry["warp_tiles"]
    }
    return ArchFacts(
        name=name,
        family=entry["family"],
        warp_size=warp_size_of(name, revision),
        lds_capacity_kb=entry["lds_capacity_kb_arch_specs_json"],
        wave_combos=tuple(tuple(w) for w in entry["wave_combos"]),
        warp_tiles=tiles,
    )


def warp_size_of(arch: str | None, revision: str | None = None) -> int:
    """The wave size the rules use on ``arch``: the arch table's ``warp_size_rule`` (one size for the
    archs whose name starts with its prefix, gfx9, another for the rest). With no arch (rules stated
    for no particular target), the prefix family's size, the one the rule names first."""
    rule = arch_table(revision)["warp_size_rule"]
    if arch is None or parse_arch(arch).startswith(rule["prefix"]):
        return rule["warp_size_if_prefix"]
    return rule["warp_size_otherwise"]


def pipeline_lds_limit(limits: Mapping[str, int], pipeline: Pipeline) -> int:
    """``pipeline``'s entry of an ``lds_limit_bytes_by_pipeline`` table, its ``default`` for a
    pipeline the table does not list."""
    return limits.get(pipeline.value, limits["default"])


def lds_limit_bytes(pipeline: Pipeline, revision: str | None = None) -> int:
    """Per-pipeline LDS budget of the oldest revision's config check (``ArchFilter._validate_lds_capacity``):
    arch-blind, quirk 14.5 of ``docs/rules.md``."""
    return pipeline_lds_limit(arch_table(revision)["lds_limit_bytes_by_pipeline"], pipeline)


def element_size(dtype: Dtype) -> int:
    """Bytes per element of ``dtype``."""
    return table("arch")["element_size_bytes"][dtype.value]


def lds_bytes(tile_m: T, tile_n: T, tile_k: T, element_bytes: int | T) -> T:
    """LDS bytes one block stages for its A and B tiles: ``(tile_m + tile_n) * tile_k`` elements.

    Written once for every kind of operand it meets: integers, numpy columns (the selector's
    features) and rule expressions (the config check's LDS budget).
    """
    return (tile_m + tile_n) * tile_k * element_bytes
