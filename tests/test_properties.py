"""Property-based tests: the space against an independent statement of the rules (tests/
reference_rules.py) and an independent enumerator of the rule sets (tests/nested_loop.py)."""

from __future__ import annotations

from functools import cache

import pytest
import reference_rules as ref
from conftest import ORACLE_REVISION, load_nested_loop
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from strategies import (
    RULE_SETS,
    consistent_streamk,
    depthwise_configs,
    gemm_configs,
    lds_edge_configs,
    lds_edges,
    listed_configs,
    mutate,
)

from ckspace import Space
from ckspace.constraints.rulesets import get_rule_set
from ckspace.core.cells import Request
from ckspace.core.config import DepthwiseConfig, GemmConfig

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# ckspace rule name -> reference check id
RULE_IDS = {
    "trait_combo": "trait",
    "streamk_variant": "streamk_variant",
    "pipeline_variant": "no_compv5_backward",
    "vec_parity": "vec_parity",
    "wave_combo": "wave_combo",
    "wmma_warp_tile_k": "wmma_warp_tile_k",
    "wmma_k_coverage": "wmma_k_coverage",
    "wmma_warp_tile_m": "wmma_warp_tile_m",
    "compv6_coverage_a": "compv6_coverage_a",
    "compv6_coverage_b": "compv6_coverage_b",
    "streamk_wave32": "streamk_wave32",
    "op_min_tile": "op_min_tile",
    "op_tile_alignment": "op_tile_alignment",
    "positive_dims": "positive",
    "fit_m": "fit_m",
    "fit_n": "fit_n",
    "fit_k": "fit_k",
    "wave_list": "wave_list",
    "warp_tile_list": "warp_tile_list",
    "backward_pipeline": "backward_pipeline",
    "arch_trait_table": "arch_trait_table",
    "lds_budget": "lds",
    "align_m": "align_m",
    "align_n": "align_n",
    "align_k": "align_k",
    "streamk_fields": "structure",
    "tile_divisibility": "tile_divisibility",
}


def reference_violations(config: GemmConfig) -> set[str]:
    """Every check the config fails, by the independent statements."""
    cfg = config.model_dump(mode="json")
    bad = ref.violations_is_valid_for_arch(cfg, config.arch) | ref.violations_is_config_valid(cfg, config.arch)
    if not consistent_streamk(cfg):
        bad.add("structure")
    tile = (config.tile_m, config.tile_n, config.tile_k)
    per = (config.wave_m * config.warp_tile_m, config.wave_n * config.warp_tile_n, config.wave_k * config.warp_tile_k)
    if any(t % p for t, p in zip(tile, per, strict=True)):  # rule tile_divisibility
        bad.add("tile_divisibility")
    return bad


@cache
def space(arch: str, rule_set: str) -> Space:
    return Space(
        arch, rule_set=rule_set, rules_revision=ORACLE_REVISION, ck=None
    )  # the reference states the rule space


@cache
def proposed_names(arch: str, rule_set: str) -> dict[tuple, set[str]]:
    """Per cell, the rule set's proposals by the nested-loop enumerator."""
    request = Request.build(arch, rule_set)
    result = load_nested_loop().enumerate_request(
        arch, rule_set, [v.value for v in request.variants], list(request.ndims), [d.value for d in request.dtypes]
    )
    return {key: set(raw) for key, (raw, _valid) in result.items()}


def expected_membership(rule_set: str, config) -> bool:
    """Independent statement of "the generator emits this kernel"."""
    cell = (config.variant.value, config.ndim, config.dtype.value)
    proposed = config.name in proposed_names(config.arch, rule_set)[cell]
    if isinstance(config, DepthwiseConfig):
        return (
            proposed
            and config.block_size == 64
            and config.dilation == 1
            and not ref.depthwise_violations(config.model_dump())
        )
    tagged = config.model_copy(update={"tagged": get_rule_set(rule_set).tags_dtype})
    return proposed and not reference_violations(tagged)


@pytest.mark.slow
@SETTINGS
@given(listed_configs())
def test_soundness_listed_configs_satisfy_every_rule(drawn) -> None:
    _rule_set, config = drawn
    if isinstance(config, DepthwiseConfig):
        assert ref.depthwise_violations(config.model_dump()) == set()
    else:
        assert reference_violations(config) == set(), config.name


@pytest.mark.slow
@SETTINGS
@given(gemm_configs())
def test_rule_blame_matches_reference_on_raw_domains(config: GemmConfig) -> None:
    ours = {RULE_IDS[name] for name in space(config.arch, "full").violated_rules(config)}
    assert ours == reference_violations(config), config.name


@pytest.mark.slow
@SETTINGS
@given(lds_edge_configs())
def test_rule_blame_matches_reference_at_the_lds_limit(config: GemmConfig) -> None:
    ours = {RULE_IDS[name] for name in space(config.arch, "full").violated_rules(config)}
    assert ours == reference_violations(config), config.name


def test_lds_edges_hold_the_limit_and_both_sides_of_it() -> None:
    """The strategy above has, for every pipeline and dtype, tiles exactly at the limit where the
    domains allow it, and always tiles just under and just over it."""
    import reference_rules as rr

    exact = 0
    for (pipeline, dtype), tiles in lds_edges().items():
        limits = rr.ARCH["lds_limit_bytes_by_pipeline"]
        limit = limits.get(pipeline, limits["default"])
        staged = {(m + n) * k * rr.ARCH["element_size_bytes"][dtype] for m, n, k in tiles}
        assert min(staged) < limit < max(staged), (pipeline, dtype)
        exact += limit in staged
    assert exact == len(lds_edges())  # the power-of-two limits are met exactly by every dtype


@SETTINGS
@given(st.sampled_from(RULE_SETS), gemm_configs())
@pytest.mark.slow
def test_completeness_raw_domain_configs(rule_set: str, config: GemmConfig) -> None:
    assert space(config.arch, rule_set).contains(config) == expected_membership(rule_set, config)


@SETTINGS
@given(st.data())
@pytest.mark.slow
def test_completeness_mutated_valid_configs(data) -> None:
    rule_set, config = data.draw(listed_configs())
    assert space(config.arch, rule_set).contains(config)
    mutated = mutate(data.draw, config)
    assert space(config.arch, rule_set).contains(mutated) == expected_membership(rule_set, mutated), mutated.name
    if isinstance(mutated, GemmConfig):
        blamed = {RULE_IDS[n] for n in space(config.arch, rule_set).violated_rules(mutated)}
        assert blamed == reference_violations(mutated)
    else:
        blamed = set(space(config.arch, rule_set).violated_rules(mutated))
        assert bool(blamed) == bool(ref.depthwise_violations(mutated.model_dump()))


@SETTINGS
@given(depthwise_configs())
def test_depthwise_rules_match_reference(config: DepthwiseConfig) -> None:
    blamed = space(config.arch, "full").violated_rules(config)
    assert bool(blamed) == bool(ref.depthwise_violations(config.model_dump()))


@pytest.mark.slow
@SETTINGS
@given(st.one_of(listed_configs().map(lambda d: d[1]), gemm_configs(consistent=True), depthwise_configs()))
def test_name_config_round_trip(config) -> None:
    if isinstance(config, DepthwiseConfig):
        parsed = DepthwiseConfig.from_name(config.name, config.arch)
        if (config.block_size, config.dilation) == (64, 1):  # the only values names imply
            assert parsed == config
    else:
        parsed = GemmConfig.from_name(config.name, config.arch, tagged=config.tagged)
        assert parsed == config
    assert parsed.name == config.name
