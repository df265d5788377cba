"""Choosing the kernels a workload needs.

:mod:`~ckspace.planning.workload` reads a workload and asks the selector for its predictions;
:mod:`~ckspace.planning.plan` chooses a kernel set with CP-SAT, whose model and interruptible
solve are :mod:`~ckspace.planning.plan_model`'s; :mod:`~ckspace.planning.fleet` shares one total
budget among the plans of several archs. May import select and below.
"""
