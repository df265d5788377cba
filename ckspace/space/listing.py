"""Walking enumerated cells as kernels: the shared core of ``Space`` and ``ckspace enumerate``.

Pure Python over cached rows, so listing names or fields from the cache stays fast.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any, NamedTuple

from ckspace.cache import enumerate_cells
from ckspace.constraints.request import Cell, Request
from ckspace.space.fields import DEPTHWISE_FIELDS, GEMM_FIELD_NAMES, Row, decode
from ckspace.space.naming import depthwise_name, gemm_name


class Kernel(NamedTuple):
    """One enumerated kernel: where it lives, its row, and whether the generator emits it."""

    arch: str
    cell: Cell
    depthwise: bool
    row: Row
    valid: bool

    @property
    def identity(self) -> tuple:
        return (self.arch, self.cell, self.depthwise, self.row)

    @property
    def name(self) -> str:
        if self.depthwise:
            return depthwise_name(self.cell.dtype, self.cell.ndim, self.row)
        return gemm_name(self.cell.variant, self.cell.dtype, self.cell.ndim, self.row)

    def record(self) -> dict[str, Any]:
        """Every field, JSON-friendly, in a fixed order: name, cell, kind, fields, validity."""
        fields = DEPTHWISE_FIELDS if self.depthwise else GEMM_FIELD_NAMES
        values = ({**dict(zip(fields, self.row)), "layout": "ngchw"} if self.depthwise
                  else {f: _plain(decode(f, v)) for f, v in zip(fields, self.row)})
        return {
            "name": self.name, "arch": self.arch, "variant": self.cell.variant.value,
            "ndim": self.cell.ndim, "dtype": self.cell.dtype.value,
            "kind": "depthwise" if self.depthwise else "gemm", **values, "valid": self.valid,
        }


def _plain(value: object) -> object:
    return value.value if hasattr(value, "value") else value


def iter_kernels(requests: Iterable[Request], *, raw: bool = False, use_cache: bool = True) -> Iterator[Kernel]:
    """Kernels of every request in request, cell and rule-set order; only valid ones unless
    ``raw``. A kernel that several requests produce (rule-set lists) is yielded once."""
    requests = list(requests)
    seen: set[tuple] | None = set() if len(requests) > 1 else None
    for request in requests:
        for cell, result in enumerate_cells(request, use_cache).items():
            rows = [(False, r, ok) for r, ok in zip(result.gemm, result.gemm_valid)]
            rows += [(True, r, ok) for r, ok in zip(result.depthwise, result.depthwise_valid)]
            for depthwise, row, ok in rows:
                if not (ok or raw):
                    continue
                kernel = Kernel(request.arch, cell, depthwise, row, ok)
                if seen is not None:
                    if kernel.identity in seen:
                        continue
                    seen.add(kernel.identity)
                yield kernel
