"""Choosing the kernels a workload needs.

:mod:`~ckspace.planning.workload` reads a workload and asks the selector for its predictions;
:mod:`~ckspace.planning.plan` chooses a kernel set with CP-SAT. May import select and below.
"""
