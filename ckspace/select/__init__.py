"""Run-time kernel selection: the selector, its compiled engine and the models it loads.

``Selector.load(arch, variant, dtype)`` and ``selector.select(problem, candidates, k)`` are the
run-time API (:mod:`ckspace.select.selector`); :mod:`~ckspace.select.compiled` is the same selection
compiled to C, :mod:`~ckspace.select.store` the model directories, :mod:`~ckspace.select.support`
what a model was trained on, :mod:`~ckspace.select.fallbacks` the vector-width variants and
:mod:`~ckspace.select.predictor` batch prediction through LightGBM's C API. Training, evaluation and
planning live in :mod:`ckspace.training` and :mod:`ckspace.planning`; features in
:mod:`ckspace.features`.
"""

from ckspace.select.selector import Selection, Selector

__all__ = ["Selection", "Selector"]
