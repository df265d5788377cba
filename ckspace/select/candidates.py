"""The candidates of a selection, prepared once per candidate list: their configs with the columns
the selector reads (feature table, rule columns), the vector-width variants of their families, and
where each stands against the model's training domain.

:meth:`ckspace.select.selector.Selector.prepare` builds a :class:`CandidateSet` and keeps it, so that
per problem the selector only checks (:mod:`ckspace.select.feasibility`) and scores.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from ckspace.constraints.evaluators.classify import columns
from ckspace.core.config import GemmConfig
from ckspace.core.fields import GEMM_FIELD_NAMES
from ckspace.environment.target import Target
from ckspace.features.hardware import HardwareFacts
from ckspace.features.matrix import ConfigTable
from ckspace.select.fallbacks import family_key, vector_variants
from ckspace.select.support import ModelDomain

Candidate = str | GemmConfig
"""A candidate kernel: a name (ckspace's or a tile-engine benchmark name) or a config."""


@dataclass(frozen=True)
class Rows:
    """Configs as the selector reads them: feature columns and rule columns."""

    table: ConfigTable
    rule_columns: dict[str, np.ndarray]

    @classmethod
    def build(cls, configs: Sequence[GemmConfig], hw: HardwareFacts | None = None) -> Rows:
        """``configs``' rows, the feature table priced with ``hw`` (the selector's facts)."""
        return cls(ConfigTable.build(configs, hw), columns([c.row() for c in configs], GEMM_FIELD_NAMES))


@dataclass(frozen=True)
class Support:
    """Rows of a config table against the model's domain: which are outside it and why, and the
    index of each row's sibling in ``siblings`` (the distinct siblings of the outside rows: kernels
    that share a sibling -- a kernel's vector variants -- score it once); and each row's vector
    family (an id shared by a kernel's vector-width variants) and widths, for the vector rule."""

    outside: np.ndarray  # bool per row
    reasons: tuple[str | None, ...]
    sibling: np.ndarray  # per row: index into siblings, -1 inside the domain
    siblings: ConfigTable
    family: np.ndarray  # per row: vector family id
    vectors: np.ndarray  # per row: (vec_a, vec_b, vec_c)

    @classmethod
    def of(
        cls,
        configs: Sequence[GemmConfig],
        domain: ModelDomain,
        families: dict[tuple, int],
        hw: HardwareFacts | None = None,
    ) -> Support:
        """The rows of ``configs`` against ``domain``; the siblings' table priced with ``hw``."""
        reasons = tuple(domain.outside(c) for c in configs)
        distinct: dict[GemmConfig, int] = {}
        index = np.full(len(configs), -1, dtype=np.int64)
        for i, (c, reason) in enumerate(zip(configs, reasons, strict=True)):
            if reason is not None:
                index[i] = distinct.setdefault(domain.sibling(c), len(distinct))
        family = np.asarray([families.setdefault(family_key(c), len(families)) for c in configs], dtype=np.int64)
        vectors = np.asarray([[c.vec_a, c.vec_b, c.vec_c] for c in configs], dtype=np.int64).reshape(len(configs), 3)
        return cls(index >= 0, reasons, index, ConfigTable.build(list(distinct), hw), family, vectors)

    def take(self, rows: np.ndarray) -> Support:
        return Support(
            self.outside[rows],
            tuple(self.reasons[i] for i in rows),
            self.sibling[rows],
            self.siblings,
            self.family[rows],
            self.vectors[rows],
        )

    def stack(self, other: Support) -> Support:
        offset = len(self.siblings)
        return Support(
            np.concatenate([self.outside, other.outside]),
            self.reasons + other.reasons,
            np.concatenate([self.sibling, np.where(other.sibling >= 0, other.sibling + offset, -1)]),
            self.siblings.stack(other.siblings),
            np.concatenate([self.family, other.family]),
            np.concatenate([self.vectors, other.vectors]),
        )


@dataclass
class CandidateSet:
    """Candidates resolved to configs with their per-candidate columns; the vector variants of
    their families are worked out on first need: with a ``pool`` (a tree's or a built library's
    kernels) exactly those the pool holds, as the generated C dispatcher falls back only to kernels
    of its library; without one, the kernels of ``target``."""

    names: tuple[str, ...]
    rows: Rows
    ndim: np.ndarray
    pool: frozenset[tuple] | None = None
    target: Target | None = None
    domain: ModelDomain | None = None
    families: dict[tuple, int] = field(default_factory=dict, repr=False)
    """The selector's vector-family ids (shared by every candidate set, so rows of two sets agree)."""
    hw: HardwareFacts | None = None
    """The facts every table of the set is priced with (the selector's; None: the spec sheet's)."""
    _variants: tuple[Rows, np.ndarray, np.ndarray, list[str]] | None = field(default=None, repr=False)
    _support: Support | None = field(default=None, repr=False)
    _variant_support: Support | None = field(default=None, repr=False)
    family_rows: list[np.ndarray] = field(default_factory=list, repr=False)
    same_as_candidate: np.ndarray = field(default_factory=lambda: np.empty(0, dtype=np.int64), repr=False)
    """Per variant row: the candidate with the same config, or -1."""

    @property
    def table(self) -> ConfigTable:
        return self.rows.table

    @property
    def support(self) -> Support:
        """The candidates against the model's domain (worked out on first need)."""
        if self._support is None:
            assert self.domain is not None
            self._support = Support.of(self.table.configs, self.domain, self.families, self.hw)
        return self._support

    def support_of(self, rows: np.ndarray | None = None) -> Support | None:
        """The support of candidate ``rows`` (all of them when None); None without a model."""
        if self.domain is None:
            return None
        return self.support if rows is None else self.support.take(rows)

    @property
    def variant_support(self) -> Support:
        """The vector variants (:meth:`variants`' rows) against the model's domain."""
        if self._variant_support is None:
            assert self.domain is not None
            self._variant_support = Support.of(self.variants()[0].table.configs, self.domain, self.families, self.hw)
        return self._variant_support

    def variants(self) -> tuple[Rows, np.ndarray, np.ndarray, list[str]]:
        """(rows of every family's variants, widest first per family; the family of each row; the
        offsets of each family's block; their names)."""
        if self._variants is None:
            if self.pool is None:
                per_family = vector_variants(self.table.configs, self.target)
            else:  # the pool is what was built: the target has no say over it
                per_family = [
                    [v for v in family if v.kernel_key() in self.pool] for family in vector_variants(self.table.configs)
                ]
            flat = [v for family in per_family for v in family]
            owner = np.repeat(np.arange(len(per_family)), [len(f) for f in per_family])
            offsets = np.concatenate([[0], np.cumsum([len(f) for f in per_family])]).astype(np.int64)
            rows = Rows.build(flat, self.hw) if flat else Rows(ConfigTable.build([], self.hw), {})
            self._variants = (rows, owner, offsets, [v.name for v in flat])
            self.family_rows = [np.arange(offsets[i], offsets[i + 1]) for i in range(len(per_family))]
            candidates = {c.kernel_key(): i for i, c in enumerate(self.table.configs)}
            self.same_as_candidate = np.asarray([candidates.get(v.kernel_key(), -1) for v in flat], dtype=np.int64)
        return self._variants
