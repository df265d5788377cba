"""explain: blame is a minimal set of the right rules, and switching exactly those off admits
the config (property tests against tests/reference_rules.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from functools import cache
from pathlib import Path

import pytest
from conftest import ORACLE_REVISION, fake_ck
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from strategies import listed_configs, mutate
from test_properties import RULE_IDS, reference_violations

from ckspace import Space
from ckspace.constraints.evaluators.model import PROPOSALS
from ckspace.constraints.rulesets import get_rule_set
from ckspace.core.cells import Cell
from ckspace.core.config import DepthwiseConfig, GemmConfig
from ckspace.core.vocab import Specialization

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
@pytest.mark.slow
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
@pytest.mark.slow
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


@pytest.mark.slow
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


def _ck_with_a_broken_bwd_data_kernel(root: Path) -> Path:
    """The fake CK tree, whose backward-data kernel reads ``GroupedConvTraitsType_::NDimSpatial_``
    (a member its traits lack): the target refuses every non-default bwd_data specialization by the
    CK rule ``ck_specialization``, as the 2025-11 CK does."""
    fake_ck(root, explicit_gemm=False)
    kernel = root / "include/ck_tile/ops/grouped_convolution/kernel/grouped_convolution_backward_data_kernel.hpp"
    kernel.write_text("static constexpr index_t NDimSpatial = GroupedConvTraitsType_::NDimSpatial_;\n")
    return root


@pytest.fixture(scope="module")
def broken_ck(tmp_path_factory: pytest.TempPathFactory) -> str:
    return str(_ck_with_a_broken_bwd_data_kernel(tmp_path_factory.mktemp("ck")))


@cache
def ck_space(ck: str | None, arch: str, variant: str, ndim: int, dtype: str) -> Space:
    """One cell of rule set ``full`` (which runs every validity predicate) for the target ``ck``
    (None: the rule space)."""
    return Space(arch, variant, ndim, dtype, rule_set="full", rules_revision=ORACLE_REVISION, ck=ck)


def _blamed_rules(space: Space, config) -> set[str]:
    """The rules explain blames for ``config``, the rule set's proposals aside."""
    (cell,) = space.explain(config).cells
    return {b.constraint for b in cell.blame} - {PROPOSALS}


def test_issue_36_item_3_a_kernel_the_ck_refuses_names_its_ck_rule(broken_ck: str) -> None:
    """violated_rules answered [] where explain blamed ck_specialization: one answer for "why not"."""
    space = ck_space(broken_ck, "gfx942", "bwd_data", 2, "bf16")
    kernel = next(c for c in Space("gfx942", "bwd_data", 2, "bf16", rule_set="default", ck=broken_ck))
    refused = kernel.model_copy(update={"specialization": Specialization.FILTER1X1_PAD0})
    assert "ck_specialization" in space.violated_rules(refused)
    assert set(space.violated_rules(refused)) == _blamed_rules(space, refused) == {"ck_specialization"}
    assert space.violated_rules(kernel) == [] and _blamed_rules(space, kernel) == set()


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_issue_36_item_3_violated_rules_are_the_rules_explain_blames(broken_ck: str, data) -> None:
    """For drawn configs (kernels of ``full`` with one field changed) in a target with CK rules and
    in the rule space, violated_rules names exactly the rules explain blames: validity and the
    target's alike (the fake CK refuses most of them: only compv3, few warp GEMMs)."""
    _, config = data.draw(listed_configs(("full",)))
    mutated = mutate(data.draw, config)
    ck = data.draw(st.sampled_from([broken_ck, None]))
    space = ck_space(ck, mutated.arch, mutated.variant.value, mutated.ndim, mutated.dtype.value)
    assert set(space.violated_rules(mutated)) == _blamed_rules(space, mutated)
