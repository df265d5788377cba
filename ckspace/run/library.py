"""One Python handle on a library ``ckspace build`` made: :class:`KernelLibrary`.

It opens either kind: the host-only dispatcher (``ckspace build DIR --host-only``: kernel table,
support checks, workspace sizes and selection, no kernels) or the kernel library (the same and
``ckspace_run``). Every question goes through the library's own C API
(``ckspace_dispatch.h``), so Python answers what a C++ caller of the same file gets.

Listing reads the ELF dynamic symbol table (:mod:`~ckspace.run.elf`) without loading the file:
loading a HIP library registers its code objects with the HIP runtime, and nothing should touch a
GPU before a kernel runs. The file is loaded on the first question that needs its code.
"""

from __future__ import annotations

import ctypes
import logging
import stat
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from ckspace.core.errors import CkspaceError, InvalidInputError, NoKernelError
from ckspace.core.vocab import Dtype, Variant
from ckspace.emit.dispatcher import API_VERSION, ONE_ARCH_API_VERSION, STATUSES, STRUCT_FIELDS
from ckspace.environment.inputs import file_kind
from ckspace.run.elf import exported_functions
from ckspace.workloads.problem import ConvProblem

log = logging.getLogger(__name__)

STATUS = {status.code: status.text for status in STATUSES}
"""The status codes of ``ckspace_dispatch.h``, as text."""
DEVICE_NAME_BYTES = 256
"""The size of HIP's ``gcnArchName`` (with its NUL): what ``ckspace_device_supported`` may write."""
NO_KERNEL = 1
RUN_PREFIX = "ckspace_run_"
"""The kernels' own C entry points (``ckspace_run_<name>``): how a library's kernels are listed."""


class ConvProblemC(ctypes.Structure):
    """Mirror of ``ckspace_conv_problem`` (``ckspace_dispatch.h``): every field an ``int64_t``."""

    _fields_ = [(name, ctypes.c_int64) for name in STRUCT_FIELDS]

    @classmethod
    def of(cls, problem: ConvProblem, variant: Variant | str, dtype: Dtype | str) -> ConvProblemC:
        values = {name: getattr(problem, name) for name in STRUCT_FIELDS[2:]}
        return cls(variant=Variant.parse(variant).code, dtype=Dtype.parse(dtype).code, **values)


@dataclass(frozen=True)
class Choice:
    """What ``ckspace_select`` answered: the kernel's index and name, and the TFLOPS its cell's
    model predicts (an estimate; the analytical roofline's where the cell has no model)."""

    kernel: int
    name: str
    predicted_tflops: float


class RunError(CkspaceError):
    """``ckspace_run`` returned a status other than ``CKSPACE_OK``; ``status`` is that code."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


_SIGNATURES: dict[str, tuple[object, list[object]]] = {
    "ckspace_api_version": (ctypes.c_int, []),
    "ckspace_arch": (ctypes.c_char_p, []),
    "ckspace_arch_matches": (ctypes.c_int, [ctypes.c_char_p]),
    "ckspace_use_arch": (ctypes.c_int, [ctypes.c_char_p]),
    "ckspace_device_supported": (ctypes.c_int, [ctypes.c_char_p, ctypes.c_size_t]),
    "ckspace_kernel_count": (ctypes.c_int, []),
    "ckspace_kernel_name": (ctypes.c_char_p, [ctypes.c_int]),
    "ckspace_kernel_index": (ctypes.c_int, [ctypes.c_char_p]),
    "ckspace_is_supported": (ctypes.c_int, [ctypes.c_int, ctypes.POINTER(ConvProblemC)]),
    "ckspace_workspace_size": (ctypes.c_int64, [ctypes.c_int, ctypes.POINTER(ConvProblemC)]),
    "ckspace_select": (
        ctypes.c_int,
        [ctypes.POINTER(ConvProblemC), ctypes.POINTER(ctypes.c_int), ctypes.POINTER(ctypes.c_float)],
    ),
    "ckspace_run": (
        ctypes.c_int,
        [
            ctypes.c_int,
            ctypes.POINTER(ConvProblemC),
            ctypes.c_void_p,
            ctypes.c_void_p,
            ctypes.c_void_p,
            ctypes.c_void_p,
            ctypes.c_size_t,
            ctypes.c_void_p,
        ],
    ),
}
"""Each C API function's return and argument types (``ckspace_dispatch.h``)."""


def answer_of(function: str, value: int) -> int:
    """What a C API function that answers a count or a flag returned, or :class:`InvalidInputError`
    naming the status when it returned one (as ``-status``)."""
    if value < 0:
        raise InvalidInputError(f"{function}: {STATUS.get(-value, value)}")
    return value


class KernelLibrary:
    """A library built by ``ckspace build``: its kernels, which can run a problem, how much
    workspace one needs, which to run, and running it."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        try:
            mode = self.path.stat().st_mode
        except FileNotFoundError:
            raise InvalidInputError(f"no kernel library at {self.path}") from None
        except OSError as exc:
            raise InvalidInputError(f"kernel library {str(self.path)!r}: {exc.strerror or exc}") from None
        if not stat.S_ISREG(mode):
            raise InvalidInputError(f"kernel library {str(self.path)!r} is {file_kind(mode)}, not a regular file")
        self._handle: ctypes.CDLL | None = None

    @cached_property
    def _exports(self) -> frozenset[str]:
        return frozenset(exported_functions(self.path))

    @cached_property
    def names(self) -> tuple[str, ...]:
        """The kernels in index order (name order); reading them does not load the library. The
        host-only dispatcher holds no kernel code: its names are its table's."""
        found = sorted(n[len(RUN_PREFIX) :] for n in self._exports if n.startswith(RUN_PREFIX))
        if found or not self.has_dispatcher:
            return tuple(found)
        lib = self._lib
        return tuple(lib.ckspace_kernel_name(i).decode() for i in range(lib.ckspace_kernel_count()))

    @property
    def has_dispatcher(self) -> bool:
        """Whether the tree was emitted ``--with-selector`` (the C API of ``ckspace_dispatch.h``)."""
        return "ckspace_select" in self._exports

    @property
    def has_run(self) -> bool:
        """Whether the library holds the kernels (``ckspace_run``), not just the host part."""
        return "ckspace_run" in self._exports

    @property
    def loaded(self) -> bool:
        return self._handle is not None

    @property
    def _lib(self) -> ctypes.CDLL:
        """The loaded library with the C API's signatures set; refused without a dispatcher or
        when it was generated for another version of the API."""
        if self._handle is not None:
            return self._handle
        if not self.has_dispatcher:
            raise CkspaceError(f"{self.path.name} has no dispatcher: emit its tree with --with-selector and rebuild")
        if "ckspace_api_version" not in self._exports:
            raise CkspaceError(f"{self.path.name} was built by an older ckspace (C API 1); re-emit and rebuild it")
        log.info("loading %s", self.path)
        try:
            handle = ctypes.CDLL(str(self.path.resolve()))
        except OSError as exc:
            raise CkspaceError(f"cannot load {self.path}: {exc}") from None
        for name, (restype, argtypes) in _SIGNATURES.items():
            if name in self._exports:
                function = getattr(handle, name)
                function.restype, function.argtypes = restype, argtypes
        version = handle.ckspace_api_version()
        if version not in (API_VERSION, ONE_ARCH_API_VERSION):  # 5 is 4 and several archs
            raise CkspaceError(
                f"{self.path.name} has C API {version}, this ckspace speaks {API_VERSION}; re-emit and rebuild it"
            )
        self._handle = handle
        return handle

    @property
    def arch(self) -> str:
        """The arch the library's kernels are compiled for (``ckspace_arch``; a library of several
        archs lists them, comma-separated)."""
        return self._lib.ckspace_arch().decode()

    @property
    def archs(self) -> tuple[str, ...]:
        """The archs the library's kernels are compiled for: one, or a library of several's."""
        return tuple(self.arch.split(","))

    def use_arch(self, arch: str) -> None:
        """Make a ``--host-only`` library of several archs answer for ``arch`` (it has no device to
        ask: ``ckspace_use_arch``); a library of one arch answers for its own, and one with kernels
        for its current device's. :class:`InvalidInputError` for an arch the library lacks."""
        if "ckspace_use_arch" not in self._exports:
            if arch not in self.archs:
                raise InvalidInputError(f"{self.path.name} holds kernels for {self.arch}, not {arch}")
            return
        if self.has_run:
            raise CkspaceError(f"{self.path.name} runs kernels: the current device's arch decides, not use_arch")
        if not self._lib.ckspace_use_arch(arch.encode()):
            raise InvalidInputError(f"{self.path.name} holds kernels for {', '.join(self.archs)}, not {arch!r}")

    def runs_on(self, device_arch: str) -> bool:
        """Whether a device of HIP gcnArchName ``device_arch`` (``gfx942:sramecc+:xnack-``) runs the
        library's kernels (``ckspace_arch_matches``: its arch or one of its archs, feature flags aside)."""
        return bool(self._lib.ckspace_arch_matches(device_arch.encode()))

    def device_supported(self) -> tuple[bool, str]:
        """Whether the current HIP device runs the library's kernels, and its gcnArchName
        (``ckspace_device_supported``); :class:`CkspaceError` when HIP reports no device."""
        if not self.has_run:
            raise CkspaceError(f"{self.path.name} holds only the dispatcher's host part: it asks no device")
        name = ctypes.create_string_buffer(DEVICE_NAME_BYTES)
        answer = answer_of("ckspace_device_supported", self._lib.ckspace_device_supported(name, len(name)))
        return bool(answer), name.value.decode(errors="replace")

    def index(self, kernel: int | str) -> int:
        """The index of a kernel given by name (``ckspace_kernel_index``) or by index (checked)."""
        if isinstance(kernel, str):
            found = self._lib.ckspace_kernel_index(kernel.encode())
            if found < 0:
                raise InvalidInputError(f"{self.path.name} has no kernel {kernel!r}")
            return found
        if not 0 <= kernel < len(self.names):
            raise InvalidInputError(f"kernel index {kernel} is out of range: {self.path.name} holds {len(self.names)}")
        return kernel

    def is_supported(self, kernel: int | str, problem: ConvProblem, variant: Variant | str, dtype: Dtype | str) -> bool:
        """``ckspace_is_supported``: whether the kernel can run the problem as it is."""
        problem_c = ConvProblemC.of(problem, variant, dtype)
        return bool(answer_of("ckspace_is_supported", self._lib.ckspace_is_supported(self.index(kernel), problem_c)))

    def workspace_size(
        self, kernel: int | str, problem: ConvProblem, variant: Variant | str, dtype: Dtype | str
    ) -> int:
        """``ckspace_workspace_size``: the device bytes :meth:`run` needs as workspace (0 for most)."""
        problem_c = ConvProblemC.of(problem, variant, dtype)
        return int(answer_of("ckspace_workspace_size", self._lib.ckspace_workspace_size(self.index(kernel), problem_c)))

    def select_raw(self, problem: ConvProblemC) -> tuple[int, int, float]:
        """(status, kernel index, predicted TFLOPS) of ``ckspace_select`` on a prepared struct."""
        kernel, tflops = ctypes.c_int(-2), ctypes.c_float(-2.0)
        status = self._lib.ckspace_select(ctypes.byref(problem), ctypes.byref(kernel), ctypes.byref(tflops))
        return status, kernel.value, tflops.value

    def select(self, problem: ConvProblem, variant: Variant | str, dtype: Dtype | str) -> Choice:
        """The kernel ``ckspace_select`` picks; :class:`~ckspace.core.errors.NoKernelError` (as
        :meth:`Selector.select <ckspace.select.selector.Selector.select>` raises) when no kernel of
        the library can run the problem."""
        status, kernel, tflops = self.select_raw(ConvProblemC.of(problem, variant, dtype))
        if status == NO_KERNEL:
            raise NoKernelError(
                f"no kernel of {self.path.name} (nor a vector-width fallback it holds) can run "
                f"{Variant.parse(variant).value} {Dtype.parse(dtype).value} {problem}",
                {},
            )
        if status != 0:
            raise InvalidInputError(f"ckspace_select: {STATUS.get(status, status)}")
        return Choice(kernel, self.names[kernel], tflops)

    def run_status(
        self,
        kernel: int,
        problem: ConvProblemC,
        a: int,
        b: int,
        c: int,
        workspace: int | None,
        size: int,
        stream: int | None,
    ) -> int:
        """``ckspace_run`` on operand pointers (device memory, or host memory for a stand-in
        library): its status code (0 ok, see :data:`STATUS`), for callers that record failures as
        data. The caller synchronises and times."""
        if not self.has_run:
            raise CkspaceError(
                f"{self.path.name} holds only the dispatcher's host part (no ckspace_run): "
                "build the tree without --host-only"
            )
        return self._lib.ckspace_run(kernel, ctypes.byref(problem), a, b, c, workspace, size, stream)

    def run(
        self,
        kernel: int | str,
        problem: ConvProblem,
        variant: Variant | str,
        dtype: Dtype | str,
        operands: tuple[int, int, int],
        workspace: tuple[int | None, int] = (None, 0),
        stream: int | None = None,
    ) -> None:
        """Run the kernel on the implicit GEMM's ``operands`` (a, b, c pointers; see
        ``ckspace_run`` for which tensor each is per variant) with the caller's ``workspace``
        (pointer, bytes: at least :meth:`workspace_size`); :class:`RunError` with the status when
        ``ckspace_run`` refuses or fails."""
        index = self.index(kernel)
        a, b, c = operands
        status = self.run_status(index, ConvProblemC.of(problem, variant, dtype), a, b, c, *workspace, stream)
        if status != 0:
            raise RunError(f"ckspace_run {self.names[index]}: {STATUS.get(status, status)}", status)
