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

from ckspace.constraints.linting import lint_run
from ckspace.constraints.linting.lint import QUIRKS, Finding, lint
from ckspace.constraints.linting.lint_run import TABLE_DISPUTES, Run, wmma_tag_changes
from ckspace.constraints.rulesets import get_rule_set, rule_set_names
from ckspace.core.arch import arch_facts, arch_table
from ckspace.core.cells import CellProposals, Request
from ckspace.core.config import GemmConfig
from ckspace.core.vocab import Predicate, arch_names

CHECKABLE = {f"14.{n}" for n in (1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 15, 16, 18)}
"""The items of the reference specification's section 14 that show in what a rule set proposes or
emits, or in the facts the rules read, so lint can find them. The other three show in no answer:
14.12 is code upstream never runs (its default module's unused tables and helpers), 14.14 a
docstring naming the wrong rule set, and 14.17 version skew that breaks the CK Builder rule sets
(profiler, tests), which are data-driven and which ckspace does not reproduce."""


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
    (
        "14.3 untagged fp16/bf16 configs pass the WMMA floor as 'float' (default on gfx1250)",
        "default",
        "gfx1250",
        "wmma_dtype_tag",
        lambda fs: fs[0].count == 144 and fs[0].spec == "14.3" and all(not c.endswith("fp32") for c in fs[0].cells),
    ),
    (
        "14.6 the vector gate's 64-lane block against the coverage rule's 32-lane warps",
        "full",
        "gfx1201",
        "vec_gate_warp_size",
        lambda fs: fs[0].count == 136 and fs[0].spec == "14.6" and "counts 32" in fs[0].message,
    ),
    (
        "14.15 known-wrong bwd_weight half interwave configs are emitted",
        "full",
        "gfx942",
        "known_wrong_emitted",
        lambda fs: fs[0].spec == "14.15" and all(c.startswith("bwd_weight/") for c in fs[0].cells),
    ),
    ("14.18 depthwise emitted on wave32", "full", "gfx1250", "depthwise_on_wave32", lambda fs: fs[0].count == 60),
]


@pytest.mark.parametrize("item,rule_set,arch,code,check", EXPECTED, ids=[e[0] for e in EXPECTED])
@pytest.mark.slow
def test_lint_surfaces_section_14(item, rule_set, arch, code, check) -> None:
    found = codes(rule_set, arch)
    assert code in found, f"{item}: no {code} finding for {rule_set} on {arch}"
    assert check(found[code]), item


def test_no_false_alarms_where_upstream_is_consistent() -> None:
    assert "duplicates" not in codes("full", "gfx942")  # fallback pairs do not fire on gfx942
    assert "no_gemm_kernels" not in codes("full", "gfx1250")
    assert "lds_limit_arch_blind" not in codes("default", "gfx942")  # 2 x 32 KiB compv4 fits 64 KiB


@pytest.mark.parametrize(
    "code,rule_set,arch",
    [
        ("wmma_dtype_tag", "default", "gfx942"),  # wave64: no WMMA floor
        ("wmma_dtype_tag", "default", "gfx1201"),  # every default proposal fails wave_combo anyway
        ("wmma_dtype_tag", "full", "gfx1250"),  # tagged fp16/bf16 are held to the floor, as meant
        ("vec_gate_warp_size", "full", "gfx942"),  # wave64: the gate and the rule count alike
        ("vec_gate_warp_size", "full", "gfx950"),
        ("vec_gate_warp_size", "default", "gfx1250"),  # default's vectors do not come from the gate
        ("vec_gate_warp_size", "tiny", "gfx1250"),  # none of tiny's compv6 proposals turns on it
        ("arch_tables_disagree", "full", "gfx1201"),  # the tables agree there
    ],
)
def test_a_quirk_is_not_reported_where_it_decides_nothing(code: str, rule_set: str, arch: str) -> None:
    assert code not in codes(rule_set, arch)


def test_an_fp32_tagged_config_is_held_to_the_wmma_floor_its_untagged_twin_is_not() -> None:
    """The other side of 14.3, which no shipped rule set reaches (none proposes fp32 GEMM configs on
    a WMMA arch with a tag): the tag 'fp32' is not the exempt 'float', so upstream rejects the tagged
    config that the untagged one, and the rule's intent for fp32, let through."""
    name = "grouped_conv_fwd_fp32_nhwgc_2d_compv3_cshuffle_intrawave_64x64x64_2x2x1_16x16x16"
    request = Request.build("gfx1250", "full", ["forward"], [2], ["fp32"], rules_revision=ORACLE_REVISION)
    cell, applies = request.cells[0], (Predicate.STRUCTURE, Predicate.IS_VALID_FOR_ARCH)
    facts = arch_facts("gfx1250", ORACLE_REVISION)
    changes = [
        wmma_tag_changes(Run("full", "gfx1250", request, {cell: CellProposals([config.row()], applies)}, {}, facts))
        for config in (GemmConfig.from_name(name, "gfx1250", tagged=t) for t in (True, False))
    ]
    assert (changes[0].decided, changes[0].admitted, changes[0].emitted, changes[0].cells) == (1, 0, 1, [cell])
    assert changes[1].decided == 0


def test_arch_table_disagreements_are_reported_where_the_two_tables_differ(monkeypatch: pytest.MonkeyPatch) -> None:
    """14.16 is read from the arch table's statement of both upstream tables, entry by entry: an
    entry the two hold differently is reported (saying whether a rule of the run's cells reads it),
    one they hold alike is not, nor is any other arch."""
    theirs = {"arch_specs.json": [[16, 16, 64]], "arch_specs_generated.py": None}
    disputes = {
        "gfx1250": {
            "warp_tiles.fp8_fp8_fp32": theirs,
            "warp_tiles.fp16_fp16_fp32": {key: [[16, 16, 32]] for key in theirs},
        },
        "gfx942": {"warp_tiles.bf16_bf16_fp32": {"arch_specs.json": [[32, 32, 8]], "arch_specs_generated.py": None}},
    }
    monkeypatch.setattr(lint_run, "arch_table", lambda revision: {**arch_table(revision), TABLE_DISPUTES: disputes})
    (found,) = [f for f in lint("tiny", "gfx1250", ORACLE_REVISION) if f.code == "arch_tables_disagree"]
    assert (found.spec, found.count) == ("14.16", 1)
    assert "warp_tiles.fp8_fp8_fp32" in found.message and "no rule of these cells reads them" in found.message
    (read,) = [f for f in lint("tiny", "gfx942", ORACLE_REVISION) if f.code == "arch_tables_disagree"]
    assert "the rules read warp_tiles.bf16_bf16_fp32" in read.message
    assert not [f for f in lint("tiny", "gfx950", ORACLE_REVISION) if f.code == "arch_tables_disagree"]


@pytest.mark.slow
def test_gfx1250s_arch_tables_disagree_until_pr12173() -> None:
    """The shipped arch table states where upstream's two arch tables disagree (gfx1250 only, at
    the oracle's commits); PR #12173 regenerates arch_specs_generated.py from arch_specs.json, so
    under it (and the default revision) the finding is gone."""
    at = {a for a in arch_names() for f in findings("tiny", a) if f.code == "arch_tables_disagree"}
    assert at == {"gfx1250"}
    assert not [f for f in lint("tiny", "gfx1250", "pr12173") if f.code == "arch_tables_disagree"]


@pytest.mark.slow
def test_lint_over_every_rule_set_and_arch_shows_every_checkable_quirk() -> None:
    """``ckspace lint --strict`` over every rule set and every arch, under the oracle's rules revision
    (a later one fixes 14.5 and 14.16), names each checkable item of section 14 by its id, and no
    other: every quirk ckspace documents is one of them."""
    out = run_cli(["lint", "--strict", "--format", "json", "--rules-revision", ORACLE_REVISION])
    assert (out.status, out.stderr) == (1, "")
    found = json.loads(out.stdout)
    assert {f["rule_set"] for f in found} == {r for r in rule_set_names() if get_rule_set(r).has_table}
    assert {f["arch"] for f in found} == set(arch_names())
    assert {f["spec"] for f in found} - {None} == CHECKABLE == set(QUIRKS)


def test_lint_leaves_out_the_cells_a_rule_set_refuses() -> None:
    """rdna answers only forward 2D/3D fp16/bf16 on gfx1100/1200/1201 and refuses anything else, as
    upstream raises: lint reports on the cells it answers, and nothing where it refuses them all."""
    assert lint("rdna", "gfx942", ORACLE_REVISION) == []
    cells = {c for f in lint("rdna", "gfx1100", ORACLE_REVISION) for c in f.cells}
    assert cells and all(c.startswith("forward/") and "/1d/" not in c and not c.endswith("fp32") for c in cells)


@pytest.mark.slow
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
