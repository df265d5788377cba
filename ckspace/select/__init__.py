"""Kernel selection: features, training, evaluation and the run-time selector.

``Selector.load(arch, variant, dtype)`` and ``selector.select(problem, candidates, k)`` are the
run-time API (:mod:`ckspace.select.selector`); ``ckspace train``/``evaluate``/``select`` the CLI.
"""

from ckspace.select.selector import Selection, Selector

__all__ = ["Selection", "Selector"]
