"""Hypothesis strategies over the raw domains of config fields, and shared helpers.

The raw domains cover every value the rule tables and arch tables use, plus neighbours that no
rule set proposes, so drawn configs exercise each rule on both sides.
"""

from __future__ import annotations

from functools import cache

from conftest import ORACLE_REVISION
from hypothesis import strategies as st

from ckspace.core.config import DepthwiseConfig, GemmConfig
from ckspace.core.vocab import (
    Dtype,
    Epilogue,
    Pipeline,
    Scheduler,
    Specialization,
    StreamKStrategy,
    Variant,
    arch_names,
)
from ckspace.space.listing import Kernel
from ckspace.space.space import Space

RULE_SETS = ("default", "full", "full-tests", "tiny")

GEMM_DOMAINS: dict[str, list] = {
    "tile_m": [8, 16, 24, 32, 48, 64, 96, 128, 192, 224, 256, 512],
    "tile_n": [8, 16, 24, 32, 48, 64, 96, 128, 192, 224, 256, 512],
    "tile_k": [4, 8, 16, 24, 32, 64, 128, 256],
    "wave_m": [1, 2, 4, 8], "wave_n": [1, 2, 4, 8], "wave_k": [1, 2, 4],
    "warp_tile_m": [4, 16, 32, 64], "warp_tile_n": [4, 16, 32, 64], "warp_tile_k": [2, 4, 8, 16, 32, 64],
    "vec_a": [1, 2, 3, 4, 6, 8, 16], "vec_b": [1, 2, 3, 4, 6, 8, 16], "vec_c": [1, 2, 3, 4, 6, 8, 16],
    "pipeline": list(Pipeline), "scheduler": list(Scheduler), "epilogue": list(Epilogue),
    "pad_m": [True, False], "pad_n": [True, False], "pad_k": [True, False],
    "double_smem_buffer": [False, True], "num_groups_to_merge": [1, 2, 4, 8, 16, 32],
    "split_image": [False, True], "explicit_gemm": [False, True], "two_stage": [False, True],
    "specialization": list(Specialization),
    "streamk_enabled": [False, True], "streamk_strategy": list(StreamKStrategy),
    "streamk_persistent": [False, True], "num_wave_groups": [1, 2], "tagged": [False, True],
}

DEPTHWISE_DOMAINS: dict[str, list] = {
    "tile_h": [4, 8, 14, 16, 28, 32, 64], "tile_w": [4, 8, 14, 16, 28, 32, 64],
    "filter": [1, 2, 3, 5, 7], "stride_h": [1, 2, 3], "stride_w": [1, 2, 3],
    "pad_h": [0, 1, 2], "pad_w": [0, 1, 2], "nbatch": [1, 2, 4, 8, 16],
    "sub_h": [1, 2, 4, 8], "sub_w": [1, 2, 4, 8], "in_vec": [1, 2, 3, 4, 8, 16],
    "out_vec": [1, 2, 4, 6, 8], "block_size": [32, 64], "dilation": [1, 2],
}


def consistent_streamk(values: dict) -> bool:
    """ckspace's structural rule, stated independently: stream-K is on exactly when a strategy is
    set, and persistence needs it."""
    on = values["streamk_enabled"]
    return on == (values["streamk_strategy"] != "none") and (on or not values["streamk_persistent"])


@st.composite
def gemm_configs(draw, arch: str | None = None, consistent: bool = False) -> GemmConfig:
    """A GEMM config with every field drawn from its raw domain."""
    values = {name: draw(st.sampled_from(domain)) for name, domain in GEMM_DOMAINS.items()}
    if consistent:
        strategy = draw(st.sampled_from(list(StreamKStrategy)))
        values["streamk_strategy"] = strategy
        values["streamk_enabled"] = strategy is not StreamKStrategy.NONE
        values["streamk_persistent"] = values["streamk_enabled"] and draw(st.booleans())
    return GemmConfig(
        arch=arch or draw(st.sampled_from(arch_names())), variant=draw(st.sampled_from(list(Variant))),
        ndim=draw(st.sampled_from([1, 2, 3])), dtype=draw(st.sampled_from(list(Dtype))), **values,
    )


@st.composite
def depthwise_configs(draw, arch: str | None = None) -> DepthwiseConfig:
    values = {name: draw(st.sampled_from(domain)) for name, domain in DEPTHWISE_DOMAINS.items()}
    return DepthwiseConfig(arch=arch or draw(st.sampled_from(arch_names())),
                           dtype=draw(st.sampled_from(list(Dtype))), **values)


@cache
def kernels(arch: str, rule_set: str, raw: bool = False) -> tuple[Kernel, ...]:
    """What ckspace lists for one whole-arch request (all variants, ndims, dtypes), under the rules
    revision the reference implementations restate."""
    return tuple(Space(arch, rule_set=rule_set, rules_revision=ORACLE_REVISION).kernels(raw=raw))


def to_config(kernel: Kernel) -> GemmConfig | DepthwiseConfig:
    if kernel.depthwise:
        return DepthwiseConfig.from_row(kernel.arch, kernel.cell.dtype, kernel.row)
    return GemmConfig.from_row(kernel.arch, kernel.cell.variant, kernel.cell.ndim, kernel.cell.dtype, kernel.row)


@st.composite
def listed_configs(draw, rule_sets=RULE_SETS):
    """(rule set, config) drawn from the solver side's output: a valid kernel of some arch."""
    rule_set = draw(st.sampled_from(rule_sets))
    arch = draw(st.sampled_from([a for a in arch_names() if kernels(a, rule_set)]))
    return rule_set, to_config(draw(st.sampled_from(kernels(arch, rule_set))))


def mutate(draw, config):
    """``config`` with one field replaced by another value of its raw domain."""
    domains = DEPTHWISE_DOMAINS if isinstance(config, DepthwiseConfig) else GEMM_DOMAINS
    field = draw(st.sampled_from(sorted(domains)))
    value = draw(st.sampled_from([v for v in domains[field] if v != getattr(config, field)]))
    return config.model_copy(update={field: value})
