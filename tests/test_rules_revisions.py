"""Rule revisions: the oracle's rules (7cd53015) and the arch-aware, double-buffer-aware LDS budget of
upstream PR #12173 (pr12173), chosen per request, cached apart, and compared with ``ckspace diff``; the
default is the newest merged one, so the unmerged pr12289 (tests/test_rdna.py) is opt-in."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import ORACLE_REVISION

from ckspace import Space
from ckspace.constraints.enumeration import cellcache
from ckspace.constraints.language.expr import evaluate
from ckspace.constraints.linting.lint import lint
from ckspace.constraints.rulebook.validity import FORMULATIONS, gemm_rules
from ckspace.core.arch import arch_facts
from ckspace.core.cells import Request
from ckspace.core.errors import CkspaceError, InvalidChoiceError, InvalidInputError
from ckspace.core.naming import parse_kernel_name
from ckspace.core.revisions import default_rules_revision, rules_revision, rules_revision_names
from ckspace.core.tables import table
from ckspace.core.vocab import Dtype, Pipeline, Variant, arch_names
from ckspace.features.hardware import hardware_facts

NEWER = "pr12173"
UNMERGED = "pr12289"
KIB = 1024
CAPACITY_KIB = {
    "gfx908": 64,
    "gfx90a": 64,
    "gfx942": 64,
    "gfx950": 160,
    "gfx1100": 64,
    "gfx1200": 64,
    "gfx1201": 64,
    "gfx1250": 320,
}
"""arch_specs.json's LDS capacity as of PR #12173 (gfx1250: 320 KiB; 64 KiB before)."""
ALWAYS_DOUBLE = {Pipeline.COMPV4, Pipeline.COMPV6, Pipeline.COMP_ASYNC}
DOUBLE_WITH_DSB = {Pipeline.MEM, Pipeline.COMPV3, Pipeline.COMPV5}
OLD_LIMITS = {Pipeline.COMPV4: 32 * KIB, Pipeline.COMPV6: 32 * KIB}  # others 64 KiB, on every arch


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "ckspace", *args], capture_output=True, text=True, env=dict(os.environ)
    )


def accepted_budget(arch: str, revision: str, pipeline: Pipeline, dsb: int) -> int:
    """The largest LDS footprint the lds_budget rule accepts, found by probing fp16 tiles of
    (128 + 128) x tile_k x 2 = 512 x tile_k bytes (every budget here is a multiple of 512)."""
    (rule,) = [r for r in gemm_rules(arch, Variant.FORWARD, Dtype.FP16, revision) if r.name == "lds_budget"]
    tile_k = np.arange(1, 2048)
    size = len(tile_k)
    cols = {
        "tile_m": np.full(size, 128),
        "tile_n": np.full(size, 128),
        "tile_k": tile_k,
        "pipeline": np.full(size, pipeline.code),
        "double_smem_buffer": np.full(size, dsb),
    }
    ok = np.asarray(evaluate(rule.expr, cols), dtype=bool)
    assert ok[0] and not ok.all() and not ok[np.argmin(ok) :].any()  # a threshold, below the probe's end
    return int(tile_k[ok].max()) * 512


@pytest.mark.parametrize("arch", arch_names())
def test_newer_budget_is_the_arch_capacity_halved_when_double_buffered(arch: str) -> None:
    capacity = CAPACITY_KIB[arch] * KIB
    for pipeline in Pipeline:
        for dsb in (0, 1):
            double = pipeline in ALWAYS_DOUBLE or (pipeline in DOUBLE_WITH_DSB and dsb)
            expected = capacity // 2 if double else capacity
            assert accepted_budget(arch, NEWER, pipeline, dsb) == expected, (pipeline, dsb)


@pytest.mark.parametrize("arch", ["gfx942", "gfx950", "gfx1250"])
def test_oracle_budget_depends_on_the_pipeline_only(arch: str) -> None:
    for pipeline in Pipeline:
        for dsb in (0, 1):
            assert accepted_budget(arch, ORACLE_REVISION, pipeline, dsb) == OLD_LIMITS.get(pipeline, 64 * KIB)


def test_a_96_kib_fp16_compv3_tile_fits_gfx950_but_not_gfx942() -> None:
    seed = next(c for c in Space("gfx942", "forward", 2, "fp16", "full", ck=None) if c.pipeline is Pipeline.COMPV3)
    big = seed.model_copy(update={"tile_m": 256, "tile_n": 128, "tile_k": 128})  # (256 + 128) x 128 x 2 = 96 KiB
    assert not big.double_smem_buffer
    verdicts = {}
    for arch in ("gfx942", "gfx950"):
        config = big.model_copy(update={"arch": arch})
        for revision in (ORACLE_REVISION, NEWER):
            space = Space(arch, "forward", 2, "fp16", "full", rules_revision=revision, ck=None)
            blamed = {b.constraint for cell in space.explain(config).cells for b in cell.blame}  # CP-SAT
            assert ("lds_budget" in blamed) == ("lds_budget" in space.violated_rules(config))  # numpy
            verdicts[arch, revision] = "lds_budget" not in blamed
    assert verdicts == {
        ("gfx942", ORACLE_REVISION): False,
        ("gfx942", NEWER): False,
        ("gfx950", ORACLE_REVISION): False,
        ("gfx950", NEWER): True,
    }


@pytest.mark.parametrize(
    "arch,rule_set,added",
    [
        ("gfx950", "default", {"compv4": 27}),
        ("gfx950", "full", {"compv6": 12}),
        ("gfx1250", "default", {"compv4": 36}),
        ("gfx942", "default", {}),
        ("gfx942", "full", {}),
    ],
)
@pytest.mark.slow
def test_diff_against_the_oracle_revision(arch: str, rule_set: str, added: dict[str, int]) -> None:
    out = run(
        "diff",
        "--arch",
        arch,
        "--variant",
        "forward",
        "--rule-set",
        rule_set,
        "--against-rules-revision",
        ORACLE_REVISION,
        "--rules-only",
        "--format",
        "json",
    )
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert f"(rules {NEWER})" in report["left"] and f"(rules {ORACLE_REVISION})" in report["right"]
    assert report["left_target"]["rules_only"] and report["right_target"]["rules_only"]
    assert report["only_right"] == []
    pipelines: dict[str, int] = {}
    for name in report["only_left"]:
        pipeline = parse_kernel_name(name)["pipeline"].value
        pipelines[pipeline] = pipelines.get(pipeline, 0) + 1
    assert pipelines == added
    assert report["left_count"] == report["right_count"] + sum(added.values())


def test_other_variants_and_archs_keep_their_kernels() -> None:
    for arch in ("gfx90a", "gfx942", "gfx1250"):
        for rule_set in ("full",):
            new = Space(arch, rule_set=rule_set, ck=None).names()
            assert new == Space(arch, rule_set=rule_set, rules_revision=ORACLE_REVISION, ck=None).names(), arch
    backward = ["bwd_data", "bwd_weight"]
    assert (
        Space("gfx950", backward, ck=None).names()
        == Space("gfx950", backward, rules_revision=ORACLE_REVISION, ck=None).names()
    )


@pytest.mark.slow
def test_lint_stops_reporting_the_quirk_a_revision_fixes() -> None:
    assert "lds_limit_arch_blind" in {f.code for f in lint("full", "gfx950", ORACLE_REVISION)}
    newer = lint("full", "gfx950", NEWER)
    assert "lds_limit_arch_blind" not in {f.code for f in newer}
    assert not [f for f in newer if f.spec in rules_revision(NEWER).fixed()]
    for revision in rules_revision_names():
        fixed = rules_revision(revision).fixed()
        quirks = {r.quirk for a in arch_names() for v in Variant for d in Dtype for r in gemm_rules(a, v, d, revision)}
        assert not quirks & fixed, (revision, quirks & fixed)


def test_revisions_are_deltas_with_known_formulations() -> None:
    names = rules_revision_names()
    assert names == (ORACLE_REVISION, NEWER, UNMERGED) and default_rules_revision() == NEWER  # newest merged
    assert [rules_revision(n).merged for n in names] == [True, True, False]
    root = rules_revision(ORACLE_REVISION)
    assert root.parent is None and root.tables == {} and set(root.rules) == set(FORMULATIONS)
    for name in names:
        revision = rules_revision(name)
        for rule, formulation in revision.rules.items():
            assert formulation in FORMULATIONS[rule], (name, rule)
    newer = rules_revision(NEWER)
    assert newer.parent == ORACLE_REVISION and set(newer.tables) == {"arch"}
    patched, base = newer.patched("arch", table("arch")), table("arch")
    assert {k for k in patched if patched[k] != base.get(k)} == {"archs", "lds_double_buffered_pipelines"}
    assert {a for a in base["archs"] if patched["archs"][a] != base["archs"][a]} == {"gfx1250"}
    assert base["archs"]["gfx1250"]["lds_capacity_kb_arch_specs_json"] == 64  # the shipped table is untouched
    pr = rules_revision(UNMERGED)
    assert pr.parent == NEWER and pr.rules == {} and set(pr.tables) == {"validity"} and not pr.fixes
    assert pr.formulation("lds_budget") == ("arch_capacity", newer)  # inherited from its parent
    assert pr.patched("arch", table("arch")) == patched
    wmma = pr.patched("validity", table("validity"))["is_valid_for_arch"]["wmma"]
    assert wmma == {**table("validity")["is_valid_for_arch"]["wmma"], "min_warp_tile_k_unless_float": 16}
    assert table("validity")["is_valid_for_arch"]["wmma"]["min_warp_tile_k_unless_float"] == 32


def test_arch_facts_carry_the_newer_lds_capacity() -> None:
    assert {a: arch_facts(a).lds_capacity_kb for a in arch_names()} == CAPACITY_KIB
    assert arch_facts("gfx1250", ORACLE_REVISION).lds_capacity_kb == 64
    assert hardware_facts("gfx950").lds_bytes_per_cu == 160 * KIB  # the selector reads the same fact
    assert hardware_facts("gfx942").lds_bytes_per_cu == 64 * KIB
    reads = {
        str(r)
        for r in next(r for r in gemm_rules("gfx1250", Variant.FORWARD, Dtype.BF16) if r.name == "lds_budget").reads
    }
    assert "arch.json (rules revision pr12173) archs.gfx1250.lds_capacity_kb_arch_specs_json = 320" in reads


def test_the_revision_is_part_of_every_cache_key_and_request(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CKSPACE_CACHE_DIR", str(tmp_path))
    old = Request.build("gfx950", "default", ["forward"], [2], ["bf16"], ORACLE_REVISION)
    new = Request.build("gfx950", "default", ["forward"], [2], ["bf16"])
    assert new.rules_revision == NEWER and old.key() != new.key()
    (cell,) = new.cells
    assert cellcache.cell_key(old, cell)["rules_revision"] == ORACLE_REVISION
    assert cellcache.cell_key(old, cell) != cellcache.cell_key(new, cell)
    counts = [
        Space("gfx950", "forward", 2, "bf16", "default", rules_revision=r, ck=None).count()
        for r in (ORACLE_REVISION, NEWER, ORACLE_REVISION, NEWER)
    ]  # cold, cold, warm, warm
    assert counts[0] < counts[1] and counts[:2] == counts[2:]
    assert len(list((tmp_path / "cells").glob("*.json"))) == 2


def test_unknown_revision_is_one_line_naming_the_choices() -> None:
    for args in (
        ("enumerate", "--arch", "gfx950", "--variant", "forward", "--count"),
        ("diff", "--arch", "gfx950", "--variant", "forward", "--against-rule-set", "default"),
        ("lint", "--arch", "gfx950", "--rule-set", "tiny"),
        ("rules",),
    ):
        out = run(*args, "--rules-revision", "pr99999")
        assert out.returncode == 2 and out.stdout == "", (args, out.stderr)
        assert out.stderr.count("\n") == 1 and "'pr99999'" in out.stderr
        assert f"{ORACLE_REVISION}, {NEWER}" in out.stderr
    out = run("diff", "--arch", "gfx950", "--variant", "forward", "--against-rules-revision", "old")
    assert out.returncode == 2 and "'old'" in out.stderr
    with pytest.raises(InvalidChoiceError, match="rules revision"):
        Space("gfx950", rules_revision="latest")


def test_bad_input_errors_are_value_errors() -> None:
    assert issubclass(InvalidInputError, CkspaceError) and issubclass(InvalidInputError, ValueError)
    assert issubclass(InvalidChoiceError, InvalidInputError)
