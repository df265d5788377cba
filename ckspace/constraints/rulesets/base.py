"""The contract between a rule set and the enumerator."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import ClassVar

from ckspace.constraints.request import Cell, Request
from ckspace.space.fields import Row


@dataclass
class CellProposals:
    """What a rule set proposes for one cell.

    ``candidates`` are the configs its tables generate, before the predicates the rule set calls
    itself; ``gemm`` is what it returns (RULES.md's "raw"), in emission order. Depthwise rows are
    in :data:`~ckspace.space.fields.DEPTHWISE_FIELDS` order and pass no arch predicate upstream.
    """

    candidates: list[Row] = field(default_factory=list)
    gemm: list[Row] = field(default_factory=list)
    depthwise: list[Row] = field(default_factory=list)


class RuleSet(ABC):
    """A rule set: the proposals of one upstream generator entry point, per cell.

    Subclasses declare ``name`` (the CLI/API spelling), ``summary``, whether configs carry their
    dtype tag (``tags_dtype``, which upstream's WMMA rule reads) and whether a cell's output depends
    on the rest of the request (``request_wide``, true for the sampling rule sets).
    """

    name: ClassVar[str]
    summary: ClassVar[str]
    tags_dtype: ClassVar[bool] = True
    request_wide: ClassVar[bool] = False

    @abstractmethod
    def propose(self, request: Request) -> dict[Cell, CellProposals]:
        """Proposals for every cell of ``request`` (cells it does not cover map to empty ones)."""

    @staticmethod
    def keep(arch: str, cell: Cell, rows: Sequence[Row], predicates: Iterable[str]) -> list[Row]:
        """The rows passing the named predicates (the checks a rule set runs on its own output)."""
        from ckspace.constraints.classify import passing  # deferred: numpy is not needed to name rule sets
        from ckspace.constraints.rules import gemm_rules
        from ckspace.space.fields import GEMM_FIELD_NAMES

        if not rows:
            return []
        ok = passing(gemm_rules(arch, cell.variant, cell.dtype), rows, GEMM_FIELD_NAMES, predicates)
        return [row for row, good in zip(rows, ok) if good]
