"""Lint on the upstream rule sets surfaces each upstream inconsistency (the quirks of
``docs/rules.md``) that concerns what gets emitted. The expectations below are derived from the
quirks' statements, one by one, so they pin the rules revision the oracle fixtures pin
(``conftest.ORACLE_REVISION``); a later revision that fixes a quirk stops reporting it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from functools import cache

import pytest
from conftest import ORACLE_REVISION
from fuzz_world import run_cli

from ckspace.constraints.lint import Finding, lint


@cache
def findings(rule_set: str, arch: str) -> tuple[Finding, ...]:
    return tuple(lint(rule_set, arch, ORACLE_REVISION))


def codes(rule_set: str, arch: str) -> dict[str, list[Finding]]:
    out: dict[str, list[Finding]] = {}
    for f in findings(rule_set, arch):
        out.setdefault(f.code, []).append(f)
    return out


# (quirk id of docs/rules.md, rule set, arch, expected finding code, a check on the findings of that code)
EXPECTED = [
    (
        "14.1 bwd_data empty: full emits it only with compv1",
        "full",
        "gfx942",
        "empty_cells",
        lambda fs: any(f.message.startswith("bwd_data: 9 of 9") and f.spec == "14.1" for f in fs),
    ),
    (
        "14.1 backward pipelines contradict",
        "full",
        "gfx950",
        "removed_by_rules",
        lambda fs: any(f.rules == ["backward_pipeline"] and f.spec == "14.1" for f in fs),
    ),
    (
        "14.1 compv1 never valid for bwd_data",
        "full",
        "gfx942",
        "dead_pipeline",
        lambda fs: any("bwd_data pipeline compv1" in f.message for f in fs),
    ),
    (
        "14.2 wave_k forced to 1: 1,824 gfx1250 configs",
        "full",
        "gfx1250",
        "wave_k_forced",
        lambda fs: fs[0].count == 1824 and fs[0].spec == "14.2",
    ),
    (
        "14.4 missing dtype table is a pass (default fp32 on gfx1250)",
        "default",
        "gfx1250",
        "unchecked_warp_tiles",
        lambda fs: fs[0].spec == "14.4" and all(c.endswith("fp32") for c in fs[0].cells),
    ),
    (
        "14.5 LDS limit is arch-blind (gfx950 has 160 KiB)",
        "full",
        "gfx950",
        "lds_limit_arch_blind",
        lambda fs: fs[0].count > 0 and "160 KiB" in fs[0].message,
    ),
    (
        "14.7 no GEMM kernel on gfx11/gfx12 except gfx1250",
        "full",
        "gfx1201",
        "no_gemm_kernels",
        lambda fs: "only 60 depthwise" in fs[0].message,
    ),
    ("14.8 fallback pairs repeat", "full", "gfx90a", "duplicates", lambda fs: fs[0].count > 0),
    (
        "14.9 1D gets feature-only configs",
        "full",
        "gfx942",
        "feature_only_cells",
        lambda fs: fs[0].cells and all("/1d/" in c for c in fs[0].cells),
    ),
    ("14.10 3D names read nhwgc", "default", "gfx942", "layout_name", lambda fs: fs[0].spec == "14.10"),
    (
        "14.11 tiny gives some variants nothing",
        "tiny",
        "gfx942",
        "variant_without_proposals",
        lambda fs: any(f.message.startswith("bwd_data") for f in fs),
    ),
    (
        "14.13 default's compv4 doubles tile_k and overflows LDS",
        "default",
        "gfx942",
        "dead_tile",
        lambda fs: any("64x64x256" in f.message and f.spec == "14.13" for f in fs),
    ),
    ("14.18 depthwise emitted on wave32", "full", "gfx1250", "depthwise_on_wave32", lambda fs: fs[0].count == 60),
]


@pytest.mark.parametrize("item,rule_set,arch,code,check", EXPECTED, ids=[e[0] for e in EXPECTED])
def test_lint_surfaces_section_14(item, rule_set, arch, code, check) -> None:
    found = codes(rule_set, arch)
    assert code in found, f"{item}: no {code} finding for {rule_set} on {arch}"
    assert check(found[code]), item


def test_no_false_alarms_where_upstream_is_consistent() -> None:
    assert "duplicates" not in codes("full", "gfx942")  # fallback pairs do not fire on gfx942
    assert "no_gemm_kernels" not in codes("full", "gfx1250")
    assert "lds_limit_arch_blind" not in codes("default", "gfx942")  # 2 x 32 KiB compv4 fits 64 KiB


def test_cli_lint_strict_and_json() -> None:
    env = dict(os.environ)
    base = [
        sys.executable,
        "-m",
        "ckspace",
        "lint",
        "--rule-set",
        "full",
        "--arch",
        "gfx942",
        "--rules-revision",
        ORACLE_REVISION,
    ]
    text = subprocess.run(base, capture_output=True, text=True, env=env)
    assert text.returncode == 0 and "backward_pipeline" in text.stdout
    strict = subprocess.run([*base, "--strict", "--format", "json"], capture_output=True, text=True, env=env)
    assert strict.returncode == 1
    data = json.loads(strict.stdout)
    assert {"rule_set", "arch", "code", "message", "count", "spec"} <= set(data[0])


@pytest.mark.parametrize(
    "repeated, once",
    [
        (["--rule-set", "tiny", "tiny", "--arch", "gfx950", "gfx950"], ["--rule-set", "tiny", "--arch", "gfx950"]),
        (
            ["--rule-set", "tiny", "TINY", "--rule-set", "tiny", "--arch", "GFX950", "--arch", "gfx950"],
            ["--rule-set", "tiny", "--arch", "gfx950"],
        ),
        (
            ["--rule-set", "tiny", "default", "tiny", "--arch", "gfx942", "gfx950", "gfx942", "--format", "json"],
            ["--rule-set", "tiny", "default", "--arch", "gfx942", "gfx950", "--format", "json"],
        ),
    ],
    ids=["twice", "spellings and repeated options", "first occurrence order, json"],
)
def test_cli_lint_repeated_values_mean_one(repeated: list[str], once: list[str]) -> None:
    """A rule set or an arch named again (in any spelling) is the same question: every finding
    once, and the counts line counts it once."""
    twice, single = run_cli(["lint", *repeated]), run_cli(["lint", *once])
    assert (twice.status, twice.stderr) == (single.status, single.stderr) == (0, "")
    assert twice.stdout == single.stdout and twice.stdout
