"""Bucket elimination over one block of fields: the exact count of the assignments that every
factor allows, and the buckets that turn a rank back into its assignment.

:class:`~ckspace.constraints.evaluators.count.Tally` splits a space into blocks of fields that rules tie
together and hands each block its factors (0/1 tables over the domain positions of the fields a
rule conjunct reads). Here a block's fields are summed out one at a time, cheapest first: the
factors that read a field are multiplied into a *bucket* and the field is summed out of it, leaving
a smaller factor; what is left at the end is the block's count. Kept in reverse elimination order,
the buckets give, for any assignment of the fields eliminated later, the number of completions per
value of a field, which is what unranking, listing and strata read.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from math import prod

import numpy as np

from ckspace.core.errors import CkspaceError

MAX_TABLE = 1 << 24
"""Most cells a factor or bucket table may have (a 16 M-cell int64 table is 128 MiB)."""

EXACT_INT64 = 1 << 62
"""Counts below this are kept in int64; a block whose domain product reaches it counts in Python ints."""


class CountError(CkspaceError):
    """The rules cannot be counted exactly within the table limits (a rule ties too many values)."""


@dataclass
class Factor:
    """A 0/1 table (bool: a rule's, as tabulated) or a count table (a message of an earlier bucket)
    over the fields of ``scope``: its axes follow scope, indexed by positions in the fields' domains."""

    scope: tuple[str, ...]
    table: np.ndarray


@dataclass
class Bucket:
    """What eliminating ``field`` multiplied: a table over (``given`` ..., ``field``)."""

    field: str
    given: tuple[str, ...]
    table: np.ndarray
    sums: np.ndarray  # table summed over ``field``: the message it left, kept for unranking


class Block:
    """One block of fields that rules tie together: its exact count and its buckets."""

    def __init__(
        self, fields: Sequence[str], factors: list[Factor], domains: Mapping[str, np.ndarray], last: Sequence[str]
    ) -> None:
        self.fields = tuple(fields)
        self.sizes = {f: len(domains[f]) for f in fields}
        exact_int64 = prod(self.sizes.values()) < EXACT_INT64
        self.dtype = np.int64 if exact_int64 else object
        self.buckets: list[Bucket] = []
        pending = list(factors)  # 0/1 tables as tabulated; the messages left by summing are counts
        remaining = list(self.fields)
        late = [f for f in remaining if f in last]
        total = 1
        while remaining:
            candidates = [f for f in remaining if f not in late] or remaining
            field = min(candidates, key=lambda f: (self._joined_size(f, pending), remaining.index(f)))
            using = [p for p in pending if field in p.scope]
            pending = [p for p in pending if field not in p.scope]
            given = tuple(f for f in remaining if f != field and any(f in p.scope for p in using))
            table = self._multiply(using, (*given, field))
            message = table.sum(axis=-1)
            self.buckets.append(Bucket(field, given, table, message))
            if given:
                pending.append(Factor(given, message))
            else:
                total *= int(message) if self.dtype is np.int64 else message
            remaining.remove(field)
        for p in pending:  # factors over no field: constants
            total *= int(p.table)
        self.count = int(total)

    def _joined_size(self, field: str, pending: list[Factor]) -> int:
        scope = {field} | {f for p in pending if field in p.scope for f in p.scope}
        return prod(self.sizes[f] for f in scope)

    def _multiply(self, factors: list[Factor], scope: tuple[str, ...]) -> np.ndarray:
        """The product of ``factors`` over ``scope``, in the block's count dtype. The 0/1 tables (the
        rules' own) are combined first in their one-byte dtype, and only then widened and multiplied
        by the counts (messages of earlier buckets): a bucket of millions of cells is widened once
        instead of once per factor."""
        size = prod(self.sizes[f] for f in scope)
        if size > MAX_TABLE:
            raise CountError(
                f"the rules tie {', '.join(scope)} into {size} value combinations, more than "
                f"{MAX_TABLE} can be counted exactly here; narrow the domains (--where)"
            )
        full = tuple(self.sizes[f] for f in scope)
        mask = np.ones([1] * len(scope), dtype=np.bool_)
        counts = []
        for factor in factors:
            if factor.table.dtype == np.bool_:
                mask = mask & self._aligned(factor, scope)
            else:
                counts.append(factor)
        if not counts:
            return np.broadcast_to(mask, full).astype(self.dtype)
        out = np.multiply(mask, self._aligned(counts[0], scope), dtype=self.dtype)  # widened in this one pass
        for factor in counts[1:]:
            if out.shape == full:
                out *= self._aligned(factor, scope)
            else:
                out = out * self._aligned(factor, scope)
        return out if out.shape == full else np.broadcast_to(out, full).copy()

    def _aligned(self, factor: Factor, scope: tuple[str, ...]) -> np.ndarray:
        """``factor``'s table with its axes in ``scope`` order, of size 1 along the fields it lacks."""
        order = sorted(range(len(factor.scope)), key=lambda i: scope.index(factor.scope[i]))
        shape = [self.sizes[f] if f in factor.scope else 1 for f in scope]
        return factor.table.transpose(order).reshape(shape)

    @property
    def order(self) -> tuple[str, ...]:
        """The fields from most to least significant in rank order (reverse elimination order)."""
        return tuple(b.field for b in reversed(self.buckets))

    def counts(self, bucket: Bucket, chosen: Mapping[str, np.ndarray], current: np.ndarray) -> np.ndarray:
        """Per query and value of ``bucket.field``: how many configs of the block agree with the
        positions ``chosen`` so far (whose number is ``current``) and take that value."""
        if bucket.given:
            index = tuple(chosen[g] for g in bucket.given)
            weights, sums = bucket.table[index], bucket.sums[index]
        else:
            weights = np.broadcast_to(bucket.table, (len(current), bucket.table.shape[0]))
            sums = np.broadcast_to(bucket.sums, (len(current),))
        return weights * (current // np.maximum(sums, 1))[:, None]

    def unrank(self, ranks: np.ndarray, forced: Mapping[str, np.ndarray] | None = None) -> dict[str, np.ndarray]:
        """The domain positions of every field for each rank. ``forced`` fixes the positions of some
        of the most significant fields (per rank); ranks then count inside the configs with those
        values (below :meth:`forced_totals`)."""
        n = len(ranks)
        rows = np.arange(n)
        current = np.full(n, self.count, dtype=self.dtype)
        rest = np.asarray(ranks, dtype=self.dtype).copy()
        chosen: dict[str, np.ndarray] = {}
        for bucket in reversed(self.buckets):
            counts = self.counts(bucket, chosen, current)
            if forced is not None and bucket.field in forced:
                pick = forced[bucket.field]
            else:
                cumulative = np.cumsum(counts, axis=1)
                pick = (cumulative <= rest[:, None]).sum(axis=1)
                rest = rest - np.where(pick > 0, cumulative[rows, np.maximum(pick - 1, 0)], 0)
            chosen[bucket.field] = pick
            current = counts[rows, pick]
        return chosen

    def forced_totals(self, forced: Mapping[str, np.ndarray]) -> np.ndarray:
        """How many configs of this block have the forced positions (one query per entry); ``forced``
        fixes the most significant fields of :attr:`order`."""
        n = len(next(iter(forced.values())))
        rows = np.arange(n)
        chosen: dict[str, np.ndarray] = {}
        current = np.full(n, self.count, dtype=self.dtype)
        for bucket in reversed(self.buckets):
            if bucket.field not in forced:
                break
            counts = self.counts(bucket, chosen, current)
            chosen[bucket.field] = forced[bucket.field]
            current = counts[rows, forced[bucket.field]]
        return current
