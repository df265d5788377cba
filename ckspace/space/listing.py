"""Walking enumerated cells as kernels: the listing behind every ``Space``.

Pure Python over cached rows, so listing names or fields from the cache stays fast; numpy is
loaded only when extra rules (filters, a problem's checks, a CK revision) must be evaluated.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from itertools import repeat
from typing import TYPE_CHECKING, Any, NamedTuple

from ckspace.constraints.enumeration.enumerator import enumerate_cells
from ckspace.core.cells import Cell, CellResult, Request
from ckspace.core.fields import DEPTHWISE_FIELDS, DEPTHWISE_LAYOUT, GEMM_FIELD_NAMES, Row, decode, plain
from ckspace.core.kernel_key import KernelKey
from ckspace.core.naming import depthwise_name, gemm_name

if TYPE_CHECKING:
    from ckspace.constraints.language.rule import Rule
    from ckspace.core.config import KernelConfig
    from ckspace.environment.target import Target


class Kernel(NamedTuple):
    """One enumerated kernel: where it lives, its row, and whether the generator emits it."""

    arch: str
    cell: Cell
    depthwise: bool
    row: Row
    valid: bool

    def __repr__(self) -> str:
        return f"Kernel({self.name!r}, arch={self.arch!r}{'' if self.valid else ', valid=False'})"

    @property
    def kernel_key(self) -> KernelKey:
        """Which kernel this is: its config's :meth:`~ckspace.core.config.GemmConfig.kernel_key`,
        built from the record (no config, no pydantic)."""
        return KernelKey(self.arch, self.cell, self.depthwise, self.row)

    @property
    def name(self) -> str:
        if self.depthwise:
            return depthwise_name(self.cell.dtype, self.cell.ndim, self.row)
        return gemm_name(self.cell.variant, self.cell.dtype, self.cell.ndim, self.row)

    def config(self) -> KernelConfig:
        """The pydantic config of this kernel (built without validation: rows are trusted)."""
        from ckspace.core.config import DepthwiseConfig, GemmConfig

        if self.depthwise:
            return DepthwiseConfig.from_row(self.arch, self.cell.dtype, self.row)
        return GemmConfig.from_row(self.arch, self.cell.variant, self.cell.ndim, self.cell.dtype, self.row)

    def record(self) -> dict[str, Any]:
        """Every field, JSON-friendly, in a fixed order: name, cell, kind, fields, validity."""
        fields = DEPTHWISE_FIELDS if self.depthwise else GEMM_FIELD_NAMES
        values = (
            {**dict(zip(fields, self.row, strict=True)), "layout": DEPTHWISE_LAYOUT.value}
            if self.depthwise
            else {f: plain(decode(f, v)) for f, v in zip(fields, self.row, strict=True)}
        )
        return {
            "name": self.name,
            "arch": self.arch,
            "variant": self.cell.variant.value,
            "ndim": self.cell.ndim,
            "dtype": self.cell.dtype.value,
            "kind": "depthwise" if self.depthwise else "gemm",
            **values,
            "valid": self.valid,
        }


CellFilters = Callable[[Request, Cell], tuple[Sequence["Rule"], Sequence["Rule"]]]
"""Per (request, cell): the extra rules GEMM and depthwise configs must satisfy."""


def list_kernels(
    requests: Iterable[Request],
    *,
    raw: bool = False,
    use_cache: bool = True,
    target: Target | None = None,
    filters: CellFilters | None = None,
    memo: dict[Request, dict[Cell, CellResult]] | None = None,
) -> list[Kernel]:
    """Kernels of every request in request, cell and rule-set order; only valid ones unless
    ``raw``; only those of ``target`` (through the cell cache; None: the rule space); only those
    satisfying the extra rules ``filters`` gives per cell. A kernel that several requests produce
    (rule-set lists) is listed once. ``memo``: the rule space's cells already enumerated
    (:func:`~ckspace.constraints.enumeration.enumerator.enumerate_cells`)."""
    requests = list(requests)
    out: list[Kernel] = []
    for request in requests:
        arch = request.arch
        for cell, result in enumerate_cells(request, use_cache, target, memo).items():
            keep_gemm = keep_dw = None
            if filters is not None:
                from ckspace.constraints.evaluators.classify import satisfies_all  # deferred: numpy only with filters

                gemm_rules, depthwise_rules = filters(request, cell)
                keep_gemm = satisfies_all(gemm_rules, result.gemm, GEMM_FIELD_NAMES)
                keep_dw = satisfies_all(depthwise_rules, result.depthwise, DEPTHWISE_FIELDS)
            for depthwise, rows, valid, keep in (
                (False, result.gemm, result.gemm_valid, keep_gemm),
                (True, result.depthwise, result.depthwise_valid, keep_dw),
            ):
                out += [
                    Kernel(arch, cell, depthwise, row, ok)
                    for row, ok, kept in zip(rows, valid, keep if keep is not None else repeat(True), strict=False)
                    if (ok or raw) and kept
                ]
    if len(requests) > 1:  # first occurrence wins, in listing order
        seen: set[KernelKey] = set()
        out = [k for k in out if not (k.kernel_key in seen or seen.add(k.kernel_key))]  # type: ignore[func-returns-value]
    return out
