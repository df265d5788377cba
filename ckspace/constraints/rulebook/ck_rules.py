"""What a CK revision cannot build, as named rules of predicate ``ck_revision``.

Each rule states a fact of the CK headers (a missing class, a static_assert, a kernel defect) as an
expression over config fields, with the header and lines it comes from and the revision features
(:class:`~ckspace.core.ck.CkRevision` fields) it reads. Applied to a space
(``Space.for_ck``) they say why a config is excluded for this CK; applied by ``emit`` they keep it
from writing a kernel its CK cannot compile.

This module keeps the table of contents (:func:`ck_rules`) and the families of what a revision
lacks or gets wrong; how its kernels load, transpose and store tiles (the vector-access
static_asserts) lives in :mod:`~ckspace.constraints.rulebook.ck_tile_io`, with the cell both read.
"""

from __future__ import annotations

from ckspace.constraints.language.expr import TRUE, Const, Field, Not, all_of, implies, in_table
from ckspace.constraints.language.rule import WARP, Rule
from ckspace.constraints.rulebook.ck_tile_io import (
    TILE_K,
    WARPS,
    CkCell,
    atomic_vector,
    epilogue_stores,
    feature,
    headers,
    operand_loads,
    wave_groups_transpose,
)
from ckspace.core.ck import CkRevision
from ckspace.core.vocab import Dtype, Epilogue, Pipeline, Predicate, Specialization, Variant

F = Field


def ck_rules(
    revision: CkRevision, variant: Variant, dtype: Dtype, arch: str | None = None, ndim: int | None = None
) -> tuple[Rule, ...]:
    """What ``revision`` cannot build, as rules of predicate ``ck_revision`` for one cell's variant
    and dtype, and where known its arch and ndim. The register transpose of row-major B /
    column-major A tiles is compiled only on archs without the LDS transpose load: with ``arch``
    None it is assumed, which only ever excludes more, and the wave size is
    :func:`~ckspace.core.arch.warp_size_of`'s for no arch. ``ck_bwd_weight_1d`` needs ``ndim`` (not
    a config field) and folds to TRUE without it.

    A rule folds to TRUE where the revision has the feature, keeping its name (as the space's
    other rules do), so callers can list every revision rule and see which ones bite.

    The rules of a revision's cell are built once per process (:data:`_BUILT`): a target's listing
    asks for every cell, and the ndims of a variant and dtype get the very same rules (only
    ``ck_bwd_weight_1d`` reads the ndim, and only whether it is 1), which its passes then group by
    identity rather than by comparing expressions.
    """
    key = (id(revision), variant, dtype, arch, ndim == 1)
    built = _BUILT.get(key)
    if built is not None and built[0] is revision:
        return built[1]
    ck = CkCell(revision, variant, dtype, arch, ndim)
    rules = (
        *_missing_features(ck),
        *_kernel_calls(ck),
        *_kernel_defects(ck),
        *operand_loads(ck),
        atomic_vector(ck),
        _padding(ck),
        wave_groups_transpose(ck),
        *epilogue_stores(ck),
    )
    if len(_BUILT) >= _BUILT_LIMIT:
        _BUILT.clear()
    _BUILT[key] = (revision, rules)
    return rules


_BUILT: dict[tuple[int, Variant, Dtype, str | None, bool], tuple[CkRevision, tuple[Rule, ...]]] = {}
"""Rules built, by the revision's identity and what of the cell they read; each entry holds its
revision, so the identity cannot pass to another object while the entry lives."""
_BUILT_LIMIT = 256
"""Entries kept at most (every cell of every arch of a few revisions), then the memo starts over."""


def _missing_features(ck: CkCell) -> tuple[Rule, ...]:
    """Pipelines, kernel modes and warp GEMMs this CK does not have."""
    revision, variant, dtype = ck.revision, ck.variant, ck.dtype
    missing = [p.code for p in Pipeline if p.value not in revision.pipelines]
    return (
        ck.rule(
            "ck_pipeline",
            Not(F("pipeline").isin(missing)) if missing else TRUE,
            "the pipeline's class and dispatch base exist in this CK: " + (", ".join(revision.pipelines) or "none"),
            reads=["pipelines"],
        ),
        ck.rule(
            "ck_streamk",
            TRUE if revision.streamk_conv else F("streamk_enabled").eq(0),
            "this CK's grouped-conv kernels take no stream-K partitioner",
            reads=["streamk_conv"],
        ),
        ck.rule(
            "ck_explicit_gemm",
            TRUE if revision.explicit_gemm else F("explicit_gemm").eq(0),
            "this CK's GroupedConvTraits has no explicit-GEMM parameter",
            reads=["explicit_gemm"],
        ),
        ck.rule(
            "ck_split_image",
            TRUE if variant.value in revision.split_image_variants else F("split_image").eq(0),
            f"this CK's {variant.value} kernel has no split-image mode",
            reads=["split_image_variants"],
        ),
        ck.rule(
            "ck_groups_to_merge",
            TRUE if variant.value in revision.merge_groups_variants else F("num_groups_to_merge").eq(1),
            f"this CK's {variant.value} kernel does not merge groups: at most it passes NumGroupsToMerge to "
            "its transformer (forward), whose merged descriptors then disagree with the kernel's per-group "
            "GemmM/GemmN, GemmBatch and group strides; only a kernel that sets NumGroupsPerBatch from it "
            "(bwd_weight) merges",
            "ops/grouped_convolution/kernel/grouped_convolution_forward_kernel.hpp 26-33, 97-103, 189-195; "
            "grouped_convolution_backward_weight_kernel.hpp 88",
            reads=["merge_groups_variants"],
        ),
        ck.rule(
            "ck_two_stage",
            TRUE if revision.two_stage or variant is not Variant.BWD_WEIGHT else F("two_stage").eq(0),
            "this CK lacks the element-wise convert kernel of the two-stage bwd_weight",
            reads=["two_stage"],
        ),
        ck.rule(
            "ck_warp_gemm",
            in_table(WARP, revision.warp_gemms.get(dtype.value, ())),
            f"this CK's warp-GEMM dispatcher has a {dtype.value} warp tile (m, n, k) in "
            f"{list(revision.warp_gemms.get(dtype.value, ()))}",
            reads=[f"warp_gemms.{dtype.value}"],
        ),
    )


def _kernel_calls(ck: CkCell) -> tuple[Rule, ...]:
    """How the grouped-conv kernels instantiate their epilogue and call their pipeline."""
    single, double = ck.revision.single_lds_pipelines, ck.revision.double_lds_pipelines
    return (
        ck.rule(
            "ck_epilogue",
            F("epilogue").eq(Epilogue.CSHUFFLE.code),
            "grouped-conv kernels are emitted with the CShuffle epilogue only",
        ),
        ck.rule(
            "ck_pipeline_call",
            all_of(
                implies(F("double_smem_buffer").eq(0), F("pipeline").isin(Pipeline.codes_of(single))),
                implies(F("double_smem_buffer").eq(1), F("pipeline").isin(Pipeline.codes_of(double))),
            ),
            "the grouped-conv kernels call GemmPipeline{}(a_window, b_window, num_loop, p_smem) with plain "
            "(non-tuple) windows, or (..., p_smem_0, p_smem_1) with the double LDS buffer; pipelines with the "
            f"first overload: {', '.join(single) or 'none'}; with the second: {', '.join(double) or 'none'} "
            "(compv6 declares the plain-window overload only with element functions, so no grouped-conv kernel "
            "can call it)",
            "ops/grouped_convolution/kernel/grouped_convolution_forward_kernel.hpp 887-888 and 944-945, "
            "grouped_convolution_backward_data_kernel.hpp 883-884 and 934, "
            "grouped_convolution_backward_weight_kernel.hpp 812-813 and 862; "
            "ops/gemm/pipeline/gemm_pipeline_ag_bg_cr_comp_v6.hpp 706-767 (no 4-argument plain-window "
            "overload; compare comp_v5.hpp 450-465, comp_v3.hpp 766-781)",
            reads=["single_lds_pipelines", "double_lds_pipelines"],
        ),
    )


def _kernel_defects(ck: CkCell) -> tuple[Rule, ...]:
    """Defects of one kernel, pipeline or transformer of this CK, each excluding a family of
    configs whatever their tile arithmetic."""
    revision, variant = ck.revision, ck.variant
    return (
        ck.rule(
            "ck_bwd_data_double_lds",
            F("double_smem_buffer").eq(0)
            if variant is Variant.BWD_DATA and revision.bwd_data_double_lds_broken
            else TRUE,
            "this CK's bwd_data kernel computes its loop count in the two-LDS path (RunGemm2LDS) with "
            "gemm_tile_windows.at(I0).get_length(I1), a member tile windows do not have: no bwd_data kernel "
            "with the double LDS buffer compiles (family excluded: the defect is in the kernel)",
            "ops/grouped_convolution/kernel/grouped_convolution_backward_data_kernel.hpp 926-927",
            reads=["bwd_data_double_lds_broken"],
        ),
        ck.rule(
            "ck_compv5_ping_pong",
            implies(
                F("pipeline").eq(Pipeline.COMPV5.code),
                all_of(WARPS >= 2, (TILE_K % ((WARPS // 2) * F("warp_tile_k"))).eq(0)),
            )
            if revision.compv5_ping_pong
            else TRUE,
            "compv5 splits the waves into two ping-pong halves: it static_asserts "
            "tile_k % ((waves / 2) x warp_tile_k) == 0, which with one wave divides by zero",
            "ops/gemm/pipeline/gemm_pipeline_ag_bg_cr_comp_v5.hpp 99-100, 158-160",
            reads=["compv5_ping_pong"],
        ),
        ck.rule(
            "ck_specialization",
            F("specialization").eq(Specialization.DEFAULT.code)
            if variant.value in revision.broken_specialization_variants
            else TRUE,
            f"this CK's {variant.value} kernel declares NDimSpatial = GroupedConvTraitsType_::NDimSpatial_, a "
            "member GroupedConvTraits lacks (it has NDimSpatial); only IsSupportedArgument's specialization "
            "branches use it, so every non-default specialization fails to compile (the whole family is "
            "excluded because the defect is in the kernel, not in a config value)",
            "ops/grouped_convolution/kernel/grouped_convolution_backward_data_kernel.hpp 510 (used 619, 635, "
            "653), grouped_convolution_backward_weight_kernel.hpp 369 (used 529, 545, 563), "
            "utils/grouped_convolution_utils.hpp 94",
            reads=["broken_specialization_variants"],
        ),
        ck.rule(
            "ck_bwd_weight_1d",
            Const(0) if variant is Variant.BWD_WEIGHT and revision.bwd_weight_1d_transposed and ck.ndim == 1 else TRUE,
            "this CK's 1D bwd_weight output descriptor is (K, N*Wo) and is used as (GemmK, GemmM), so the "
            "kernel's GemmM = N*Wo and GemmK = K disagree with B (K = N*Wo) and C (M = K): it compiles but "
            "does not compute the weight gradient (2D/3D use (N*Ho*Wo, K)); excluded as a family because the "
            "defect is in the transformer",
            "ops/grouped_convolution/utils/transform_conv_bwd_weight_to_gemm.hpp 412-434, 835; "
            "kernel/grouped_convolution_backward_weight_kernel.hpp 84-100",
            reads=["bwd_weight_1d_transposed"],
        ),
    )


def _padding(ck: CkCell) -> Rule:
    return ck.rule(
        "ck_padding",
        all_of(F("pad_m").eq(1), F("pad_n").eq(1), F("pad_k").eq(1)),
        "every grouped-conv kernel static_asserts GemmPipeline::kPadM && kPadN && kPadK: the implicit GEMM's "
        "M, N and K are padded whatever the problem (found by `ckspace probe` on rule set open, where the "
        "pads range over both values)",
        "ops/grouped_convolution/kernel/grouped_convolution_forward_kernel.hpp 482-483, "
        "grouped_convolution_backward_data_kernel.hpp 549-550, grouped_convolution_backward_weight_kernel.hpp "
        "405-406",
    )


def depthwise_note(revision: CkRevision) -> str:
    """Why depthwise configs are not emitted (stated in the manifest, never silent)."""
    if revision.depthwise:
        return "this CK has a depthwise kernel, but ckspace emits GEMM kernels only: depthwise configs skipped"
    return "this CK has no direct depthwise convolution kernel: depthwise configs skipped"


def ck_depthwise_rules(revision: CkRevision) -> tuple[Rule, ...]:
    """Depthwise configs are never emitted: one rule that excludes them all, saying why."""
    return (
        Rule(
            "ck_depthwise",
            Predicate.CK_REVISION,
            Const(0),
            depthwise_note(revision),
            headers(revision),
            reads=(feature(revision, "depthwise"),),
        ),
    )
