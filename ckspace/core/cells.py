"""What an enumeration is asked for and what it answers: cells, requests, proposals and results.

A *cell* is one (variant, ndim, dtype) of an arch's space. A *request* is one upstream-style
generator call: an arch, a rule set and ordered lists of cells. A rule set answers a request with
:class:`CellProposals` per cell; the enumerator classifies them into :class:`CellResult`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from itertools import product
from typing import NamedTuple

from ckspace.core.fields import Row
from ckspace.core.revisions import rules_revision as rules_revision_of
from ckspace.core.vocab import NDIMS, Dtype, Predicate, Variant, parse_arch, parse_ndim


class Cell(NamedTuple):
    """One (variant, ndim, dtype) cell of an arch's space."""

    variant: Variant
    ndim: int
    dtype: Dtype

    def label(self) -> str:
        return f"{self.variant.value}/{self.ndim}d/{self.dtype.value}"


def _unique(values: Iterable) -> tuple:
    return tuple(dict.fromkeys(values))


@dataclass(frozen=True)
class Request:
    """An upstream-style generator call.

    Order matters and is kept as given: upstream emits cells variant-major, then ndim, then dtype,
    and the sampling rule sets (full-tests, tiny) select from that emission order, so the same cell
    can get a different subset in a different request. ``rule_set`` is a rule set's canonical name
    (:func:`ckspace.constraints.rulesets.get_rule_set` validates user text); ``rules_revision`` names
    the upstream state of the validity rules (:mod:`ckspace.core.revisions`).
    """

    arch: str
    rule_set: str
    variants: tuple[Variant, ...]
    ndims: tuple[int, ...]
    dtypes: tuple[Dtype, ...]
    rules_revision: str

    @classmethod
    def build(
        cls,
        arch: str,
        rule_set: str,
        variants: Iterable[object] | None = None,
        ndims: Iterable[object] | None = None,
        dtypes: Iterable[object] | None = None,
        rules_revision: str | None = None,
    ) -> Request:
        """Validate and order the parts (variant, ndim and dtype default to all values, the rules
        revision to the newest merged one)."""
        return cls(
            arch=parse_arch(arch),
            rule_set=rule_set,
            variants=_unique(Variant.parse(v) for v in (variants or list(Variant))),
            ndims=_unique(parse_ndim(n) for n in (ndims or NDIMS)),
            dtypes=_unique(Dtype.parse(d) for d in (dtypes or list(Dtype))),
            rules_revision=rules_revision_of(rules_revision).name,
        )

    @property
    def cells(self) -> tuple[Cell, ...]:
        return tuple(Cell(v, n, d) for v, n, d in product(self.variants, self.ndims, self.dtypes))

    def key(self) -> str:
        """Text that identifies the request in cache keys."""
        return "|".join(
            [
                self.arch,
                self.rule_set,
                self.rules_revision,
                ",".join(v.value for v in self.variants),
                ",".join(map(str, self.ndims)),
                ",".join(d.value for d in self.dtypes),
            ]
        )


@dataclass
class CellProposals:
    """What a rule set proposes for one cell, in emission order.

    ``candidates`` are the GEMM configs its tables generate; the rule set's own output (upstream's
    "raw" list) is the candidates that pass the predicates the rule set runs itself (``applies``).
    Depthwise rows are in :data:`~ckspace.core.fields.DEPTHWISE_FIELDS` order; ``duplicates``
    counts the repeats the rule set generated and dropped (a lint finding, not an error).
    """

    candidates: list[Row] = field(default_factory=list)
    applies: tuple[Predicate, ...] = ()
    depthwise: list[Row] = field(default_factory=list)
    duplicates: int = 0


@dataclass
class CellResult:
    """A cell's raw proposals (rule-set order) and which of them are valid."""

    gemm: list[Row]
    gemm_valid: list[bool]
    depthwise: list[Row]
    depthwise_valid: list[bool]

    @property
    def count_raw(self) -> int:
        return len(self.gemm) + len(self.depthwise)

    @property
    def count_valid(self) -> int:
        return sum(self.gemm_valid) + sum(self.depthwise_valid)
