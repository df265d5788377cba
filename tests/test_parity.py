"""Parity with the upstream generator: every oracle cell, valid AND rejected names, under the rules
revision the oracle was produced with."""

from __future__ import annotations

import pytest
from conftest import ORACLE_REVISION, oracle_lines

from ckspace.constraints.enumeration.enumerator import enumerate_cells
from ckspace.core.cells import Cell, Request
from ckspace.core.vocab import Dtype, Variant
from ckspace.space.listing import Kernel

FILES = ["default", "full", "full-tests", "tiny", "full-tests__combined", "tiny__combined"]


def _names(arch: str, cell: Cell, result) -> tuple[set[str], set[str]]:
    valid, rejected = set(), set()
    pairs = [(False, r, ok) for r, ok in zip(result.gemm, result.gemm_valid, strict=True)]
    pairs += [(True, r, ok) for r, ok in zip(result.depthwise, result.depthwise_valid, strict=True)]
    for depthwise, row, ok in pairs:
        (valid if ok else rejected).add(Kernel(arch, cell, depthwise, row, ok).name)
    return valid, rejected


@pytest.mark.parametrize("fixture", FILES)
def test_oracle_parity(fixture: str) -> None:
    rule_set, _, combined = fixture.partition("__")
    per_arch: dict[str, dict] = {}
    mismatches = []
    for line in oracle_lines(fixture):
        cell = Cell(Variant(line["variant"]), line["ndim"], Dtype(line["dtype"]))
        if combined:
            if line["arch"] not in per_arch:  # one call per arch for all cells, as upstream
                per_arch[line["arch"]] = enumerate_cells(
                    Request.build(line["arch"], rule_set, rules_revision=ORACLE_REVISION), use_cache=False
                )
            result = per_arch[line["arch"]][cell]
        else:
            request = Request.build(line["arch"], rule_set, [cell.variant], [cell.ndim], [cell.dtype], ORACLE_REVISION)
            result = enumerate_cells(request, use_cache=False)[cell]
        valid, rejected = _names(line["arch"], cell, result)
        if valid != set(line["names"]) or rejected != set(line["names_rejected"]):
            mismatches.append(
                f"{line['arch']} {cell.label()}: valid {len(valid)} vs {len(line['names'])}, "
                f"rejected {len(rejected)} vs {len(line['names_rejected'])}"
            )
        assert result.count_raw == line["count_raw"]
    assert not mismatches, "\n".join(mismatches)
