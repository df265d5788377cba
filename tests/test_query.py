"""sample, best and diff."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from ckspace import CkspaceError, Space


def test_sample_is_deterministic_diverse_and_valid() -> None:
    space = Space("gfx950", "forward", 2, ["bf16", "fp16"])
    a, b = space.sample(20, seed=3), space.sample(20, seed=3)
    assert [c.name for c in a] == [c.name for c in b]
    assert [c.name for c in a] != [c.name for c in space.sample(20, seed=4)]
    assert len({c.name + c.dtype for c in a}) == 20 and all(space.contains(c) for c in a)
    strata = {(c.pipeline, c.tile_m, c.tile_n, c.tile_k) for c in a if c.kind == "gemm"}
    assert len(strata) >= 19  # one kernel per stratum before any stratum repeats
    assert len(space.sample(10_000)) == space.count()
    by_pipeline = space.sample(3, stratify_by=["pipeline"])
    assert len({c.pipeline for c in by_pipeline if c.kind == "gemm"}) >= 2
    with pytest.raises(CkspaceError):
        space.sample(3, stratify_by=["colour"])


@pytest.mark.parametrize(
    "objective,value_of,maximize",
    [
        ("tile_m * tile_n * tile_k", lambda c: c.tile_m * c.tile_n * c.tile_k, True),
        ("vec_a + 2 * vec_b - tile_k", lambda c: c.vec_a + 2 * c.vec_b - c.tile_k, False),
        ("tile_m - tile_n", lambda c: c.tile_m - c.tile_n, True),
    ],
)
def test_best_is_the_proven_optimum_of_the_listing(objective: str, value_of, maximize: bool) -> None:
    space = Space("gfx942", ["forward", "bwd_weight"], 2, "fp16")
    result = space.best(objective, maximize=maximize)
    assert result.status == "OPTIMAL"
    values = [value_of(c) for c in space if c.kind == "gemm"]
    assert result.value == (max(values) if maximize else min(values))
    assert space.contains(result.config)


def test_best_respects_filters_and_reports_infeasible() -> None:
    space = Space("gfx942", "forward", 2, "fp16")
    assert space.where("tile_m <= 32").best("tile_m").value == 32
    assert space.where("tile_m > 10000").best("tile_m").status == "INFEASIBLE"


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "ckspace", "diff", *args], capture_output=True, text=True, env=dict(os.environ)
    )


def test_diff_archs_rule_sets_and_cells() -> None:
    base = ["--arch", "gfx942", "--variant", "forward", "--ndim", "2", "--dtype", "fp16"]
    out = json.loads(_run(*base, "--rule-set", "default", "--against-arch", "gfx950", "--format", "json").stdout)
    gfx942 = set(Space("gfx942", "forward", 2, "fp16", rule_set="default").names())
    gfx950 = set(Space("gfx950", "forward", 2, "fp16", rule_set="default").names())
    assert set(out["only_left"]) == gfx942 - gfx950 and set(out["only_right"]) == gfx950 - gfx942
    assert out["common"] == len(gfx942 & gfx950) and out["right_count"] == len(gfx950)
    cells = json.loads(_run(*base, "--against-ndim", "3", "--format", "json").stdout)
    assert cells["common"] > 0 and cells["left_count"] == cells["common"] + len(cells["only_left"])
    same = _run(*base)
    assert same.returncode == 2 and len(same.stderr.splitlines()) == 1
