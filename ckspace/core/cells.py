"""What an enumeration is asked for and what it answers: cells, requests, proposals and results.

A *cell* is one (variant, ndim, dtype) of an arch's space. A *request* is one upstream-style
generator call: an arch, a rule set and ordered lists of cells. A rule set answers a request with
:class:`CellProposals` per cell; the enumerator classifies them into :class:`CellResult`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from itertools import product
from typing import NamedTuple, TypeVar

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


_T = TypeVar("_T")


def _canonical(values: Iterable[_T], order: Sequence[_T]) -> tuple[_T, ...]:
    """The distinct ``values`` in the canonical ``order``, whatever order they came in."""
    wanted = set(values)
    return tuple(value for value in order if value in wanted)


@dataclass(frozen=True)
class Request:
    """An upstream-style generator call.

    Order matters to upstream, so ckspace fixes it: upstream emits cells variant-major, then ndim,
    then dtype, each in the order its caller gives, and the sampling rule sets (full-tests, tiny)
    select from that emission order, so upstream answers the same cells named in another order with
    another subset. A request holds its parts in one canonical order, upstream's own CLI default
    (forward, bwd_data, bwd_weight; ndims ascending; fp16, bf16, fp32; the order of the oracle's
    combined calls), so an answer depends on which cells are asked together, never on the order
    they were named in. ``rule_set`` is a rule set's canonical name
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
        """Validate the parts and put them in the canonical order (variant, ndim and dtype default
        to all values, the rules revision to the newest merged one)."""
        return cls(
            arch=parse_arch(arch),
            rule_set=rule_set,
            variants=_canonical((Variant.parse(v) for v in (variants or list(Variant))), list(Variant)),
            ndims=_canonical((parse_ndim(n) for n in (ndims or NDIMS)), NDIMS),
            dtypes=_canonical((Dtype.parse(d) for d in (dtypes or list(Dtype))), list(Dtype)),
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
