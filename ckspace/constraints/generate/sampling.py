"""The deterministic subsets of ``full``: ``full-tests`` and ``tiny`` (upstream
``grouped_conv/grouped_config_rules_full_tests.py`` ``get_configs`` and ``get_tiny_configs``).

Both select from the emission order of one ``full`` call over the whole request, so the result for a
cell depends on the other cells requested, exactly as upstream; the request's parts are in their
canonical order (:class:`~ckspace.core.cells.Request`), so it never depends on the order they were
named in, as upstream's does.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from ckspace.core.cells import Cell, CellProposals, CellResult, Request
from ckspace.core.fields import FIELD_INDEX, Row
from ckspace.core.tables import table

_I = FIELD_INDEX


@dataclass(frozen=True)
class Entry:
    """One config of the emission list: its cell, whether it is depthwise, its row, and its
    full-tests category as (tag, dtype tag)."""

    cell: Cell
    depthwise: bool
    row: Row
    category: tuple[str, str]


def _entry(cell: Cell, depthwise: bool, row: Row) -> Entry:
    return Entry(cell, depthwise, row, category(cell, depthwise, row))


def emission_list(request: Request, per_cell: Mapping[Cell, CellResult]) -> list[Entry]:
    """Upstream's output order for a multi-cell call: variant, ndim, dtype; forward's depthwise
    block after all forward cells, parameter set by parameter set, dtype by dtype."""
    out: list[Entry] = []
    for variant in request.variants:
        cells = [c for c in request.cells if c.variant is variant]
        for cell in cells:
            out += [_entry(cell, False, row) for row in per_cell[cell].gemm]
        blocks = [(c, per_cell[c].depthwise) for c in cells if per_cell[c].depthwise]
        count = max((len(rows) for _, rows in blocks), default=0)
        for i in range(count):
            out += [_entry(c, True, rows[i]) for c, rows in blocks if i < len(rows)]
    return out


def category(cell: Cell, depthwise: bool, row: Row) -> tuple[str, str]:
    """The first matching tag of ``sampling.json``'s category order, and the dtype tag
    (``untagged_dtype`` when untagged)."""
    if depthwise:
        tag = "depthwise"
    elif row[_I["streamk_enabled"]]:
        tag = "streamk"
    elif row[_I["split_image"]]:
        tag = "split_image"
    elif row[_I["num_groups_to_merge"]] > 1:
        tag = "merged_groups"
    elif row[_I["two_stage"]]:
        tag = "two_stage"
    elif row[_I["explicit_gemm"]]:
        tag = "explicit_gemm"
    else:
        tag = "regular"
    untagged = table("sampling")["full_tests"]["untagged_dtype"]
    return tag, cell.dtype.value if depthwise or row[_I["tagged"]] else untagged


def _groups(entries: Iterable[tuple[int, Entry]], key) -> dict[object, list[int]]:
    groups: dict[object, list[int]] = {}
    for index, entry in entries:
        groups.setdefault(key(entry), []).append(index)
    return groups


def full_tests_select(entries: list[Entry]) -> list[Entry]:
    """Stride pick per category, then (pipeline, scheduler) coverage per (variant, dtype tag)."""
    params = table("sampling")["full_tests"]
    assert params["coverage_key"] == ["variant", "dtype"] and params["coverage_combo"] == ["pipeline", "scheduler"]
    stride, minimum = params["stride"], params["min_per_category"]
    chosen: set[int] = set()
    for members in _groups(enumerate(entries), lambda e: e.category).values():
        picks = members[stride - 1 :: stride]
        chosen.update(picks if len(members) >= stride else members[:minimum])

    def cover(e: Entry) -> tuple:
        """(variant, dtype tag) and (pipeline, scheduler): the coverage key and combo."""
        return (e.cell.variant, e.category[1], e.row[_I["pipeline"]], e.row[_I["scheduler"]])

    gemm = [(i, e) for i, e in enumerate(entries) if not e.depthwise]
    covered = {cover(e) for i, e in gemm if i in chosen}
    first: dict[tuple, int] = {}
    for i, e in gemm:
        first.setdefault(cover(e), i)
    chosen.update(i for key, i in first.items() if key not in covered)
    return [entries[i] for i in sorted(chosen)]


def tiny_select(entries: list[Entry]) -> list[Entry]:
    """First of each (category, ndim) group, then round-robin until min_count (selection order)."""
    minimum = table("sampling")["tiny"]["min_count"]
    groups = list(_groups(enumerate(entries), lambda e: (e.category, e.cell.ndim)).values())
    order = [members[0] for members in groups]
    depth = 1
    while len(order) < minimum:
        added = False
        for members in groups:
            if depth < len(members):
                order.append(members[depth])
                added = True
                if len(order) >= minimum:
                    break
        if not added:
            break
        depth += 1
    return [entries[i] for i in order]


def split(request: Request, entries: list[Entry]) -> dict[Cell, CellProposals]:
    """Per-cell proposals from a selected entry list (order kept); they passed full's checks."""
    out = {cell: CellProposals() for cell in request.cells}
    for e in entries:
        (out[e.cell].depthwise if e.depthwise else out[e.cell].candidates).append(e.row)
    return out
