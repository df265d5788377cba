"""What ckspace knows about CK Tile itself: pipeline class names and the features of a revision.

:class:`CkRevision` is what :mod:`ckspace.environment.ck_headers` reads off a tree of CK headers
and what the CK-revision rules (:mod:`ckspace.constraints.rulebook.ck_rules`) and the emitter consume.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from ckspace.core.vocab import Pipeline

PIPELINE_BASES: dict[Pipeline, str] = {
    Pipeline.BASIC_V1: "BaseGemmPipelineAGmemBGmemCRegV1",
    Pipeline.COMPV1: "BaseGemmPipelineAGmemBGmemCRegV1",
    Pipeline.BASIC_V2: "BaseGemmPipelineAGmemBGmemCRegV2",
    Pipeline.COMPV2: "BaseGemmPipelineAGmemBGmemCRegV2",
    Pipeline.MEM: "BaseGemmPipelineAgBgCrMem",
    Pipeline.COMPV3: "BaseGemmPipelineAgBgCrCompV3",
    Pipeline.COMPV4: "BaseGemmPipelineAgBgCrCompV4",
    Pipeline.COMPV5: "BaseGemmPipelineAgBgCrCompV5",
    Pipeline.COMPV6: "BaseGemmPipelineAgBgCrCompV6",
    Pipeline.COMP_ASYNC: "BaseGemmPipelineAgBgCrCompAsync",
    Pipeline.BASIC_ASYNC_V1: "BaseGemmPipelineAGmemBGmemCRegV1",
}
"""The base class a grouped-conv launcher dispatches hot loop and tail through (as the launchers of
upstream's ``unified_grouped_conv_codegen.py`` do)."""

PIPELINE_CLASSES: dict[Pipeline, str] = {
    Pipeline.BASIC_V1: "GemmPipelineAGmemBGmemCRegV1",
    Pipeline.COMPV1: "GemmPipelineAGmemBGmemCRegV1",
    Pipeline.BASIC_V2: "GemmPipelineAGmemBGmemCRegV2",
    Pipeline.COMPV2: "GemmPipelineAGmemBGmemCRegV2",
    Pipeline.MEM: "GemmPipelineAgBgCrMem",
    Pipeline.COMPV3: "GemmPipelineAgBgCrCompV3",
    Pipeline.COMPV4: "GemmPipelineAgBgCrCompV4",
    Pipeline.COMPV5: "GemmPipelineAgBgCrCompV5",
    Pipeline.COMPV6: "GemmPipelineAgBgCrCompV6",
    Pipeline.COMP_ASYNC: "GemmPipelineAgBgCrCompAsync",
    Pipeline.BASIC_ASYNC_V1: "GemmPipelineAGmemBGmemCRegAsyncV1",
}
"""The pipeline class of each pipeline name; ``wavelet`` has none in any CK revision we know."""


class CkRevision(BaseModel):
    """The CK headers in use: where, their fingerprint, and the features the emitter relies on."""

    model_config = ConfigDict(frozen=True)

    include_dir: str
    fingerprint: str
    label: str
    verified: bool
    pipelines: tuple[str, ...]
    """Pipeline names whose class and hot-loop / tail dispatch base both exist. (In the 2025-11 CK
    the v1 pipeline has no base and also reads ``Problem::VectorSizeC``, which the universal
    problem the grouped-conv kernels use lacks: it cannot be built there.)"""
    streamk_conv: bool
    """The grouped-conv kernels accept a stream-K tile partitioner."""
    explicit_gemm: bool
    """``GroupedConvTraits`` has an explicit-GEMM parameter."""
    split_image_variants: tuple[str, ...]
    """Variants whose kernel reads ``EnableSplitImage``."""
    merge_groups_variants: tuple[str, ...]
    """Variants whose kernel reads ``NumGroupsToMerge``."""
    two_stage: bool
    """The element-wise kernel and ``UnaryConvert`` the two-stage bwd_weight needs exist."""
    instance_string: bool
    """Kernels offer ``GetInstanceString`` (CK's experimental builder)."""
    depthwise: bool
    """A direct depthwise convolution kernel exists."""
    warp_gemms: dict[str, tuple[tuple[int, int, int], ...]]
    """Per dtype, the warp tiles (m, n, k) the warp-GEMM dispatcher has (non-transposed C)."""
    single_lds_pipelines: tuple[str, ...] = ()
    """Pipelines with an ``operator()(a_window, b_window, num_loop, p_smem)`` overload that takes
    plain (non-tuple) windows: the call the grouped-conv kernels make without the double LDS buffer."""
    double_lds_pipelines: tuple[str, ...] = ()
    """Pipelines with the ``(a_window, b_window, num_loop, p_smem_0, p_smem_1)`` overload: the call
    the kernels make with the double LDS buffer."""
    shuffle_always: tuple[str, ...] = ()
    """Pipelines that transpose a column-major A / row-major B tile in registers (``transpose_tile2d``)
    on every arch."""
    shuffle_without_load_tr: tuple[str, ...] = ()
    """Pipelines that do so only on archs without the LDS transpose load (``is_*_load_tr``)."""
    load_tr_archs: tuple[str, ...] = ()
    """Archs on which the pipeline base enables the LDS transpose load."""
    shuffle_auto_vector: bool = False
    """The shuffled register distribution uses the policy's own vector size
    (``GetVectorSizeA/B``) while the DRAM load uses the config's fixed ``VectorSizeA/B``."""
    broken_specialization_variants: tuple[str, ...] = ()
    """Variants whose kernel reads ``GroupedConvTraits::NDimSpatial_``, which the traits lack: every
    non-default specialization instantiates it and fails to compile."""
    bwd_data_double_lds_broken: bool = False
    """The bwd_data kernel's two-LDS path calls ``get_length`` on a tile window, which has none."""
    compv5_ping_pong: bool = False
    """CompV5 static_asserts ``KPerBlock % ((NumWarps / 2) * KTileSize) == 0`` (ping-pong warps)."""
    bwd_weight_1d_transposed: bool = False
    """The 1D bwd_weight output descriptor is (K, N*Wo) where the kernel reads (GemmK, GemmM)."""
