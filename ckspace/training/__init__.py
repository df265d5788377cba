"""Training and judging the selector's models on measurements.

:mod:`~ckspace.training.dataset` reads measurement CSVs into per-cell matrices,
:mod:`~ckspace.training.boosters` fits LightGBM, :mod:`~ckspace.training.trainer` trains a cell's
shipped model, :mod:`~ckspace.training.evaluation` cross-validates it (with
:mod:`~ckspace.training.plan_evaluation` for kernel-set plans and :mod:`~ckspace.training.metrics`
for the figures), and :mod:`~ckspace.training.plot` draws them.
May import planning, select and everything below.
"""
