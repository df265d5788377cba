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
from ckspace.workloads.problem import ConvProblem

RULE_SETS = ("default", "full", "full-tests", "tiny")

GEMM_DOMAINS: dict[str, list] = {
    "tile_m": [8, 16, 24, 32, 48, 64, 96, 128, 192, 224, 256, 512],
    "tile_n": [8, 16, 24, 32, 48, 64, 96, 128, 192, 224, 256, 512],
    "tile_k": [4, 8, 16, 24, 32, 64, 128, 256],
    "wave_m": [1, 2, 4, 8],
    "wave_n": [1, 2, 4, 8],
    "wave_k": [1, 2, 4],
    "warp_tile_m": [4, 16, 32, 64],
    "warp_tile_n": [4, 16, 32, 64],
    "warp_tile_k": [2, 4, 8, 16, 32, 64],
    "vec_a": [1, 2, 3, 4, 6, 8, 16],
    "vec_b": [1, 2, 3, 4, 6, 8, 16],
    "vec_c": [1, 2, 3, 4, 6, 8, 16],
    "pipeline": list(Pipeline),
    "scheduler": list(Scheduler),
    "epilogue": list(Epilogue),
    "pad_m": [True, False],
    "pad_n": [True, False],
    "pad_k": [True, False],
    "double_smem_buffer": [False, True],
    "num_groups_to_merge": [1, 2, 4, 8, 16, 32],
    "split_image": [False, True],
    "explicit_gemm": [False, True],
    "two_stage": [False, True],
    "specialization": list(Specialization),
    "streamk_enabled": [False, True],
    "streamk_strategy": list(StreamKStrategy),
    "streamk_persistent": [False, True],
    "num_wave_groups": [1, 2],
    "tagged": [False, True],
}

DEPTHWISE_DOMAINS: dict[str, list] = {
    "tile_h": [4, 8, 14, 16, 28, 32, 64],
    "tile_w": [4, 8, 14, 16, 28, 32, 64],
    "filter": [1, 2, 3, 5, 7],
    "stride_h": [1, 2, 3],
    "stride_w": [1, 2, 3],
    "pad_h": [0, 1, 2],
    "pad_w": [0, 1, 2],
    "nbatch": [1, 2, 4, 8, 16],
    "sub_h": [1, 2, 4, 8],
    "sub_w": [1, 2, 4, 8],
    "in_vec": [1, 2, 3, 4, 8, 16],
    "out_vec": [1, 2, 4, 6, 8],
    "block_size": [32, 64],
    "dilation": [1, 2],
}


def consistent_streamk(values: dict) -> bool:
    """ckspace's structural rule, stated independently: stream-K is on exactly when a strategy is
    set, and persistence needs it."""
    on = values["streamk_enabled"]
    return on == (values["streamk_strategy"] != "none") and (on or not values["streamk_persistent"])


@st.composite
def gemm_configs(draw, arch: str | None = None, consistent: bool = False, variant: Variant | None = None) -> GemmConfig:
    """A GEMM config with every field drawn from its raw domain (of ``variant`` when given)."""
    values = {name: draw(st.sampled_from(domain)) for name, domain in GEMM_DOMAINS.items()}
    if consistent:
        strategy = draw(st.sampled_from(list(StreamKStrategy)))
        values["streamk_strategy"] = strategy
        values["streamk_enabled"] = strategy is not StreamKStrategy.NONE
        values["streamk_persistent"] = values["streamk_enabled"] and draw(st.booleans())
    return GemmConfig(
        arch=arch or draw(st.sampled_from(arch_names())),
        variant=variant or draw(st.sampled_from(list(Variant))),
        ndim=draw(st.sampled_from([1, 2, 3])),
        dtype=draw(st.sampled_from(list(Dtype))),
        **values,
    )


@st.composite
def depthwise_configs(draw, arch: str | None = None) -> DepthwiseConfig:
    values = {name: draw(st.sampled_from(domain)) for name, domain in DEPTHWISE_DOMAINS.items()}
    return DepthwiseConfig(
        arch=arch or draw(st.sampled_from(arch_names())), dtype=draw(st.sampled_from(list(Dtype))), **values
    )


@cache
def kernels(arch: str, rule_set: str, raw: bool = False) -> tuple[Kernel, ...]:
    """What ckspace lists for one whole-arch request (all variants, ndims, dtypes), under the rules
    revision the reference implementations restate."""
    return tuple(Space(arch, rule_set=rule_set, rules_revision=ORACLE_REVISION, ck=None).kernels(raw=raw))


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


# -- problems aimed at the edges of CK Tile's IsSupportedArgument checks ----------------------------

STRADDLED_WIDTHS = (2, 3, 4, 6, 8, 16)
"""The vector widths of the raw domains above 1: a per-group channel count is drawn at one of
their multiples or one off it, so each width divides it about half the time."""

MERGED_GROUPS = (2, 4, 8, 16, 32)
"""The groups-to-merge counts above 1, which G is drawn around the same way."""

GEMM_COUNT_EDGE = ((4, 4, 8), (1, 1, 128), (8, 4, 4), (1, 3, 43), (4, 4, 9), (1, 1, 127), (3, 6, 7), (2, 8, 9))
"""Per-dimension backward-data GEMM factors whose product is 127, 128, 129 or past them: at the
most GEMMs the backward-data kernel splits a convolution into (128)."""


@st.composite
def straddling(draw, widths: tuple[int, ...] = STRADDLED_WIDTHS, most: int = 4) -> int:
    """A count at the edge of divisibility by one of ``widths``: ``w * k`` or ``w * k ± 1`` (1 too)."""
    if draw(st.integers(0, 9)) == 0:
        return 1
    width = draw(st.sampled_from(widths))
    return max(1, width * draw(st.integers(1, most)) + draw(st.sampled_from((-1, 0, 0, 1))))


def _per_dim(draw, dims: list[str], usual: list[int], other: list[int]) -> dict[str, int]:
    """One value for every dimension, all the same (drawn from ``usual``), then possibly one
    dimension changed to a value of ``other``: the shapes where a specialisation just holds or
    just fails in one dimension."""
    base = draw(st.sampled_from(usual))
    values = dict.fromkeys(dims, base)
    if draw(st.booleans()):
        values[draw(st.sampled_from(dims))] = draw(st.sampled_from(other))
    return values


@st.composite
def boundary_problems(draw, ndim: int | None = None) -> ConvProblem:
    """A convolution at the edges the problem rules decide on, instead of one that hopes to hit
    them: channels per group (Cg and Kg drawn apart) that straddle each vector width, G around
    each groups-to-merge count, filters, strides and pads that meet a specialisation's
    preconditions in all dimensions but one, k_batch 1 or more, and for 3D backward-data GEMM
    counts at 128. Spatial sizes are the smallest the filter fits plus a little."""
    ndim = ndim or draw(st.sampled_from([1, 2, 3]))
    dims = ["d", "h", "w"][3 - ndim :]
    g = draw(st.one_of(st.just(1), straddling(MERGED_GROUPS, most=2)))
    values = {
        "ndim": ndim,
        "N": draw(st.integers(1, 3)),
        "G": g,
        "C": g * draw(straddling()),
        "K": g * draw(straddling()),
        "k_batch": draw(st.sampled_from([1, 1, 2, 3])),
    }
    names = {"d": ("Di", "Z"), "h": ("Hi", "Y"), "w": ("Wi", "X")}
    if ndim == 3 and draw(st.integers(0, 2)) == 0:
        factors = dict(zip(dims, draw(st.sampled_from(GEMM_COUNT_EDGE)), strict=True))
        filters, strides, pads = factors, factors, dict.fromkeys(dims, 0)
        dils = dict.fromkeys(dims, 1)
    else:
        filters = _per_dim(draw, dims, [1, 1, 3], [1, 2, 3, 5])
        strides = _per_dim(draw, dims, [1, 1, 2], [1, 2, 3])
        pads = _per_dim(draw, dims, [0, 0, 1], [0, 1])
        dils = _per_dim(draw, dims, [1, 1, 2], [1, 2])
    for d in dims:
        span = dils[d] * (filters[d] - 1) + 1
        values[names[d][0]] = max(1, span - 2 * pads[d]) + draw(st.integers(0, 5))
        values[names[d][1]] = filters[d]
        values[f"stride_{d}"], values[f"pad_{d}"], values[f"dil_{d}"] = strides[d], pads[d], dils[d]
    return ConvProblem.from_values(values)


# -- tiles at the LDS limit ------------------------------------------------------------------------


@cache
def lds_edges() -> dict[tuple[str, str], tuple[tuple[int, int, int], ...]]:
    """Per (pipeline, dtype): the (tile_m, tile_n, tile_k) of the raw domains whose staged bytes,
    ``(tile_m + tile_n) * tile_k`` elements, are exactly the pipeline's LDS limit or the nearest
    amount on either side of it. Limits and element sizes come from the arch table itself
    (tests/reference_rules.py reads it), not from ckspace."""
    import reference_rules as rr

    limits, sizes = rr.ARCH["lds_limit_bytes_by_pipeline"], rr.ARCH["element_size_bytes"]
    tiles = [(m, n, k) for m in GEMM_DOMAINS["tile_m"] for n in GEMM_DOMAINS["tile_n"] for k in GEMM_DOMAINS["tile_k"]]
    edges = {}
    for pipeline in Pipeline:
        limit = limits.get(pipeline.value, limits["default"])
        for dtype in Dtype:
            staged = {t: (t[0] + t[1]) * t[2] * sizes[dtype.value] for t in tiles}
            below = max(b for b in staged.values() if b < limit)
            above = min(b for b in staged.values() if b > limit)
            edges[(pipeline.value, dtype.value)] = tuple(t for t, b in staged.items() if b in (below, limit, above))
    return edges


@st.composite
def lds_edge_configs(draw) -> GemmConfig:
    """A raw-domain config whose tiles stage exactly its pipeline's LDS limit, or the nearest
    amount under or over it, for its dtype: where a ``<=`` written as ``<`` (or a wrong element
    size or limit) changes the answer."""
    config = draw(gemm_configs(consistent=True))
    tile_m, tile_n, tile_k = draw(st.sampled_from(lds_edges()[(config.pipeline.value, config.dtype.value)]))
    return config.model_copy(update={"tile_m": tile_m, "tile_n": tile_n, "tile_k": tile_k})
