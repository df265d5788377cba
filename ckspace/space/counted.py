"""Spaces of a rule set without a proposal table (``open``): counted, listed and sampled from exact
counts, never from a list.

Each cell of such a space is a :class:`~ckspace.constraints.evaluators.count.Tally` over the GEMM fields: the
rule set's domain rules, the validity predicates and the space's extra rules (filters, a problem's
checks, a CK revision). Its configs have ranks ``0 .. count - 1``; the space's configs are the
cells' in request and cell order, so a listing is consecutive ranks and a uniform sample is random
ranks. Depthwise configs are not part of ``open``: its domains are the GEMM fields'.
:class:`CountedBackend` is how a :class:`~ckspace.space.space.Space` of ``open`` reaches these
functions; they take the space itself so that tests and benchmarks can call them on one.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator, Sequence
from functools import lru_cache

from ckspace.constraints.evaluators.count import Tally
from ckspace.constraints.language.expr import Field
from ckspace.constraints.language.rule import Rule, excludes_kind
from ckspace.constraints.rulebook.validity import gemm_rules
from ckspace.constraints.rulesets import get_rule_set
from ckspace.core.cells import Cell, CellProposals, Request
from ckspace.core.errors import CkspaceError
from ckspace.core.fields import GEMM_FIELD_NAMES
from ckspace.core.vocab import EMITTED_PREDICATES, Predicate
from ckspace.space.backend import Backend, SpaceView
from ckspace.space.listing import Kernel

Place = tuple[Request, Cell]

OPEN_LIST_LIMIT = 10_000_000
"""Most kernels of an ``open`` space that list-returning methods (``kernels``, ``names``) hold."""


def cell_rules(space: SpaceView, request: Request, cell: Cell) -> tuple[Rule, ...] | None:
    """Every rule of one cell's GEMM configs: domains, validity predicates and the space's extra rules;
    None when an extra rule reads a field GEMM configs lack (then no config of the cell satisfies it,
    as in listings of the other rule sets)."""
    extra = space.cell_rules(request, cell)[0]
    if any(excludes_kind(rule, GEMM_FIELD_NAMES) for rule in extra):
        return None
    validity = [
        r
        for r in gemm_rules(request.arch, cell.variant, cell.dtype, request.rules_revision)
        if r.predicate in EMITTED_PREDICATES
    ]
    return (*get_rule_set(request.rule_set).domain_rules(request.arch, cell), *validity, *extra)


class _SameExpressions:
    """A cell's rules as a tally reads them: equal to another cell's when their expressions are, in
    order. A tally reads nothing else of a rule, and the rules of fp16 and bf16 (and of the ndims of a
    variant) differ only in their names' words and sources, so such cells share one tally."""

    __slots__ = ("key", "rules")

    def __init__(self, rules: tuple[Rule, ...]) -> None:
        self.rules = rules
        self.key = tuple(rule.expr for rule in rules)

    def __hash__(self) -> int:
        return hash(self.key)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _SameExpressions) and self.key == other.key


@lru_cache(maxsize=12)
def _tally(rules: _SameExpressions, first: tuple[str, ...]) -> Tally:
    """Cells whose rules have the same expressions (the ndims and half dtypes of a variant, usually)
    share one tally."""
    return Tally(GEMM_FIELD_NAMES, rules.rules, first)


def tally(space: SpaceView, request: Request, cell: Cell, first: Sequence[str] = ()) -> Tally | None:
    """The cell's tally (None: the cell is empty because a rule reads fields it lacks)."""
    rules = cell_rules(space, request, cell)
    return None if rules is None else _tally(_SameExpressions(rules), tuple(first))


def places(space: SpaceView) -> list[Place]:
    return [(request, cell) for request in space.requests for cell in request.cells]


def count(space: SpaceView) -> int:
    """The exact number of configs of the space (arbitrary size)."""
    return sum(t.count for t in (tally(space, r, c) for r, c in places(space)) if t is not None)


def iter_kernels(space: SpaceView, chunk: int = 1 << 14) -> Iterator[Kernel]:
    """Every config, in request, cell and rank order, ``chunk`` at a time."""
    for request, cell in places(space):
        cell_tally = tally(space, request, cell)
        if cell_tally is None:
            continue
        for rows in cell_tally.iter_rows(chunk=chunk):
            for row in rows.tolist():
                yield Kernel(request.arch, cell, False, tuple(row), True)


def completions(space: SpaceView, request: Request, cell: Cell, values: dict[str, int]) -> int:
    """How many configs of the cell agree with ``values``: the cell's count with each value fixed."""
    rules = cell_rules(space, request, cell)
    if rules is None:
        return 0
    fixed = tuple(
        Rule(f"fixed_{f}", Predicate.WHERE, Field(f).isin([v]), f"{f} = {v}", "explain") for f, v in values.items()
    )
    return Tally(GEMM_FIELD_NAMES, rules + fixed).count


def sample(space: SpaceView, n: int, seed: int, stratify_by: Sequence[str]) -> list[Kernel]:
    """``n`` distinct configs, deterministic for a seed. Without strata, uniform over the space (random
    ranks without replacement). With strata (combinations of values of ``stratify_by``), strata take
    turns in a seeded order and each yields configs drawn uniformly without replacement inside it,
    as the other rule sets' samples do."""
    fields = tuple(stratify_by)
    rng = random.Random(seed)
    strata: dict[tuple[int, ...], list[tuple[Place, Tally, int]]] = {}
    for place in places(space):
        cell_tally = tally(space, *place, first=fields)
        if cell_tally is None:
            continue
        for key, size in cell_tally.strata(fields).items():
            strata.setdefault(key, []).append((place, cell_tally, size))
    keys = sorted(strata)
    rng.shuffle(keys)
    sizes = {key: sum(size for _, _, size in strata[key]) for key in keys}
    wanted = dict.fromkeys(keys, 0)
    picked = depth = 0
    while picked < n and any(size > depth for size in sizes.values()):
        for key in keys:
            if picked < n and sizes[key] > depth:
                wanted[key] += 1
                picked += 1
        depth += 1
    drawn: dict[tuple[int, ...], list[Kernel]] = {}
    for key in keys:
        if wanted[key]:
            drawn[key] = _draw(strata[key], fields, key, rng.sample(range(sizes[key]), wanted[key]))
    return [drawn[key][d] for d in range(depth) for key in keys if wanted[key] > d]


def _draw(
    members: list[tuple[Place, Tally, int]], fields: tuple[str, ...], key: tuple[int, ...], ranks: list[int]
) -> list[Kernel]:
    """The configs of the given ranks of one stratum, whose configs are its cells' in order."""
    out: dict[int, Kernel] = {}
    offset = 0
    for (request, cell), cell_tally, size in members:
        mine = [r for r in ranks if offset <= r < offset + size]
        if mine:
            rows = cell_tally.stratum_rows(fields, key, [r - offset for r in mine]).tolist()
            out.update(
                (r, Kernel(request.arch, cell, False, tuple(row), True)) for r, row in zip(mine, rows, strict=True)
            )
        offset += size
    return [out[r] for r in ranks]


class CountedBackend(Backend):
    """A space of ``open``: counted and sampled from the cells' tallies, listed lazily in rank order.
    It has no table, so no raw proposals, and a list of it is refused beyond :data:`OPEN_LIST_LIMIT`.
    Each method calls this module's functions by name, so a test may replace them."""

    def listing(self, raw: bool) -> list[Kernel]:
        if raw:
            raise CkspaceError("rule set open proposes no table, so it has no raw proposals")
        total = self.count()
        if total > OPEN_LIST_LIMIT:
            raise CkspaceError(
                f"this open space holds {total:,} kernels, too many to hold as a list "
                f"(limit {OPEN_LIST_LIMIT:,}): iterate with iter_kernels(), sample it, or narrow "
                "it with where()"
            )
        return list(self.iter_kernels())

    def count(self) -> int:
        return count(self.space)

    def iter_kernels(self) -> Iterator[Kernel]:
        return iter_kernels(self.space)

    def sample(self, n: int, seed: int, stratify_by: Sequence[str]) -> list[Kernel]:
        return sample(self.space, n, seed, stratify_by)

    def completions(self, request: Request, cell: Cell, depthwise: bool) -> Callable[[dict[str, int]], int]:
        """A counter, not rows: the cell is never listed (no depthwise config is part of ``open``)."""
        if depthwise:
            return lambda values: 0
        return lambda values: completions(self.space, request, cell, values)

    def proposals(self, request: Request) -> dict[Cell, CellProposals]:
        """No table: empty proposals, for which the domain rules stand in (:meth:`model_inputs`)."""
        return {cell: CellProposals() for cell in request.cells}

    def model_inputs(
        self, request: Request, cell: Cell, depthwise: bool, extra: Sequence[Rule]
    ) -> tuple[CellProposals | None, Sequence[Rule]]:
        if depthwise:
            return CellProposals(), extra
        return None, [*get_rule_set(request.rule_set).domain_rules(request.arch, cell), *extra]
