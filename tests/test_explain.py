"""explain: blame is a minimal set of the right rules, and switching exactly those off admits
the config (property tests against tests/reference_rules.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from functools import cache

from conftest import ORACLE_REVISION
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from strategies import listed_configs, mutate
from test_properties import RULE_IDS, reference_violations

from ckspace import Space
from ckspace.constraints.model import PROPOSALS
from ckspace.constraints.rulesets import get_rule_set
from ckspace.core.cells import Cell
from ckspace.core.config import DepthwiseConfig, GemmConfig

SETTINGS = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@cache
def space(arch: str, rule_set: str) -> Space:
    """Under the rules revision the drawn kernels were listed in and the reference restates: a
    newer revision's rules (the LDS doubled against the arch's capacity, say) blame configs the
    reference passes. The upstream rule space (``ck=None``): blame is by the upstream validity rules,
    which the reference restates, not by what the CK found cannot build."""
    return Space(arch, rule_set=rule_set, rules_revision=ORACLE_REVISION, ck=None)


def _values_and_model(sp: Space, config):
    cell = Cell(config.variant, config.ndim, config.dtype)
    request = next(r for r in sp.requests if cell in r.cells)
    depthwise = isinstance(config, DepthwiseConfig)
    ((_, _, values),) = [p for p in sp.placements(config) if p[0] == request]
    return values, sp.cell_model(request, cell, depthwise)


@SETTINGS
@given(st.data())
def test_blame_is_right_sufficient_and_minimal(data) -> None:
    rule_set, config = data.draw(listed_configs())
    sp = space(config.arch, rule_set)
    mutated = mutate(data.draw, config)
    explanation = sp.explain(mutated)
    (cell,) = explanation.cells
    values, model = _values_and_model(sp, mutated)
    if model.feasible(values):
        assert cell.valid and not cell.blame
        return
    assert not cell.valid and cell.blame
    blamed = {b.constraint for b in cell.blame}
    if isinstance(mutated, GemmConfig):
        tagged = mutated.model_copy(update={"tagged": get_rule_set(rule_set).tags_dtype})
        validity = {RULE_IDS[b] for b in blamed if b != PROPOSALS}
        assert validity <= reference_violations(tagged)
    everything = set(model.literals)
    assert model.feasible(values, everything - blamed)  # switching exactly these off admits it
    for b in blamed:  # ... and no smaller subset does
        assert not model.feasible(values, everything - (blamed - {b})), b


@SETTINGS
@given(listed_configs())
def test_listed_configs_are_explained_valid(drawn) -> None:
    rule_set, config = drawn
    explanation = space(config.arch, rule_set).explain(config.name)
    assert explanation.valid and all(c.valid for c in explanation.cells if c.config_kind == config.kind)


def test_partial_config_counts_completions() -> None:
    sp = Space("gfx950", "forward", 2, "bf16", rule_set="full")
    explanation = sp.explain({"pipeline": "compv3", "tile_m": 128})
    (cell,) = explanation.cells
    expected = sum(1 for c in sp if c.kind == "gemm" and c.pipeline == "compv3" and c.tile_m == 128)
    assert cell.valid and cell.completions == expected > 0


def test_partial_contradiction_blames_the_rule() -> None:
    sp = Space("gfx950", "bwd_weight", 2, "fp16", rule_set="full", ck=None)  # blame by the upstream rules
    (cell,) = sp.explain({"pipeline": "compv4", "tile_k": 32}).cells
    assert not cell.valid
    assert [b.constraint for b in cell.blame] == ["backward_pipeline"]
    assert cell.blame[0].values == {"pipeline": "compv4"} and "compv3" in cell.blame[0].detail


def test_not_proposed_is_told_apart_from_invalid() -> None:
    sp = Space("gfx942", "forward", 2, "fp16", rule_set="full")
    config = next(c for c in sp if c.kind == "gemm")
    odd = config.model_copy(update={"vec_c": 2 if config.vec_c != 2 else 4})
    (cell,) = sp.explain(odd).cells
    kinds = {b.kind for b in cell.blame}
    assert "rule_set" in kinds and cell.closest and "differ" in cell.closest[0]


def test_cli_explain_name_and_partial_json() -> None:
    env = dict(os.environ)
    name = "grouped_conv_bwd_weight_bf16_nhwgc_2d_compv4_cshuffle_intrawave_16x16x32_1x1x1_16x16x32_vec1_1_1"
    out = subprocess.run(
        [sys.executable, "-m", "ckspace", "explain", name, "--arch", "gfx950"], capture_output=True, text=True, env=env
    )
    assert out.returncode == 1 and "backward_pipeline" in out.stdout and "NOT VALID" in out.stdout
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "ckspace",
            "explain",
            "--arch",
            "gfx950",
            "--variant",
            "bwd_weight",
            "--ndim",
            "2",
            "--dtype",
            "fp16",
            "--set",
            "pipeline=compv4",
            "--set",
            "tile_k=32",
            "--format",
            "json",
        ],
        capture_output=True,
        text=True,
        env=env,
    )
    assert out.returncode == 1  # a valid question, answered "not valid"
    data = json.loads(out.stdout)
    assert data["partial"] and not data["valid"]
    assert data["cells"][0]["blame"][0]["constraint"] == "backward_pipeline"
    bad = subprocess.run(
        [sys.executable, "-m", "ckspace", "explain", "--arch", "gfx950", "--variant", "forward", "--set", "tile_q=3"],
        capture_output=True,
        text=True,
        env=env,
    )
    assert bad.returncode == 2 and len(bad.stderr.splitlines()) == 1 and "tile_q" in bad.stderr
