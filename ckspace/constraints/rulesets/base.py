"""The contract between a rule set and the enumerator."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import TYPE_CHECKING, ClassVar

from ckspace.core.cells import Cell, CellProposals, CellResult, Request
from ckspace.core.errors import InvalidInputError

if TYPE_CHECKING:
    from ckspace.constraints.generate.sampling import Entry
    from ckspace.constraints.language.rule import Rule


class RuleSetRefusal(InvalidInputError):
    """A request a rule set refuses as a whole, as upstream's entry point raises (a ``ValueError``
    there too) instead of answering: no cell of it is answered, as no config of the upstream call
    is emitted. ``reason`` says which part of the request is not supported."""

    def __init__(self, rule_set: str, arch: str, reason: str) -> None:
        self.rule_set, self.arch, self.reason = rule_set, arch, reason
        super().__init__(f"rule set {rule_set} refuses this request on {arch}, as upstream raises: {reason}")


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
    has_table: ClassVar[bool] = True
    """False for a rule set that proposes no table (``open``): its fields range over the domains
    :meth:`domain_rules` states, and its cells are counted, listed and sampled by
    :mod:`ckspace.constraints.evaluators.count` instead of the enumerator."""

    def refusal(self, arch: str, cell: Cell) -> str | None:
        """Why upstream's entry point raises for a request holding ``cell`` on ``arch`` (None: it
        answers the cell). A rule set that refuses a request refuses it exactly when it refuses one
        of its cells, so callers that want every answerable cell (``lint``, tests) can leave the
        refused ones out; :meth:`propose` raises :class:`RuleSetRefusal` for a request with one."""
        return None

    def domain_rules(self, arch: str, cell: Cell) -> tuple[Rule, ...]:
        """The named rules stating each field's domain in a cell (rule sets without a table only)."""
        raise NotImplementedError(f"rule set {self.name} proposes a table, not domains")

    @abstractmethod
    def propose(self, request: Request, base: Mapping[Cell, CellResult] | None = None) -> dict[Cell, CellProposals]:
        """Proposals for every cell of ``request`` (cells it does not cover map to empty ones)."""


class SampledRuleSet(RuleSet):
    """A deterministic subset of ``full``, selected from the emission order of the whole request
    (so a cell's subset depends on the other cells requested, as upstream's is)."""

    request_wide = True
    derives_from = "full"

    def propose(self, request: Request, base: Mapping[Cell, CellResult] | None = None) -> dict[Cell, CellProposals]:
        from ckspace.constraints.generate.sampling import emission_list, split

        if base is None:
            raise ValueError(f"rule set {self.name} samples {self.derives_from}: the enumerator passes its cells")
        return split(request, self.select(emission_list(request, base)))

    @abstractmethod
    def select(self, entries: list[Entry]) -> list[Entry]:
        """The chosen entries of ``full``'s emission list, in emission order."""
