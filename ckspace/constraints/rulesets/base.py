"""The contract between a rule set and the enumerator."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import ClassVar

from ckspace.constraints.request import Cell, Request
from ckspace.space.fields import Row


@dataclass
class CellProposals:
    """What a rule set proposes for one cell, in emission order.

    ``candidates`` are the GEMM configs its tables generate; the rule set's own output (RULES.md's
    "raw") is the candidates that pass the predicates the rule set runs itself (``applies``).
    Depthwise rows are in :data:`~ckspace.space.fields.DEPTHWISE_FIELDS` order; ``duplicates``
    counts the repeats the rule set generated and dropped (a lint finding, not an error).
    """

    candidates: list[Row] = field(default_factory=list)
    applies: tuple[str, ...] = ()
    depthwise: list[Row] = field(default_factory=list)
    duplicates: int = 0


class RuleSet(ABC):
    """A rule set: the proposals of one upstream generator entry point, per cell.

    Subclasses declare ``name`` (the CLI/API spelling), ``summary``, whether configs carry their
    dtype tag (``tags_dtype``, which upstream's WMMA rule reads) and whether a cell's output depends
    on the rest of the request (``request_wide``, true for the sampling rule sets). Generators are
    imported inside ``propose`` so that naming a rule set stays cheap.
    """

    name: ClassVar[str]
    summary: ClassVar[str]
    tags_dtype: ClassVar[bool] = True
    request_wide: ClassVar[bool] = False

    @abstractmethod
    def propose(self, request: Request) -> dict[Cell, CellProposals]:
        """Proposals for every cell of ``request`` (cells it does not cover map to empty ones)."""
