"""The contract between a rule set and the enumerator."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import ClassVar

from ckspace.core.cells import Cell, CellProposals, CellResult, Request


class RuleSet(ABC):
    """A rule set: the proposals of one upstream generator entry point, per cell.

    Subclasses declare ``name`` (the CLI/API spelling), ``summary``, whether configs carry their
    dtype tag (``tags_dtype``, which upstream's WMMA rule reads) and whether a cell's output depends
    on the rest of the request (``request_wide``, true for the sampling rule sets). A rule set that
    samples another names it in ``derives_from``; the enumerator then passes that rule set's
    enumerated cells for the same request (from the cell cache where possible) as ``base``.
    Generators are imported inside ``propose`` so that naming a rule set stays cheap.
    """

    name: ClassVar[str]
    summary: ClassVar[str]
    tags_dtype: ClassVar[bool] = True
    request_wide: ClassVar[bool] = False
    derives_from: ClassVar[str | None] = None

    @abstractmethod
    def propose(self, request: Request,
                base: Mapping[Cell, CellResult] | None = None) -> dict[Cell, CellProposals]:
        """Proposals for every cell of ``request`` (cells it does not cover map to empty ones)."""
