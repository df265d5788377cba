"""The archs without oracle fixtures: their headline totals (raw and valid counts per rule set,
:data:`HEADLINE`), and name-for-name agreement with the independent nested-loop enumerator
(tests/nested_loop.py) on every arch of the table, both under the rules revision the oracle fixtures
pin (``conftest.ORACLE_REVISION``)."""

from __future__ import annotations

import pytest
from conftest import ORACLE_REVISION, load_nested_loop

from ckspace.constraints.enumeration.enumerator import enumerate_cells
from ckspace.core.cells import Request
from ckspace.core.vocab import arch_names
from ckspace.space.space import Space

# raw/valid totals over ndim {1,2,3} x {fp16, bf16, fp32}, one call per cell.
HEADLINE = {
    "default": {
        "gfx90a": (558, 417),
        "gfx942": (558, 417),
        "gfx950": (684, 501),
        "gfx1201": (0, 0),
        "gfx1250": (432, 252),
    },
    "full": {
        "gfx90a": (16297, 6813),
        "gfx942": (15657, 7849),
        "gfx950": (15657, 7849),
        "gfx1201": (7632, 60),
        "gfx1250": (18724, 9500),
    },
    "full-tests": {
        "gfx90a": (3237, 1371),
        "gfx942": (3114, 1565),
        "gfx950": (3114, 1565),
        "gfx1201": (1500, 12),
        "gfx1250": (3728, 1904),
    },
    "tiny": {
        "gfx90a": (240, 122),
        "gfx942": (239, 129),
        "gfx950": (239, 129),
        "gfx1201": (164, 8),
        "gfx1250": (164, 58),
    },
}


@pytest.mark.parametrize("rule_set,arch", [(rs, a) for rs, archs in HEADLINE.items() for a in archs])
def test_headline_totals(rule_set: str, arch: str) -> None:
    request = Request.build(arch, rule_set)
    raw = valid = 0
    for cell in request.cells:
        result = enumerate_cells(
            Request.build(arch, rule_set, [cell.variant], [cell.ndim], [cell.dtype], ORACLE_REVISION), use_cache=False
        )[cell]
        raw += result.count_raw
        valid += result.count_valid
    assert (raw, valid) == HEADLINE[rule_set][arch]


@pytest.fixture(scope="module")
def nested_loop():
    return load_nested_loop()


@pytest.mark.parametrize("arch", arch_names())
@pytest.mark.parametrize("rule_set", ["default", "full", "full-tests", "tiny"])
@pytest.mark.slow
def test_agrees_with_nested_loop(nested_loop, arch: str, rule_set: str) -> None:
    request = Request.build(arch, rule_set)
    expected = nested_loop.enumerate_request(
        arch, rule_set, [v.value for v in request.variants], list(request.ndims), [d.value for d in request.dtypes]
    )
    ours: dict[tuple, tuple[set, set]] = {
        (c.variant.value, c.ndim, c.dtype.value): (set(), set()) for c in request.cells
    }
    for kernel in Space(
        request.arch, rule_set=request.rule_set, use_cache=False, rules_revision=ORACLE_REVISION, ck=None
    ).kernels(raw=True):
        raw, valid = ours[(kernel.cell.variant.value, kernel.cell.ndim, kernel.cell.dtype.value)]
        raw.add(kernel.name)
        if kernel.valid:
            valid.add(kernel.name)
    for key, (raw_names, valid_names) in expected.items():
        assert ours[key] == (set(raw_names), set(valid_names)), key
