"""Exact counting, lazy listing and uniform sampling of a space given by per-field domains and rules,
without enumerating it.

A space here is every assignment of some fields, each drawn from its *domain*, that satisfies a set
of rules. Its size is a sum over all assignments of a product of 0/1 factors (one per rule, or per
conjunct of a rule), which variable elimination computes without visiting the assignments:

* each rule's conjuncts become factors, tabulated by evaluating the very rule expressions the
  CP-SAT models compile (:func:`ckspace.constraints.language.expr.evaluate`, broadcast over the domains of
  the fields a conjunct reads); conjuncts on one field just narrow its domain;
* fields that no rule ties together fall into independent *blocks* (connected components); the
  count is the product of the blocks' counts;
* inside a block, fields are summed out one at a time (bucket elimination, cheapest first,
  :mod:`ckspace.constraints.evaluators.elimination`): the factors that read a field are multiplied into a
  *bucket* table and the field is summed out of it, leaving a smaller factor. What is left at the
  end is the block's count.

The buckets are kept: read in reverse elimination order they give, for any assignment of the fields
eliminated later, the exact number of completions per value of a field. That turns a rank in
``[0, count)`` into the config of that rank (*unranking*), vectorised over blocks of ranks, which is
what listing (consecutive ranks, constant memory), uniform sampling (random ranks) and stratified
sampling (ranks inside the configs that fix some fields) are made of.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Iterator, Mapping, Sequence
from itertools import product
from math import prod

import numpy as np

from ckspace.constraints.evaluators.elimination import EXACT_INT64, MAX_TABLE, Block, CountError, Factor
from ckspace.constraints.language.expr import And, Const, Expr, Field, In, evaluate, fields_of
from ckspace.constraints.language.rule import Rule

log = logging.getLogger(__name__)


def domain_of(rule: Rule) -> tuple[str, tuple[int, ...]] | None:
    """The (field, allowed values) a *domain rule* states -- ``field in [..]`` over one field --, or
    None for any other rule."""
    expr = rule.expr
    if isinstance(expr, In) and len(expr.items) == 1 and isinstance(expr.items[0], Field):
        return expr.items[0].name, tuple(sorted(row[0] for row in expr.table))
    return None


def _conjuncts(expr: Expr) -> list[Expr]:
    if isinstance(expr, And):
        return [c for part in expr.parts for c in _conjuncts(part)]
    return [] if expr == Const(1) else [expr]


def _row_starts(before: np.ndarray, parent: np.ndarray) -> np.ndarray:
    """For entries grouped by ``parent`` (sorted), the value of ``before`` at each group's first
    entry: subtracting it turns a running sum over all entries into one within each group."""
    first = np.ones(len(parent), dtype=bool)
    first[1:] = parent[1:] != parent[:-1]
    return before[np.maximum.accumulate(np.where(first, np.arange(len(parent)), 0))]


class Tally:
    """The configs over ``fields`` that satisfy ``rules``, counted exactly.

    Every field needs a domain rule (:func:`domain_of`): the space is the domains' product cut by
    every rule. ``first`` names fields to put first in rank order (eliminated last in their block),
    which stratified sampling needs. Rows come out as int64 arrays with columns in ``fields`` order.
    """

    def __init__(self, fields: Sequence[str], rules: Sequence[Rule], first: Sequence[str] = ()) -> None:
        self.fields = tuple(fields)
        self.first = tuple(first)
        domains: dict[str, np.ndarray] = {}
        others: list[Rule] = []
        for rule in rules:
            found = domain_of(rule)
            if found is not None and found[0] in self.fields:
                field, values = found
                old = domains.get(field)
                domains[field] = np.asarray(
                    values if old is None else sorted(set(values) & set(old.tolist())), dtype=np.int64
                )
            else:
                others.append(rule)
        missing = [f for f in self.fields if f not in domains]
        if missing:
            raise ValueError(f"no domain rule for {', '.join(missing)}")
        unknown = sorted({f for r in others for f in r.fields} - set(self.fields))
        if unknown:
            raise ValueError(f"rules read fields outside the space: {', '.join(unknown)}")
        conjuncts = [(c, fields_of(c)) for rule in others for c in _conjuncts(rule.expr)]
        self.empty = False
        for c, scope in conjuncts:  # one-field conjuncts narrow domains; constant ones decide everything
            if not scope:
                self.empty |= not bool(evaluate(c, {}))
            elif len(scope) == 1:
                (field,) = scope
                keep = np.broadcast_to(
                    np.asarray(evaluate(c, {field: domains[field]}), dtype=bool), domains[field].shape
                )
                domains[field] = domains[field][keep]
        self.empty |= any(len(v) == 0 for v in domains.values())
        self.domains = domains
        self.blocks: list[Block] = []
        if not self.empty:  # an empty space (a CK that cannot build the cell at all) tabulates nothing
            tables = [self._tabulate(c, domains, scope) for c, scope in conjuncts if len(scope) > 1]
            self.domains, factors = self._prune(domains, tables)
            self.empty = any(len(v) == 0 for v in self.domains.values())
        if not self.empty:
            for block_fields in self._components(factors):
                inside = [f for f in factors if f.scope[0] in block_fields]
                self.blocks.append(Block(block_fields, inside, self.domains, self.first))
        self.count = 0 if self.empty else prod(b.count for b in self.blocks)
        self._column = {f: i for i, f in enumerate(self.fields)}

    @staticmethod
    def _tabulate(expr: Expr, domains: Mapping[str, np.ndarray], scope: tuple[str, ...]) -> Factor:
        """The 0/1 table of ``expr`` (which reads the fields of ``scope``) over their domains."""
        size = prod(len(domains[f]) for f in scope)
        if size > MAX_TABLE:
            raise CountError(
                f"a rule ties {', '.join(scope)} into {size} value combinations, more than "
                f"{MAX_TABLE} can be tabulated; narrow the domains (--where)"
            )
        shape = [len(domains[f]) for f in scope]
        cols = {f: domains[f].reshape([-1 if i == j else 1 for j in range(len(scope))]) for i, f in enumerate(scope)}
        table = np.broadcast_to(np.asarray(evaluate(expr, cols), dtype=bool), shape)
        return Factor(scope, np.ascontiguousarray(table))

    @staticmethod
    def _prune(domains: dict[str, np.ndarray], factors: list[Factor]) -> tuple[dict[str, np.ndarray], list[Factor]]:
        """Drop values no factor supports (each factor alone), until nothing changes: smaller tables.
        Returns the pruned domains and the factors cut to them (what tabulating again over the pruned
        values gives, without evaluating the rules again).

        The values kept are the largest set closed under "every factor supports each kept value with
        kept values of its other fields", which does not depend on the order factors are visited in;
        so a factor is visited again only when a field it reads lost values, and each visit gathers
        its table at the kept values once for all its fields."""
        keep = {f: np.ones(len(v), dtype=bool) for f, v in domains.items()}
        readers: dict[str, list[int]] = {}
        for i, factor in enumerate(factors):
            for f in factor.scope:
                readers.setdefault(f, []).append(i)
        queue = deque(range(len(factors)))
        queued = [True] * len(factors)
        while queue:
            i = queue.popleft()
            queued[i] = False
            scope = factors[i].scope
            positions = [np.flatnonzero(keep[f]) for f in scope]
            sub = factors[i].table
            if any(len(p) < n for p, n in zip(positions, sub.shape, strict=True)):
                sub = sub[np.ix_(*positions)]
            for axis, f in enumerate(scope):
                support = sub.any(axis=tuple(a for a in range(len(scope)) if a != axis))
                if support.all():
                    continue
                keep[f][positions[axis][~support]] = False
                positions[axis] = positions[axis][support]
                sub = np.compress(support, sub, axis=axis)
                for j in readers[f]:
                    if not queued[j]:
                        queue.append(j)
                        queued[j] = True
        cut = [
            Factor(factor.scope, factor.table[np.ix_(*[np.flatnonzero(keep[f]) for f in factor.scope])])
            for factor in factors
        ]
        return {f: v[keep[f]] for f, v in domains.items()}, cut

    def _components(self, factors: list[Factor]) -> list[tuple[str, ...]]:
        parent = {f: f for f in self.fields}

        def root(f: str) -> str:
            while parent[f] != f:
                parent[f] = parent[parent[f]]
                f = parent[f]
            return f

        for factor in factors:
            for f in factor.scope[1:]:
                parent[root(f)] = root(factor.scope[0])
        groups: dict[str, list[str]] = {}
        for f in self.fields:
            groups.setdefault(root(f), []).append(f)
        ordered = sorted(
            groups.values(),
            key=lambda g: (
                min((self.first.index(f) for f in g if f in self.first), default=len(self.first)),
                prod(len(self.domains[f]) for f in g),
            ),
        )  # small blocks first: listing expands them while few
        return [tuple(g) for g in ordered]

    # -- ranks to rows ----------------------------------------------------------------------------
    def _split(self, ranks: np.ndarray) -> list[np.ndarray]:
        """Global ranks to per-block ranks, the first block most significant."""
        out = []
        rest = np.asarray(ranks, dtype=np.int64 if self.count < EXACT_INT64 else object)
        for block in reversed(self.blocks):
            out.append(rest % block.count)
            rest = rest // block.count
        return out[::-1]

    def _rows(self, chosen: Mapping[str, np.ndarray], n: int) -> np.ndarray:
        rows = np.empty((n, len(self.fields)), dtype=np.int64, order="F")  # filled column by column
        for f, pick in chosen.items():
            rows[:, self._column[f]] = self.domains[f][np.asarray(pick, dtype=np.int64)]
        return rows

    def rows(self, ranks: np.ndarray) -> np.ndarray:
        """The configs of the given ranks (each in ``[0, count)``), one row per rank."""
        chosen: dict[str, np.ndarray] = {}
        for block, block_ranks in zip(self.blocks, self._split(ranks), strict=True):
            chosen.update(block.unrank(block_ranks))
        return self._rows(chosen, len(ranks))

    def range_rows(self, start: int, stop: int) -> np.ndarray:
        """The configs of ranks ``start`` to ``stop`` (excluded), in rank order.

        Consecutive ranks share their most significant fields, so rather than unranking each rank
        the prefixes are expanded field by field, keeping only those whose ranks meet the range:
        the work per config is a few operations on the last fields' values, not a pass over every
        field's domain.
        """
        kind = object if self.count >= EXACT_INT64 else np.int64
        offsets = np.zeros(1, dtype=kind)
        levels: list[tuple[str, np.ndarray, np.ndarray]] = []  # (field, value positions, parent prefix)
        for j, block in enumerate(self.blocks):
            tail = prod(b.count for b in self.blocks[j + 1 :])
            current = np.full(len(offsets), block.count, dtype=block.dtype)
            buckets = block.buckets[::-1]
            live: dict[str, np.ndarray] = {}  # positions of the fields later buckets of the block read
            for k, bucket in enumerate(buckets):
                counts = block.counts(bucket, live, current)
                parent, value = np.nonzero(counts)
                current = counts[parent, value]
                span = current.astype(kind) * tail if tail != 1 or kind is object else current
                before = np.cumsum(span) - span  # children in rank order: a parent's first rank plus
                low = offsets[parent] + before - _row_starts(before, parent)  # its earlier children's
                first = int(np.searchsorted(low + span, start, side="right"))
                last = int(np.searchsorted(low, stop, side="left"))
                parent, value, current, offsets = (
                    parent[first:last],
                    value[first:last],
                    current[first:last],
                    low[first:last],
                )
                needed = {g for later in buckets[k + 1 :] for g in later.given}
                live = {f: pick[parent] for f, pick in live.items() if f in needed}
                if bucket.field in needed:
                    live[bucket.field] = value
                levels.append((bucket.field, value, parent))
        chosen: dict[str, np.ndarray] = {}
        index = np.arange(len(offsets))
        for field, value, parent in reversed(levels):
            chosen[field] = value[index]
            index = parent[index]
        return self._rows(chosen, len(offsets))

    def iter_rows(self, start: int = 0, stop: int | None = None, chunk: int = 1 << 16) -> Iterator[np.ndarray]:
        """Every config from rank ``start`` to ``stop`` in rank order, ``chunk`` rows at a time: memory
        stays bounded by the chunk whatever the count."""
        stop = self.count if stop is None else min(stop, self.count)
        for position in range(start, stop, chunk):
            yield self.range_rows(position, min(stop, position + chunk))

    # -- strata -----------------------------------------------------------------------------------
    def _stratum_blocks(self, fields: Sequence[str]) -> list[tuple[Block, tuple[str, ...]]]:
        out = []
        for block in self.blocks:
            mine = tuple(f for f in block.order if f in fields)
            if mine and block.order[: len(mine)] != mine:
                raise ValueError(f"fields {mine} are not first in their block: build the tally with first={fields}")
            out.append((block, mine))
        return out

    def strata(self, fields: Sequence[str]) -> dict[tuple[int, ...], int]:
        """The number of configs per combination of values of ``fields`` (values, not positions),
        for the combinations that have any. The tally must have been built with ``first=fields``."""
        if self.empty:
            return {}
        per_block: list[list[tuple[dict[str, int], int]]] = []
        for block, mine in self._stratum_blocks(fields):
            if not mine:
                per_block.append([({}, block.count)])
                continue
            combos = list(product(*(range(len(self.domains[f])) for f in mine)))
            forced = {f: np.array([c[i] for c in combos], dtype=np.int64) for i, f in enumerate(mine)}
            totals = block.forced_totals(forced)
            per_block.append(
                [
                    ({f: int(self.domains[f][c[i]]) for i, f in enumerate(mine)}, int(t))
                    for c, t in zip(combos, totals.tolist(), strict=True)
                    if t
                ]
            )
        out: dict[tuple[int, ...], int] = {}
        for parts in product(*per_block):
            values = {k: v for part, _ in parts for k, v in part.items()}
            out[tuple(values[f] for f in fields)] = prod(n for _, n in parts)
        return out

    def stratum_rows(self, fields: Sequence[str], values: Sequence[int], ranks: Sequence[int]) -> np.ndarray:
        """The configs of the given ranks among those whose ``fields`` hold ``values`` (ranks below
        that stratum's count, :meth:`strata`)."""
        wanted = dict(zip(fields, values, strict=True))
        n = len(ranks)
        blocks = self._stratum_blocks(fields)
        forced_per_block = []
        sizes = []
        for block, mine in blocks:
            forced = {f: np.full(n, int(np.searchsorted(self.domains[f], wanted[f])), dtype=np.int64) for f in mine}
            forced_per_block.append(forced)
            sizes.append(int(block.forced_totals(forced)[0]) if mine else block.count)
        rest = np.array(list(ranks), dtype=np.int64 if prod(sizes) < EXACT_INT64 else object)
        split = []
        for size in reversed(sizes):
            split.append(rest % size)
            rest = rest // size
        chosen: dict[str, np.ndarray] = {}
        for (block, mine), forced, block_ranks in zip(blocks, forced_per_block, split[::-1], strict=True):
            chosen.update(block.unrank(block_ranks, forced if mine else None))
        return self._rows(chosen, n)
