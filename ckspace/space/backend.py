"""The one interface behind every :class:`~ckspace.space.space.Space`: how its kernels are reached.

A space reaches its kernels in one of two ways, fixed by its rule sets: those with a proposal table
are listed through the enumerator and the cell cache (:mod:`ckspace.space.tabled`); ``open``, which
has none, is counted, listed and sampled from exact counts (:mod:`ckspace.space.counted`). What
differs between the two is this module's :class:`Backend`; ``Space`` chooses one when it is made and
asks it, so that the query API is written once over both (Kernel Tuner's ``Runner`` base class is
the model). A backend serves one space and holds that space's memos (listings, rows per cell, cell
models): a narrowed space gets a backend of its own (:meth:`Backend.narrowed`), so no memo outlives
the filters, problem or target it was computed for, and none has to be named to be forgotten.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Sequence
from functools import cached_property
from typing import TYPE_CHECKING, Protocol

from ckspace.core.cells import Cell, CellProposals, Request
from ckspace.core.fields import Row
from ckspace.space.listing import Kernel

if TYPE_CHECKING:
    from ckspace.constraints.evaluators.model import CellModel
    from ckspace.constraints.language.rule import Rule
    from ckspace.environment.target import Target
    from ckspace.workloads.problem import ConvProblem


class SpaceView(Protocol):
    """What a backend reads of its :class:`~ckspace.space.space.Space` (which imports this module):
    ``_query_rules`` gives the rules a table listing evaluates itself (the target's come cached)."""

    requests: tuple[Request, ...]
    use_cache: bool
    target: Target
    filters: tuple[Rule, ...]
    problem: ConvProblem | None

    def cell_rules(self, request: Request, cell: Cell) -> tuple[Sequence[Rule], Sequence[Rule]]: ...

    def _query_rules(self, request: Request, cell: Cell) -> tuple[Sequence[Rule], Sequence[Rule]]: ...


Completions = Sequence[Row] | Callable[[dict[str, int]], int]
"""What explain counts a partial config's valid completions in: the cell's valid rows, or a counter
of them where the rows are never listed (see :func:`ckspace.space.explain.explain_cell`)."""


class Backend(ABC):
    """One space's way to its kernels. The abstract methods are what the two ways do differently;
    the rest (the listings as lists, rows per cell, the cell models) is built on them, memoised here
    for the life of the space."""

    default_strata: tuple[str, ...] = ()
    """The fields :meth:`Space.sample <ckspace.space.space.Space.sample>` stratifies by when the
    caller names none."""

    def __init__(self, space: SpaceView) -> None:
        self.space = space
        self._models: dict[tuple[Request, Cell, bool], CellModel] = {}

    def narrowed(self, space: SpaceView) -> Backend:
        """The same kind of backend for ``space``, a narrowing of this one's (other filters, problem
        or target, the same requests), with none of this one's memos."""
        return type(self)(space)

    # -- listing --------------------------------------------------------------------------------
    @abstractmethod
    def listing(self, raw: bool) -> list[Kernel]:
        """The valid kernels as a list, in listing order; ``raw``: the rule set's proposals before
        the validity filter. :class:`~ckspace.core.errors.CkspaceError` when there is no such list."""

    @cached_property
    def valid(self) -> list[Kernel]:
        return self.listing(raw=False)

    @cached_property
    def raw(self) -> list[Kernel]:
        return self.listing(raw=True)

    @abstractmethod
    def count(self) -> int:
        """The number of valid kernels."""

    @abstractmethod
    def iter_kernels(self) -> Iterator[Kernel]:
        """The valid kernels one at a time, in listing order."""

    @abstractmethod
    def sample(self, n: int, seed: int, stratify_by: Sequence[str]) -> list[Kernel]:
        """``n`` valid kernels (fewer if the space holds fewer), deterministic for a seed, strata of
        ``stratify_by`` (checked GEMM fields) taking turns."""

    @cached_property
    def rows_by_cell(self) -> dict[tuple[str, Cell, bool], list[Row]]:
        """The valid kernels' rows per (arch, cell, depthwise)."""
        out: dict[tuple[str, Cell, bool], list[Row]] = {}
        for k in self.valid:
            out.setdefault((k.arch, k.cell, k.depthwise), []).append(k.row)
        return out

    def rows_of(self, arch: str, cell: Cell, depthwise: bool) -> list[Row]:
        return self.rows_by_cell.get((arch, cell, depthwise), [])

    @abstractmethod
    def completions(self, request: Request, cell: Cell, depthwise: bool) -> Completions:
        """What explain counts a partial config's valid completions in, for one cell."""

    # -- models ---------------------------------------------------------------------------------
    @abstractmethod
    def proposals(self, request: Request) -> dict[Cell, CellProposals]:
        """The rule set's proposals per cell of ``request``."""

    @abstractmethod
    def model_inputs(
        self, request: Request, cell: Cell, depthwise: bool, extra: Sequence[Rule]
    ) -> tuple[CellProposals | None, Sequence[Rule]]:
        """What bounds a cell's model besides the validity predicates: the proposal table (None:
        none) and the rules, ``extra`` (the space's, :meth:`SpaceView.cell_rules`) and whatever
        stands in for a missing table."""

    def cell_model(self, request: Request, cell: Cell, depthwise: bool) -> CellModel:
        """The cell's model with the space's extra rules, memoised."""
        key = (request, cell, depthwise)
        if key not in self._models:
            from ckspace.constraints.evaluators.model import cell_model

            extra = self.space.cell_rules(request, cell)[1 if depthwise else 0]
            proposal, rules = self.model_inputs(request, cell, depthwise, extra)
            self._models[key] = cell_model(request.arch, cell, proposal, depthwise, rules, request.rules_revision)
        return self._models[key]
