"""Loading a built kernel library through ctypes, lazily.

Listing reads the ELF dynamic symbol table of the file (the ``ckspace_run_<name>`` entry points
the compilation units export) without loading it: loading a HIP library registers its code objects
with the HIP runtime, and nothing should touch a GPU before a kernel actually runs. The library is
opened on the first :meth:`KernelLibrary.run` / :meth:`KernelLibrary.supports`.
"""

from __future__ import annotations

import ctypes
import logging
import struct
from collections.abc import Sequence
from functools import cached_property
from pathlib import Path

from ckspace.core.errors import CkspaceError
from ckspace.core.inputs import read_input
from ckspace.core.problem import ConvProblem

log = logging.getLogger(__name__)

RUN_PREFIX = "ckspace_run_"
SUPPORTS_PREFIX = "ckspace_supports_"
_SHT_DYNSYM = 11
_STB_GLOBAL = 1
_STT_FUNC = 2


class ProblemArgs(ctypes.Structure):
    """Mirror of ``ckspace_kernel_args`` in the emitted ``ckspace_registry.hpp``: the C form of a
    :class:`~ckspace.core.problem.ConvProblem` (spatial arrays outermost first, unused slots 0)."""

    _fields_ = [
        ("ndim", ctypes.c_int32),
        ("G", ctypes.c_int64),
        ("N", ctypes.c_int64),
        ("K", ctypes.c_int64),
        ("C", ctypes.c_int64),
        *((f, ctypes.c_int64 * 3) for f in ("filter", "input", "stride", "dilation", "left_pad", "right_pad")),
    ]

    @classmethod
    def from_problem(cls, problem: ConvProblem) -> ProblemArgs:
        """The C arguments of ``problem`` (total channels, symmetric pads)."""
        dims = problem.dims

        def triple(values: Sequence[int]) -> ctypes.Array:
            return (ctypes.c_int64 * 3)(*values, *[0] * (3 - len(values)))

        pads = [getattr(problem, f"pad_{d}") for d in dims]
        return cls(
            problem.ndim,
            problem.G,
            problem.N,
            problem.K,
            problem.C,
            triple([problem.filter_size(d) for d in dims]),
            triple([problem.input_size(d) for d in dims]),
            triple([getattr(problem, f"stride_{d}") for d in dims]),
            triple([getattr(problem, f"dil_{d}") for d in dims]),
            triple(pads),
            triple(pads),
        )


def exported_functions(path: Path) -> list[str]:
    """Names of the defined global functions in the dynamic symbol table of an ELF64 LE file; a
    file that is not one (truncated, or another file under the library's name) is one line."""
    data = read_input(path, "kernel library")
    try:
        return _exported_functions(data)
    except (struct.error, IndexError, ValueError):
        raise CkspaceError(
            f"kernel library {str(path)!r} is not a whole 64-bit little-endian ELF shared "
            "object; rebuild it with ckspace build"
        ) from None


def _exported_functions(data: bytes) -> list[str]:
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        raise ValueError("not an ELF64 LE file")
    (shoff,) = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", data, 0x3A)
    sections = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]
    names: list[str] = []
    for _, kind, _, _, offset, size, link, _, _, entsize in sections:
        if kind != _SHT_DYNSYM:
            continue
        str_offset = sections[link][4]
        for pos in range(offset, offset + size, entsize or 24):
            name_at, info, _, shndx, _, _ = struct.unpack_from("<IBBHQQ", data, pos)
            if shndx != 0 and info >> 4 == _STB_GLOBAL and info & 0xF == _STT_FUNC:
                end = data.index(b"\0", str_offset + name_at)
                names.append(data[str_offset + name_at : end].decode())
    return names


class KernelLibrary:
    """A library built by ``ckspace build``: list its kernels, check and run them."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        if not self.path.is_file():
            raise CkspaceError(f"no kernel library at {self.path}")
        self._handle: ctypes.CDLL | None = None

    @cached_property
    def kernels(self) -> tuple[str, ...]:
        """Kernel names, sorted; reading them does not load the library."""
        return tuple(sorted(n[len(RUN_PREFIX) :] for n in exported_functions(self.path) if n.startswith(RUN_PREFIX)))

    @property
    def loaded(self) -> bool:
        return self._handle is not None

    def _function(self, prefix: str, name: str) -> ctypes._CFuncPtr:  # type: ignore[name-defined]
        if name not in self.kernels:
            raise CkspaceError(f"{self.path.name} has no kernel {name!r}")
        if self._handle is None:
            log.info("loading %s", self.path)
            self._handle = ctypes.CDLL(str(self.path))
        return getattr(self._handle, prefix + name)

    def supports(self, name: str, problem: ProblemArgs, k_batch: int = 1) -> bool:
        """Host-side check that kernel ``name`` can run ``problem`` (loads the library)."""
        function = self._function(SUPPORTS_PREFIX, name)
        function.restype = ctypes.c_int
        function.argtypes = [ctypes.POINTER(ProblemArgs), ctypes.c_int]
        return bool(function(ctypes.byref(problem), k_batch))

    def run(
        self,
        name: str,
        problem: ProblemArgs,
        inp: int,
        wei: int,
        out: int,
        *,
        k_batch: int = 1,
        stream: int | None = None,
    ) -> float:
        """Launch kernel ``name`` on device pointers; returns the kernel's time (ms) or raises."""
        function = self._function(RUN_PREFIX, name)
        function.restype = ctypes.c_float
        function.argtypes = [
            ctypes.POINTER(ProblemArgs),
            ctypes.c_void_p,
            ctypes.c_void_p,
            ctypes.c_void_p,
            ctypes.c_int,
            ctypes.c_void_p,
        ]
        time = function(ctypes.byref(problem), inp, wei, out, k_batch, stream)
        if time < 0:
            raise CkspaceError(f"{name} failed to run (see stderr)")
        return float(time)
