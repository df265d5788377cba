"""The answer of :meth:`Selector.select <ckspace.select.selector.Selector.select>`: the pick and
the ranked kernels (:class:`Selection`, :class:`Ranked`). Kept apart from the selector, which
scores, because they are plain records that its callers (plan, the CLI) only read."""

from __future__ import annotations

from dataclasses import dataclass

from ckspace.core.config import GemmConfig
from ckspace.core.vocab import ScoreSource


@dataclass(frozen=True, slots=True)
class Ranked:
    """One ranked kernel: ``name`` is the kernel to run; ``family`` the candidate it stands for when
    it is that candidate's vector-width variant (else None); ``score`` what the list is ordered by
    (the ranker's raw score, or the analytical log2 TFLOPS).

    ``predicted_tflops`` agrees with the order: the regressor's estimate, capped at the estimate
    shown for the kernel ranked above, so a later kernel never shows a higher number (the ranker
    and the regressor are separate models and disagree on close calls). The pick's number is the
    regressor's own estimate, as the C dispatcher returns it. A plain dataclass: built per select
    call, where a pydantic model's construction alone cost ~5 us."""

    name: str
    family: str | None
    score: float
    predicted_tflops: float
    config: GemmConfig
    """The kernel itself (``name`` is its own name)."""
    source: str = "model"
    """Where the estimate comes from: ``model`` (the trained model, a kernel and problem inside its
    training domain), ``model, extrapolated: <reason>`` (outside it: the model's estimate of the
    nearest kernel it saw, scaled by the analytical model, :mod:`ckspace.select.support`) or
    ``analytical`` (no model for the cell: :mod:`ckspace.features.performance`)."""


@dataclass(frozen=True, slots=True)
class Selection:
    """The answer: the kernel to run, the top candidates, and how many could run the problem."""

    pick: str
    family: str | None
    top: list[Ranked]
    source: ScoreSource  # what the cell has; each row says its own (Ranked.source)
    feasible: int
    fallbacks: int
    candidates: int

    @property
    def pick_source(self) -> str:
        """The pick's own source (``model``, ``model, extrapolated: ...`` or ``analytical``)."""
        return self.top[0].source
