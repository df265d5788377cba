"""Walking enumerated cells as kernels: the shared core of ``Space`` and ``ckspace enumerate``.

Pure Python over cached rows, so listing names or fields from the cache stays fast.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

from ckspace.cache import enumerate_cells
from ckspace.constraints.request import Cell, Request
from ckspace.space.fields import DEPTHWISE_FIELDS, GEMM_FIELD_NAMES, Row, decode, plain
from ckspace.space.naming import depthwise_name, gemm_name

if TYPE_CHECKING:
    from ckspace.constraints.rules import Rule


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
                  else {f: plain(decode(f, v)) for f, v in zip(fields, self.row)})
        return {
            "name": self.name, "arch": self.arch, "variant": self.cell.variant.value,
            "ndim": self.cell.ndim, "dtype": self.cell.dtype.value,
            "kind": "depthwise" if self.depthwise else "gemm", **values, "valid": self.valid,
        }


def filter_mask(rules: Sequence["Rule"], rows: list[Row], fields: Sequence[str]) -> list[bool]:
    """Which rows satisfy every rule. A rule naming a field the rows lack (a GEMM field for a
    depthwise config, say) excludes them all."""
    if not rules or not rows:
        return [True] * len(rows)
    if any(not set(rule.fields) <= set(fields) for rule in rules):
        return [False] * len(rows)
    from ckspace.constraints.classify import columns, rule_masks  # deferred: numpy only with filters

    ok = [True] * len(rows)
    for mask in rule_masks(rules, columns(rows, fields), len(rows)).values():
        ok = [a and bool(b) for a, b in zip(ok, mask)]
    return ok


CellFilters = Callable[[Cell], tuple[Sequence["Rule"], Sequence["Rule"]]]


def iter_kernels(requests: Iterable[Request], *, raw: bool = False, use_cache: bool = True,
                 filters: Sequence["Rule"] | CellFilters = ()) -> Iterator[Kernel]:
    """Kernels of every request in request, cell and rule-set order; only valid ones unless
    ``raw``; only those satisfying every filter rule (``--where``; a callable gives per cell the
    rules for GEMM and for depthwise configs, e.g. a problem's checks). A kernel that several
    requests produce (rule-set lists) is yielded once."""
    rules_for: CellFilters = filters if callable(filters) else (lambda cell: (filters, filters))
    requests = list(requests)
    seen: set[tuple] | None = set() if len(requests) > 1 else None
    for request in requests:
        for cell, result in enumerate_cells(request, use_cache).items():
            gemm_rules, depthwise_rules = rules_for(cell)
            keep_gemm = filter_mask(gemm_rules, result.gemm, GEMM_FIELD_NAMES)
            keep_dw = filter_mask(depthwise_rules, result.depthwise, DEPTHWISE_FIELDS)
            rows = [(False, r, ok) for r, ok, keep in zip(result.gemm, result.gemm_valid, keep_gemm) if keep]
            rows += [(True, r, ok) for r, ok, keep in zip(result.depthwise, result.depthwise_valid, keep_dw)
                     if keep]
            for depthwise, row, ok in rows:
                if not (ok or raw):
                    continue
                kernel = Kernel(request.arch, cell, depthwise, row, ok)
                if seen is not None:
                    if kernel.identity in seen:
                        continue
                    seen.add(kernel.identity)
                yield kernel
