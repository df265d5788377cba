"""Scoring's shared pieces: a problem's rows as scored (:class:`Scored`) and the vector rule every
score obeys (:func:`vector_rule`), which :meth:`ckspace.select.selector.Selector.score_table` applies
and the C dispatcher repeats in the same arithmetic."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ckspace.core.vocab import ScoreSource
from ckspace.select.candidates import Support
from ckspace.select.support import source_text


@dataclass(frozen=True)
class Scored:
    """One problem's rows scored by the one rule
    :meth:`~ckspace.select.selector.Selector.score_table` states: ``scores`` order them (higher
    first); ``reasons[i]`` says why row i is extrapolated (None: it is not); ``sibling_of[i]`` is
    the row of ``sibling`` (the feature rows of the distinct siblings) row i is scored through, -1
    when it is scored itself; ``source`` is what scored them."""

    scores: np.ndarray
    matrix: np.ndarray
    reasons: list[str | None]
    sibling_of: np.ndarray
    sibling: np.ndarray | None
    source: ScoreSource

    def row_source(self, i: int) -> str:
        return source_text(self.source is ScoreSource.MODEL, self.reasons[i])


def vector_rule(scores: np.ndarray, analytical: np.ndarray, support: Support, scale: float) -> np.ndarray:
    """A kernel never scores above a wider-vector variant of itself among the rows: each row is
    capped at every wider variant's score moved by the analytical log2 ratio of the two (which the
    analytical model makes negative). The caps read the uncapped scores; they are transitive, so
    the order of the rows does not matter. A kernel outside the domain already scores so against
    a shared sibling; the rule binds where a model was trained on several widths and ordered two
    variants against physics. The C dispatcher applies the same caps in the same arithmetic."""
    family = support.family
    if len(set(family.tolist())) == family.size:  # no kernel here with a variant of itself: the usual case
        return scores
    _, inverse, counts = np.unique(family, return_inverse=True, return_counts=True)
    shared = np.flatnonzero(counts[inverse] > 1)  # rows with another variant of their kernel here
    fam, vec = family[shared], support.vectors[shared]
    at_least = (vec[None, :, :] >= vec[:, None, :]).all(axis=2)  # [r, w]: w as wide as r everywhere
    beyond = (vec[None, :, :] > vec[:, None, :]).any(axis=2)
    r, w = np.nonzero((fam[:, None] == fam[None, :]) & at_least & beyond)
    if r.size == 0:
        return scores
    r, w = shared[r], shared[w]
    capped = scores.copy()
    np.minimum.at(capped, r, scores[w] + scale * (analytical[r] - analytical[w]))
    return capped
