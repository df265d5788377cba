"""The order a request's variants, ndims and dtypes are named in does not change the answer.

Upstream's sampling rule sets (full-tests, tiny) select from the emission order of the whole call,
which follows the order its caller gives; ckspace always asks in one canonical order (upstream's CLI
default, that of the oracle's combined calls), so every order names the same kernels.
"""

from __future__ import annotations

from itertools import permutations

import pytest
from conftest import ORACLE_REVISION, oracle_lines

from ckspace.cli import main

CANONICAL = {
    "--variant": ("forward", "bwd_data", "bwd_weight"),
    "--ndim": ("1", "2", "3"),
    "--dtype": ("fp16", "bf16", "fp32"),
}
ONE_CELL_COLUMN = {"--variant": ("forward",), "--ndim": ("1",)}
"""A request whose dtype order changes upstream's tiny subset: over every cell, tiny's groups are
more than its ten picks and each gives its first, in any order; here they are fewer and the
round-robin fill stops at ten, at a place that depends on the order."""


def _listing(rule_set: str, parts: dict[str, tuple[str, ...]], capsys: pytest.CaptureFixture[str]) -> list[str]:
    """``enumerate --list`` of the rule space of gfx950 under the oracle's rules revision."""
    args = ["enumerate", "--arch", "gfx950", "--rule-set", rule_set, "--rules-only", "--list"]
    args += ["--rules-revision", ORACLE_REVISION]
    assert main(args + [word for name, values in parts.items() for word in (name, *values)]) == 0
    return capsys.readouterr().out.splitlines()


@pytest.mark.parametrize(
    "rule_set, option, others",
    [
        ("tiny", "--variant", {}),
        ("tiny", "--ndim", {}),
        ("tiny", "--dtype", ONE_CELL_COLUMN),
        ("full-tests", "--variant", {}),
        ("full-tests", "--ndim", {}),
    ],
)
def test_issue_36_item_18_every_order_lists_the_same_kernels(
    rule_set: str, option: str, others: dict[str, tuple[str, ...]], capsys: pytest.CaptureFixture[str]
) -> None:
    """`enumerate --rule-set tiny --rules-only` listed 32 kernels for one order
    of --variant and 27 for another (other kernels for other --ndim orders, and for --dtype orders
    in a narrower request). Every permutation of the option now lists the kernels of the canonical
    order, which over every cell are those of upstream's combined call in the oracle. (full-tests'
    categories each hold one dtype, so no dtype order changes its subsets, upstream's either.)"""
    parts = {**CANONICAL, **others}
    canonical = _listing(rule_set, parts, capsys)
    for order in permutations(CANONICAL[option]):
        assert _listing(rule_set, {**parts, option: order}, capsys) == canonical, f"{option} {' '.join(order)}"
    if not others:
        lines = oracle_lines(f"{rule_set}__combined")
        assert canonical == sorted(name for line in lines if line["arch"] == "gfx950" for name in line["names"])


def test_issue_36_item_18_enumerate_help_says_the_order_does_not_matter(capsys: pytest.CaptureFixture[str]) -> None:
    """--help says that upstream samples in the order it is given and that ckspace asks in one
    order, naming it."""
    with pytest.raises(SystemExit):
        main(["enumerate", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "The order of the --variant, --ndim and --dtype values does not matter" in text
    assert "(forward, bwd_data, bwd_weight; 1, 2, 3; fp16, bf16, fp32)" in text
