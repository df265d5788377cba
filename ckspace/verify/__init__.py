"""Holding a kernel's output to a CPU reference.

:mod:`~ckspace.verify.reference` computes the exact result, :mod:`~ckspace.verify.sampled` the
result at sampled elements of problems too big for a full reference, and
:mod:`~ckspace.verify.comparison` the tolerance and the check. Imports only core and numpy, so the
checks can be read and tested without a build or a GPU.
"""
