"""Compiling emitted kernels with a HIP compiler and loading the result.

:mod:`toolchain` finds a compiler that knows the target; :mod:`build` plans batched translation
units, runs them through ninja with a content-addressed object cache and writes the build report;
:mod:`loader` lists and runs the kernels of a built library through ctypes.
"""


def __getattr__(name: str) -> object:
    """``ckspace.hip_runtime.Dispatcher``, imported on first use (it pulls in the selector's code,
    which the build path does not need)."""
    if name == "Dispatcher":
        from ckspace.hip_runtime.dispatcher import Dispatcher

        return Dispatcher
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
