"""Compiling emitted kernels with a HIP compiler and loading the result.

:mod:`toolchain` finds a compiler that knows the target; :mod:`build` plans batched translation
units, runs them through ninja with a content-addressed object cache and writes the build report;
:mod:`loader` lists and runs the kernels of a built library through ctypes.
"""
