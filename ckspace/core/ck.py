"""What ckspace knows about CK Tile itself: its block pipelines and the features of a revision.

:data:`PIPELINES` states each pipeline's facts once -- its class and dispatch base, which the
emitter and the CK-header probe read, and its prefetch depth and data movement, which the
analytical performance model reads.

:class:`CkRevision` is what :mod:`ckspace.environment.ck_headers` reads off a tree of CK headers
and what the CK-revision rules (:mod:`ckspace.constraints.rulebook.ck_rules`) and the emitter consume.
"""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict

from ckspace.core.vocab import Pipeline


@dataclass(frozen=True)
class PipelineFacts:
    """What ckspace knows of one CK Tile block pipeline, read off its headers: the class a kernel
    instantiates and the base it dispatches hot loop and tail through (``None``: no CK revision we
    know has one), and how it moves data -- ``stages`` global prefetch stages (the prologue fills
    them), ``buffers`` register buffers of global loads in flight (what hides the memory latency),
    whether it overlaps loads with MFMA at all, and whether its global loads go to LDS directly
    (async: no VGPR staging, no LDS write by the waves). The emitter and the CK-header probe read
    the names, the analytical performance model (:mod:`ckspace.features.performance`) the rest."""

    class_name: str | None
    base: str | None
    stages: int
    buffers: int
    overlaps: bool = True
    asynchronous: bool = False


PIPELINES: dict[Pipeline, PipelineFacts] = {
    Pipeline.BASIC_V1: PipelineFacts(
        "GemmPipelineAGmemBGmemCRegV1", "BaseGemmPipelineAGmemBGmemCRegV1", 1, 1, overlaps=False
    ),
    Pipeline.COMPV1: PipelineFacts(
        "GemmPipelineAGmemBGmemCRegV1", "BaseGemmPipelineAGmemBGmemCRegV1", 1, 1, overlaps=False
    ),
    Pipeline.BASIC_V2: PipelineFacts("GemmPipelineAGmemBGmemCRegV2", "BaseGemmPipelineAGmemBGmemCRegV2", 2, 1),
    Pipeline.COMPV2: PipelineFacts("GemmPipelineAGmemBGmemCRegV2", "BaseGemmPipelineAGmemBGmemCRegV2", 2, 1),
    # the mem pipeline's stages and buffers come from the tile: mem_stages
    Pipeline.MEM: PipelineFacts("GemmPipelineAgBgCrMem", "BaseGemmPipelineAgBgCrMem", 0, 0),
    Pipeline.COMPV3: PipelineFacts("GemmPipelineAgBgCrCompV3", "BaseGemmPipelineAgBgCrCompV3", 2, 1),
    Pipeline.COMPV4: PipelineFacts("GemmPipelineAgBgCrCompV4", "BaseGemmPipelineAgBgCrCompV4", 2, 1),
    Pipeline.COMPV5: PipelineFacts("GemmPipelineAgBgCrCompV5", "BaseGemmPipelineAgBgCrCompV5", 1, 1),
    Pipeline.COMPV6: PipelineFacts("GemmPipelineAgBgCrCompV6", "BaseGemmPipelineAgBgCrCompV6", 3, 2),
    Pipeline.COMP_ASYNC: PipelineFacts(
        "GemmPipelineAgBgCrCompAsync", "BaseGemmPipelineAgBgCrCompAsync", 2, 1, asynchronous=True
    ),
    Pipeline.BASIC_ASYNC_V1: PipelineFacts(
        "GemmPipelineAGmemBGmemCRegAsyncV1", "BaseGemmPipelineAGmemBGmemCRegV1", 1, 1, asynchronous=True
    ),
    Pipeline.WAVELET: PipelineFacts(None, None, 2, 1),
}
"""Every pipeline name's facts, from CK Tile's pipeline headers (``ck_tile/ops/gemm/pipeline/``:
the ``struct`` names; ``PrefetchStages`` and ``GlobalBufferNum`` of
``gemm_pipeline_ag_bg_cr_comp_v3..v6``, ``_comp_async``, ``_mem``, ``wp_pipeline_agmem_bgmem_creg_v2``
for wavelet; the ``agmem_bgmem_creg_v1`` pipeline loads, stores to LDS, synchronises and computes in
turn). The bases are those upstream's ``unified_grouped_conv_codegen.py`` launchers dispatch
through. A double LDS buffer is the config's ``double_smem_buffer``, not the pipeline's."""

PIPELINE_CLASSES: dict[Pipeline, str] = {p: f.class_name for p, f in PIPELINES.items() if f.class_name is not None}
"""The pipeline class of each pipeline name that has one (:data:`PIPELINES`' names; ``wavelet`` has
none in any CK revision we know)."""

PIPELINE_BASES: dict[Pipeline, str] = {p: f.base for p, f in PIPELINES.items() if f.base is not None}
"""The hot-loop / tail dispatch base of each pipeline name that has one (:data:`PIPELINES`' names)."""

MEM_IN_FLIGHT_BYTES = 32768
"""The mem pipeline sizes its prefetch to keep this many bytes in flight per CU (its
``MinMemInFlyBytes``), between 2 and 8 stages."""


def mem_stages(tile_m: int, tile_n: int, tile_k: int, elem: int, threads: int, warp_size: int) -> int:
    """The mem pipeline's prefetch stages (and global buffers) for a tile: CK Tile's
    ``FullMemBandPrefetchStages`` clamped to 2..8. A rule of CK's, stated beside the pipeline it
    belongs to because :data:`PIPELINES` cannot give the mem pipeline one number."""
    blocks_per_cu = max(1, 4 * warp_size // threads)
    need = -(-(MEM_IN_FLIGHT_BYTES // blocks_per_cu) // ((tile_m + tile_n) * elem * tile_k))
    return int(min(8, max(2, need)))


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
