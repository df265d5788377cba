"""The emit/build/select/plan flow's refusals and defaults: a direction the chosen rule set holds no
kernel of (``full`` has no bwd_data: quirk 14.1) is one line naming the rule sets that hold some,
exit 2, alike in select, plan and emit (``space.rule_set_choice``); a plan or a tree of another arch
is refused before any work; ``emit --kernels`` needs no variant and writes the dispatcher.
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
    """``full`` holds no gfx950 bwd_data kernel, ``default`` does, and the list
    says so for the same request; forward, which ``full`` holds, is not refused."""
    space = Space("gfx950", "bwd_data", 2, "bf16", "full", ck=None)
    holders = rule_sets_holding(space, space.requests[0])
    assert "default" in holders and "full" not in holders
    with pytest.raises(ValueError, match="rule sets that do: default"):
        refuse_rule_set_without_kernels(space)
    refuse_rule_set_without_kernels(Space("gfx950", "forward", 2, "bf16", "full", ck=None))


def test_issue_36_item_5_a_filter_that_empties_the_space_is_not_a_wrong_rule_set() -> None:
    """``default`` holds bwd_data kernels; a --where that leaves none is a negative
    answer (the caller's), not a refusal naming other rule sets."""
    space = Space("gfx950", "bwd_data", 2, "bf16", "default", where="tile_m == 7", ck=None)
    assert space.count() == 0
    refuse_rule_set_without_kernels(space)


def test_issue_36_item_5_select_names_the_rule_sets_that_hold_the_direction(capsys: pytest.CaptureFixture[str]) -> None:
    """Select --variant bwd_data with the default rule set: one line, exit 2, no
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
    """Plan --variant bwd_data with the default rule set: the same line, exit 2."""
    base = ["plan", "--arch", "gfx950", "--variant", "bwd_data", "--dtype", "bf16", "--rules-only"]
    status, out, err = run(capsys, *base, "--problems", "validation-bwd-data", "--budget", "2")
    assert status == 2 and out == ""
    one_line_naming_default(err)


def test_issue_36_item_5_emit_names_the_rule_sets_that_hold_the_direction(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Emit --variant bwd_data with the default rule set: the same line, exit 2
    (it exited 1 as if the question had a negative answer), and nothing written."""
    ck = fake_ck(tmp_path / "ck", explicit_gemm=False)
    out_dir = tmp_path / "tree"
    argv = ["emit", "--arch", "gfx950", "--variant", "bwd_data", "--ndim", "2", "--dtype", "bf16"]
    status, out, err = run(capsys, *argv, "--ck-root", str(ck), "--out", str(out_dir))
    assert status == 2 and out == ""
    one_line_naming_default(err)
    assert not out_dir.exists()


def test_issue_36_item_5_an_emit_a_filter_empties_is_still_a_negative_answer(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """The rule set holds bwd_data kernels, the filter leaves none: exit 1, no
    kernel to emit (a negative answer), not the rule-set refusal."""
    ck = fake_ck(tmp_path / "ck", explicit_gemm=False)
    argv = ["emit", "--arch", "gfx950", "--variant", "bwd_data", "--ndim", "2", "--dtype", "bf16", "--rule-set"]
    status, _, err = run(
        capsys, *argv, "default", "--where", "tile_m == 7", "--ck-root", str(ck), "--out", str(tmp_path / "x")
    )
    assert status == 1 and "no kernel to emit" in err and "rule sets that do" not in err


PLAN_HEADER = "# ckspace plan {arch} forward bf16, budget 1: optimal\n# target: ...\n"
KERNEL = "grouped_conv_fwd_bf16_nhwgc_2d_compv3_cshuffle_intrawave_128x128x64_2x2x1_32x32x16"


def emit_argv(ck: Path, out_dir: Path, *args: str) -> list[str]:
    return ["emit", "--arch", "gfx950", *args, "--ck-root", str(ck), "--out", str(out_dir)]


def test_issue_36_item_4_emit_refuses_a_plan_for_another_arch(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Names carry no arch, so a gfx942 plan was emitted as gfx950 kernels; the
    plan's header refuses it in one line naming both archs, before anything is written. The same
    plan for gfx950 is emitted."""
    ck = fake_ck(tmp_path / "ck", explicit_gemm=False)
    plan = tmp_path / "plan.txt"
    plan.write_text(PLAN_HEADER.format(arch="gfx942") + KERNEL + "\n")
    out_dir = tmp_path / "tree"
    status, out, err = run(capsys, *emit_argv(ck, out_dir, "--variant", "forward", "--kernels", str(plan)))
    assert status == 2 and out == "" and err.count("\n") == 1
    assert "is a plan for gfx942, not --arch gfx950" in err and "--arch gfx942" in err
    assert not out_dir.exists()
    plan.write_text(PLAN_HEADER.format(arch="gfx950") + KERNEL + "\n")
    assert run(capsys, *emit_argv(ck, out_dir, "--variant", "forward", "--kernels", str(plan)))[0] == 0


def test_issue_36_item_4_build_refuses_a_tree_of_another_arch_before_any_work(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Building a gfx950 tree with --arch gfx942 compiled every kernel after one
    warning; now one line names both archs and what to do, and no build directory is made."""
    ck = fake_ck(tmp_path / "ck", explicit_gemm=False)
    tree = tmp_path / "tree"
    assert run(capsys, *emit_argv(ck, tree, "--variant", "forward", "--ndim", "2", "--dtype", "bf16"))[0] == 0
    status, out, err = run(capsys, "build", str(tree), "--arch", "gfx942", "--ck-root", str(ck))
    assert status == 2 and out == "" and err.count("\n") == 1, err
    assert "was emitted for gfx950, not gfx942" in err and "--arch gfx950" in err
    assert not (tree / "build").exists()


def test_issue_36_items_6_and_21_emit_kernels_needs_no_variant_and_writes_the_dispatcher(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Item 21: ``emit --kernels`` without --variant (nor --ndim, --dtype) takes the cell
    from the names; item 6: the tree it writes has the dispatcher, the C API a planned library is
    used through, without --with-selector. Without --kernels, --variant is still required, in one
    line."""
    import json

    ck = fake_ck(tmp_path / "ck", explicit_gemm=False)
    plan = tmp_path / "plan.txt"
    plan.write_text(PLAN_HEADER.format(arch="gfx950") + KERNEL + "\n")
    tree = tmp_path / "tree"
    status, out, _ = run(capsys, *emit_argv(ck, tree, "--kernels", str(plan)))
    assert status == 0 and "dispatcher: 1 kernels behind ckspace_dispatch.h" in out
    manifest = json.loads((tree / "manifest.json").read_text())
    assert [k["name"] for k in manifest["kernels"]] == [KERNEL] and manifest["dispatcher"]["kernels"] == [KERNEL]
    assert (manifest["request"]["variants"], manifest["request"]["ndims"], manifest["request"]["dtypes"]) == (
        ["forward"],
        [2],
        ["bf16"],
    )
    assert (tree / "ckspace_dispatch.h").is_file()
    status, out, err = run(capsys, *emit_argv(ck, tmp_path / "other"))
    assert status == 2 and err.count("\n") == 1 and "--variant is required" in err
