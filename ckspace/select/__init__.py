"""Run-time kernel selection: the selector, its compiled engine and the models it loads.

``Selector.load(arch, variant, dtype)`` and ``selector.select(problem, candidates, k)`` are the
run-time API (:mod:`ckspace.select.selector`). The candidates a selector scores are
:mod:`~ckspace.select.candidates` (with the vector-width variants of
:mod:`~ckspace.select.fallbacks`), which of them can run a problem :mod:`~ckspace.select.feasibility`,
and their scores :mod:`~ckspace.select.scoring`; :mod:`~ckspace.select.compiled` is the same
selection compiled to C, :mod:`~ckspace.select.store` the model directories,
:mod:`~ckspace.select.support` what a model was trained on and :mod:`~ckspace.select.scorers`
what computes the scores (one interface, a class per engine: compiled trees, LightGBM through its
C API, the analytical model). Training, evaluation and
planning live in :mod:`ckspace.training` and :mod:`ckspace.planning`; features in
:mod:`ckspace.features`.
"""

from ckspace.select.selection import Selection
from ckspace.select.selector import Selector

__all__ = ["Selection", "Selector"]
