"""``ckspace select`` as a user meets it: JSON on stdout with no kernel, an emitted tree as its
candidates, and the one notice that the first select compiles the selector."""

from __future__ import annotations

from pathlib import Path

import pytest


def test_select_json_with_no_kernel_still_answers_on_stdout(tmp_path, capsys) -> None:
    import json

    from ckspace.cli import main

    names = tmp_path / "names.txt"
    names.write_text("grouped_conv_fwd_bf16_nhwgc_3d_compv3_cshuffle_intrawave_64x64x64_2x2x1_32x32x16_vec8_8_8\n")
    status = main(
        [
            "select",
            "--arch",
            "gfx950",
            "--variant",
            "forward",
            "--dtype",
            "bf16",
            "--candidates",
            str(names),
            "--problem",
            "N=1,C=64,K=64,Hi=8,Wi=8,Y=3,X=3,pad=1",
            "--format",
            "json",
        ]
    )
    record = json.loads(capsys.readouterr().out)
    assert status == 1 and record["pick"] is None and record["candidates"] == 1
    assert "problem_ndim" in json.dumps(record["blocking"]) and record["target"]["known_wrong_excluded"]
    assert (
        main(
            [
                "select",
                "--arch",
                "gfx950",
                "--variant",
                "forward",
                "--dtype",
                "bf16",
                "--top",
                "0",
                "--problem",
                "N=1,C=64,K=64,Hi=8,Wi=8,Y=3,X=3,pad=1",
            ]
        )
        == 2
    )
    assert "--top 0: valid: how many kernels to list, at least 1" in capsys.readouterr().err


def test_select_takes_an_emitted_tree_as_its_candidates(tmp_path: Path, capsys) -> None:
    import json

    from conftest import fake_ck

    from ckspace.cli import main

    tree, ck = tmp_path / "tree", str(fake_ck(tmp_path / "ck", explicit_gemm=True))
    assert (
        main(
            [
                "emit",
                "--arch",
                "gfx950",
                "--variant",
                "forward",
                "bwd_weight",
                "--ndim",
                "2",
                "--dtype",
                "bf16",
                "--rule-set",
                "default",
                "--ck-root",
                ck,
                "--out",
                str(tree),
            ]
        )
        == 0
    )
    capsys.readouterr()
    cell = [
        "select",
        "--arch",
        "gfx950",
        "--dtype",
        "bf16",
        "--problem",
        "N=1,C=64,K=64,Hi=8,Wi=8,Y=3,X=3,pad=1",
        "--ck-root",
        ck,
        "--format",
        "json",
    ]
    assert main([*cell, "--variant", "bwd_weight", "--candidates", str(tree)]) == 0
    answer = json.loads(capsys.readouterr().out)
    manifest = json.loads((tree / "manifest.json").read_text())
    bwd_weight = {k["name"] for k in manifest["kernels"] if k["variant"] == "bwd_weight"}
    assert answer["candidates"] == len(bwd_weight) < len(manifest["kernels"]) and answer["pick"] in bwd_weight
    assert main([*cell, "--variant", "bwd_data", "--candidates", str(tree)]) == 2
    assert (
        f"--candidates {tree}: no bwd_data bf16 kernel (it holds bwd_weight bf16, forward bf16)"
        in capsys.readouterr().err
    )


@pytest.mark.slow
def test_the_first_select_says_once_that_it_compiles_the_selector(tmp_path: Path) -> None:
    import json

    from conftest import c_compiler
    from fuzz_world import run_cli

    c_compiler()  # without one the selector calls LightGBM and nothing is compiled: a skip saying how to get one
    select = [
        "select",
        "--arch",
        "gfx950",
        "--variant",
        "forward",
        "--dtype",
        "bf16",
        "--rule-set",
        "tiny",
        "--rules-only",
        "--problem",
        "N=1,C=64,K=64,Hi=8,Wi=8,Y=3,X=3,pad=1",
        "--format",
        "json",
        "--cache-dir",
        str(tmp_path / "cache"),
    ]
    first, again = run_cli(select), run_cli(select)
    assert first.status == again.status == 0 and json.loads(first.stdout) == json.loads(again.stdout)
    said = [line for line in first.stderr.splitlines() if "compiling" in line]
    assert len(said) == 1 and said[0].startswith("ckspace: NOTICE: compiling the selector for gfx950 forward bf16 ")
    assert f"(once; cached in {tmp_path / 'cache' / 'compiled-selectors'}" in said[0]
    assert "compiling" not in again.stderr
