"""The generated dispatcher from Python: ``Dispatcher.load(path)`` opens a library built from an
emitted tree (``ckspace build DIR --host-only`` or the full kernel library) and calls its C API.

Only the host part is called here (kernel list, support checks, selection), so opening the full
kernel library loads HIP's runtime as a dependency of the file but touches no GPU.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from ckspace.core.errors import CkspaceError, InvalidInputError
from ckspace.core.problem import ConvProblem
from ckspace.core.vocab import Dtype, Variant
from ckspace.emit.dispatcher import STRUCT_FIELDS

STATUS = {
    0: "ok",
    1: "no kernel can run the problem",
    2: "the kernel cannot run the problem",
    3: "malformed problem",
    4: "kernel index out of range",
    5: "launch failed",
}
NO_KERNEL = 1


class ConvProblemC(ctypes.Structure):
    """Mirror of ``ckspace_conv_problem`` (``ckspace_dispatch.h``): every field an ``int64_t``."""

    _fields_ = [(name, ctypes.c_int64) for name in STRUCT_FIELDS]

    @classmethod
    def of(cls, problem: ConvProblem, variant: Variant | str, dtype: Dtype | str) -> ConvProblemC:
        values = {name: getattr(problem, name) for name in STRUCT_FIELDS[2:]}
        return cls(variant=Variant.parse(variant).code, dtype=Dtype.parse(dtype).code, **values)


@dataclass(frozen=True)
class Choice:
    """What ``ckspace_select`` answered."""

    kernel: int
    name: str
    predicted_tflops: float


class Dispatcher:
    """A library with the dispatcher's C API."""

    def __init__(self, path: Path, handle: ctypes.CDLL) -> None:
        self.path = path
        self._lib = handle
        self._lib.ckspace_kernel_count.restype = ctypes.c_int
        self._lib.ckspace_kernel_name.restype = ctypes.c_char_p
        self._lib.ckspace_kernel_name.argtypes = [ctypes.c_int]
        self._lib.ckspace_is_supported.restype = ctypes.c_int
        self._lib.ckspace_is_supported.argtypes = [ctypes.c_int, ctypes.POINTER(ConvProblemC)]
        self._lib.ckspace_select.restype = ctypes.c_int
        self._lib.ckspace_select.argtypes = [
            ctypes.POINTER(ConvProblemC),
            ctypes.POINTER(ctypes.c_int),
            ctypes.POINTER(ctypes.c_float),
        ]
        self._run = getattr(self._lib, "ckspace_run", None)
        if self._run is not None:
            self._run.restype = ctypes.c_int
            self._run.argtypes = [
                ctypes.c_int,
                ctypes.POINTER(ConvProblemC),
                ctypes.c_void_p,
                ctypes.c_void_p,
                ctypes.c_void_p,
                ctypes.c_void_p,
            ]

    @classmethod
    def load(cls, path: str | Path) -> Dispatcher:
        """Open a host-only dispatcher library or a kernel library built with ``--with-selector``."""
        path = Path(path)
        if not path.is_file():
            raise InvalidInputError(f"no dispatcher library at {path}")
        try:
            handle = ctypes.CDLL(str(path.resolve()))
        except OSError as exc:
            raise CkspaceError(f"cannot load {path}: {exc}") from None
        if not hasattr(handle, "ckspace_select"):
            raise InvalidInputError(f"{path} has no dispatcher (emit the tree with --with-selector)")
        return cls(path, handle)

    @cached_property
    def kernel_names(self) -> tuple[str, ...]:
        return tuple(self._lib.ckspace_kernel_name(i).decode() for i in range(self._lib.ckspace_kernel_count()))

    @property
    def has_run(self) -> bool:
        """Whether the library holds the kernels (``ckspace_run``), not just the host part."""
        return self._run is not None

    def index(self, kernel: int | str) -> int:
        if isinstance(kernel, str):
            try:
                return self.kernel_names.index(kernel)
            except ValueError:
                raise InvalidInputError(f"{self.path.name} has no kernel {kernel!r}") from None
        return kernel

    def is_supported(self, kernel: int | str, problem: ConvProblem, variant: Variant | str, dtype: Dtype | str) -> bool:
        """``ckspace_is_supported``: whether the kernel can run the problem as it is."""
        answer = self._lib.ckspace_is_supported(
            self.index(kernel), ctypes.byref(ConvProblemC.of(problem, variant, dtype))
        )
        if answer < 0:
            raise InvalidInputError(f"ckspace_is_supported: {STATUS.get(-answer, answer)}")
        return bool(answer)

    def run(self, kernel: int, problem: ConvProblemC, a: int, b: int, c: int, stream: int | None) -> int:
        """``ckspace_run`` on operand pointers (device memory, or host memory for a stand-in library);
        the status code (0 ok, see :data:`STATUS`). The caller synchronises and times."""
        if self._run is None:
            raise CkspaceError(
                f"{self.path.name} holds only the dispatcher's host part (no ckspace_run): "
                "build the tree without --host-only"
            )
        return self._run(kernel, ctypes.byref(problem), a, b, c, stream)

    def select_raw(self, problem: ConvProblemC) -> tuple[int, int, float]:
        """(status, kernel index, predicted TFLOPS) of ``ckspace_select`` on a prepared struct."""
        kernel, tflops = ctypes.c_int(-1), ctypes.c_float(0.0)
        status = self._lib.ckspace_select(ctypes.byref(problem), ctypes.byref(kernel), ctypes.byref(tflops))
        return status, kernel.value, tflops.value

    def select(self, problem: ConvProblem, variant: Variant | str, dtype: Dtype | str) -> Choice | None:
        """The kernel ``ckspace_select`` picks, or None when no kernel of the library can run it."""
        status, kernel, tflops = self.select_raw(ConvProblemC.of(problem, variant, dtype))
        if status == NO_KERNEL:
            return None
        if status != 0:
            raise InvalidInputError(f"ckspace_select: {STATUS.get(status, status)}")
        return Choice(kernel, self.kernel_names[kernel], tflops)
