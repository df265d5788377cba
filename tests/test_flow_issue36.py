"""Issue 36, items 4, 5, 6 and 21 (part): the emit/build/select/plan flow.

Item 5: a direction the chosen rule set holds no kernel of (``full`` has no bwd_data: quirk 14.1)
is one line naming the rule sets that hold some, exit 2, alike in select, plan and emit.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import fake_ck

from ckspace.cli import main
from ckspace.space.rule_set_choice import refuse_rule_set_without_kernels, rule_sets_holding
from ckspace.space.space import Space

BWD_DATA_PROBLEM = "N=2,G=1,C=64,K=64,Hi=14,Wi=14,Y=3,X=3,pad=1"


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    status = main(list(argv))
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def one_line_naming_default(err: str) -> None:
    """The refusal: one line on stderr naming the rule set asked, the rule sets that hold bwd_data
    kernels and what to pass."""
    assert err.count("\n") == 1, err
    assert "rule set full holds no bwd_data GEMM kernel" in err
    assert "rule sets that do: default" in err and "--rule-set default" in err


def test_issue_36_item_5_the_holders_are_computed_from_the_rule_sets() -> None:
    """issue 36 item 5: ``full`` holds no gfx950 bwd_data kernel, ``default`` does, and the list
    says so for the same request; forward, which ``full`` holds, is not refused."""
    space = Space("gfx950", "bwd_data", 2, "bf16", "full", ck=None)
    holders = rule_sets_holding(space, space.requests[0])
    assert "default" in holders and "full" not in holders
    with pytest.raises(ValueError, match="rule sets that do: default"):
        refuse_rule_set_without_kernels(space)
    refuse_rule_set_without_kernels(Space("gfx950", "forward", 2, "bf16", "full", ck=None))


def test_issue_36_item_5_a_filter_that_empties_the_space_is_not_a_wrong_rule_set() -> None:
    """issue 36 item 5: ``default`` holds bwd_data kernels; a --where that leaves none is a negative
    answer (the caller's), not a refusal naming other rule sets."""
    space = Space("gfx950", "bwd_data", 2, "bf16", "default", where="tile_m == 7", ck=None)
    assert space.count() == 0
    refuse_rule_set_without_kernels(space)


def test_issue_36_item_5_select_names_the_rule_sets_that_hold_the_direction(capsys: pytest.CaptureFixture[str]) -> None:
    """issue 36 item 5: select --variant bwd_data with the default rule set: one line, exit 2, no
    model warning first; with --rule-set default it answers."""
    base = ["select", "--arch", "gfx950", "--variant", "bwd_data", "--dtype", "bf16", "--rules-only"]
    status, out, err = run(capsys, *base, "--problem", BWD_DATA_PROBLEM)
    assert status == 2 and out == ""
    one_line_naming_default(err)
    status, out, _ = run(capsys, *base, "--problem", BWD_DATA_PROBLEM, "--rule-set", "default")
    assert status == 0 and "candidates can run the problem" in out


def test_issue_36_item_5_plan_names_the_rule_sets_that_hold_the_direction(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """issue 36 item 5: plan --variant bwd_data with the default rule set: the same line, exit 2."""
    base = ["plan", "--arch", "gfx950", "--variant", "bwd_data", "--dtype", "bf16", "--rules-only"]
    status, out, err = run(capsys, *base, "--problems", "validation-bwd-data", "--budget", "2")
    assert status == 2 and out == ""
    one_line_naming_default(err)


def test_issue_36_item_5_emit_names_the_rule_sets_that_hold_the_direction(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """issue 36 item 5: emit --variant bwd_data with the default rule set: the same line, exit 2
    (it exited 1 as if the question had a negative answer), and nothing written."""
    ck = fake_ck(tmp_path / "ck", explicit_gemm=False)
    out_dir = tmp_path / "tree"
    argv = ["emit", "--arch", "gfx950", "--variant", "bwd_data", "--ndim", "2", "--dtype", "bf16"]
    status, out, err = run(capsys, *argv, "--ck-root", str(ck), "--out", str(out_dir))
    assert status == 2 and out == ""
    one_line_naming_default(err)
    assert not out_dir.exists()
