"""Spaces of rule sets with a proposal table (every rule set but ``open``): listed, never counted.

The rule set proposes each cell's configs and the generator's rules classify them; the listing
(:func:`~ckspace.space.listing.list_kernels`, through the cell cache) is small enough to hold, so
counting, sampling and explaining all read it. The proposals depend on the requests alone, so a
narrowed space shares them, and the rule space's classified cells, with the space it narrows (a
target's listing and the rule space's, which ``enumerate`` both counts, classify once).
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

from ckspace.core.cells import Cell, CellProposals, CellResult, Request
from ckspace.core.fields import GEMM_FIELD_NAMES, Row
from ckspace.space.backend import Backend, SpaceView
from ckspace.space.listing import Kernel, list_kernels

if TYPE_CHECKING:
    from ckspace.constraints.language.rule import Rule


class TableBackend(Backend):
    """A space whose kernels are its rule sets' proposals that every rule lets through."""

    default_strata = ("pipeline", "tile_m", "tile_n", "tile_k")

    def __init__(
        self,
        space: SpaceView,
        proposals: dict[Request, dict[Cell, CellProposals]] | None = None,
        cells: dict[Request, dict[Cell, CellResult]] | None = None,
    ) -> None:
        super().__init__(space)
        self._proposals = {} if proposals is None else proposals
        self._cells = {} if cells is None else cells

    def narrowed(self, space: SpaceView) -> TableBackend:
        return TableBackend(space, self._proposals, self._cells)

    def listing(self, raw: bool) -> list[Kernel]:
        space = self.space
        narrowed = bool(space.filters) or space.problem is not None
        return list_kernels(
            space.requests,
            raw=raw,
            use_cache=space.use_cache,
            target=space.target,
            filters=space._query_rules if narrowed else None,
            memo=self._cells,
        )

    def count(self) -> int:
        return len(self.valid)

    def iter_kernels(self) -> Iterator[Kernel]:
        return iter(self.valid)

    def sample(self, n: int, seed: int, stratify_by: Sequence[str]) -> list[Kernel]:
        """Strata take turns, each yielding its kernels in a seeded random order; depthwise kernels
        form their own stratum."""
        index = [GEMM_FIELD_NAMES.index(f) for f in stratify_by]
        strata: dict[tuple, list[Kernel]] = {}
        for k in self.valid:
            key = ("depthwise",) if k.depthwise else tuple(k.row[i] for i in index)
            strata.setdefault(key, []).append(k)
        rng = random.Random(seed)
        queues = []
        for key in sorted(strata, key=repr):
            members = strata[key][:]
            rng.shuffle(members)
            queues.append(members)
        rng.shuffle(queues)
        picked: list[Kernel] = []
        depth = 0
        while len(picked) < n and any(depth < len(q) for q in queues):
            picked += [q[depth] for q in queues if depth < len(q)][: n - len(picked)]
            depth += 1
        return picked

    def completions(self, request: Request, cell: Cell, depthwise: bool) -> list[Row]:
        return self.rows_of(request.arch, cell, depthwise)

    def proposals(self, request: Request) -> dict[Cell, CellProposals]:
        """Memoised: explanations reuse them."""
        if request not in self._proposals:
            from ckspace.constraints.enumeration.enumerator import propose

            self._proposals[request] = propose(request, self.space.use_cache)
        return self._proposals[request]

    def model_inputs(
        self, request: Request, cell: Cell, depthwise: bool, extra: Sequence[Rule]
    ) -> tuple[CellProposals | None, Sequence[Rule]]:
        return self.proposals(request)[cell], extra
