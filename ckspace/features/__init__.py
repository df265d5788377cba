"""What the selector knows of a (problem, kernel) pair, stated once for Python and for C.

:mod:`~ckspace.features.formula` is the little language of real-valued formulas,
:mod:`~ckspace.features.matrix` the features (the models' inputs) written in it,
:mod:`~ckspace.features.c_source` the same features rendered to C,
:mod:`~ckspace.features.performance` the analytical performance model, and
:mod:`~ckspace.features.hardware` the per-arch hardware facts all of them read.
Run-time selection, training, planning and emission reach them; they import only core.
"""
