"""What a CK revision cannot build, as named rules of predicate ``ck_revision``.

Each rule states a fact of the CK headers (a missing class, a static_assert, a kernel defect) as an
expression over config fields, with the header and lines it comes from and the revision features
(:class:`~ckspace.core.ck.CkRevision` fields) it reads. Applied to a space
(``Space.for_ck``) they say why a config is excluded for this CK; applied by ``emit`` they keep it
from writing a kernel its CK cannot compile.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from functools import cached_property

from ckspace.constraints.expr import TRUE, Const, Expr, Field, Not, all_of, any_of, implies, in_table
from ckspace.constraints.rule import TILE, WARP, Rule, TableValue
from ckspace.core.arch import element_size, warp_size_of
from ckspace.core.ck import CkRevision
from ckspace.core.operands import OPERANDS
from ckspace.core.vocab import Dtype, Epilogue, Pipeline, Predicate, Specialization, Variant

F = Field
TILE_M, TILE_N, TILE_K = TILE
WARPS = F("wave_m") * F("wave_n") * F("wave_k")
"""The waves of a block."""

POLICY = "ck_tile/ops/gemm/pipeline/gemm_universal_pipeline_ag_bg_cr_policy.hpp"
PATTERN = "ck_tile/core/algorithm/static_encoding_pattern.hpp"


def auto_vector_sizes(element_bytes: int) -> tuple[int, ...]:
    """The vector sizes ``GetGlobalVectorLoadSize`` tries, largest first (policy 346-391), for a
    non-packed type: 16, 8, 4 and 2 bytes (the last two only for elements at least that wide)."""
    sizes = [16 // element_bytes, 8 // element_bytes]
    sizes += [4 // element_bytes] if element_bytes >= 4 else []
    sizes += [2 // element_bytes] if element_bytes >= 2 else []
    return tuple(dict.fromkeys(v for v in [*sizes, 1] if v >= 1))


def _auto_vector_is(value: int, candidates: tuple[int, ...], x: Expr, per_thread: Expr) -> Expr:
    """``GetGlobalVectorLoadSize`` returns ``value``: the first candidate dividing both the contiguous
    tile extent and the elements per thread."""

    def fits(v: int) -> Expr:
        return all_of((x % v).eq(0), (per_thread % v).eq(0))

    earlier = [fits(v) for v in candidates[: candidates.index(value)]]
    return all_of(fits(value), *(Not(e) for e in earlier)) if earlier else fits(value)


def _load_pattern(y: Expr, x: Expr, vec: Expr, warps: Expr, warp_size: int) -> Expr:
    """The static_asserts of ``tile_distribution_encoding_pattern_2d`` (thread- and warp-raked alike)
    for a Y x X tile read with ``vec``-wide loads by ``warps`` waves in the config's wave groups:
    X % vec == 0; with X1 = min(vec, X*Y/threads) and X0 = X/X1, X0 divides the wave; the Y split
    covers Y exactly."""
    threads = warps * warp_size
    largest = x * y // threads

    def with_x1(x1: Expr) -> Expr:
        x0 = x // x1
        y1 = Const(warp_size) // x0
        y0 = warps // F("num_wave_groups")
        return all_of(x1 >= 1, (x0 * y1).eq(warp_size), y0 * y1 >= 1, (y % (y0 * y1)).eq(0))

    return all_of(
        (x % vec).eq(0), any_of(all_of(vec <= largest, with_x1(vec)), all_of(vec > largest, with_x1(largest)))
    )


def headers(revision: CkRevision) -> str:
    """``CK headers <label>``: how a rule names the revision it comes from and reads."""
    return f"CK headers {revision.label}"


def feature(revision: CkRevision, path: str) -> TableValue:
    """The feature of ``revision`` at ``path`` (``pipelines``, ``warp_gemms.bf16``) as a value a rule
    reads; a key a feature's table lacks reads as empty, as the rules treat it."""
    name, *keys = path.split(".")
    value = getattr(revision, name)
    for key in keys:
        value = value.get(key, ())
    return TableValue(headers(revision), path, value)


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
    """
    ck = _CkCell(revision, variant, dtype, arch, ndim)
    return (
        *_missing_features(ck),
        *_kernel_calls(ck),
        *_kernel_defects(ck),
        *_operand_loads(ck),
        _atomic_vector(ck),
        _padding(ck),
        _wave_groups_transpose(ck),
        *_epilogue_stores(ck),
    )


@dataclass(frozen=True)
class _CkCell:
    """One cell as a CK revision sees it: what the families of its ``ck_revision`` rules read."""

    revision: CkRevision
    variant: Variant
    dtype: Dtype
    arch: str | None
    ndim: int | None

    @cached_property
    def warp_size(self) -> int:
        return warp_size_of(self.arch)

    @property
    def a_layout(self) -> str:
        return OPERANDS[self.variant].a_layout

    @property
    def b_layout(self) -> str:
        return OPERANDS[self.variant].b_layout

    @cached_property
    def shuffling(self) -> list[str]:
        """The pipelines that transpose a column-major A / row-major B tile in registers
        (``transpose_tile2d``) here: some always, others only on archs without the LDS transpose
        load, which with no arch is assumed."""
        revision = self.revision
        shuffling = list(revision.shuffle_always)
        if self.arch is None or self.arch not in revision.load_tr_archs:
            shuffling += revision.shuffle_without_load_tr
        return shuffling

    def rule(self, name: str, expr: Expr, text: str, where: str = "", reads: Iterable[str] = ()) -> Rule:
        """A rule of predicate ``ck_revision``: ``where`` in the headers, ``reads`` the revision's
        features it reads."""
        source = headers(self.revision)
        return Rule(
            name,
            Predicate.CK_REVISION,
            expr,
            text,
            f"{source}: {where}" if where else source,
            reads=tuple(feature(self.revision, f) for f in reads),
        )


def _missing_features(ck: _CkCell) -> tuple[Rule, ...]:
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


def _kernel_calls(ck: _CkCell) -> tuple[Rule, ...]:
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


def _kernel_defects(ck: _CkCell) -> tuple[Rule, ...]:
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


def _operand_loads(ck: _CkCell) -> tuple[Rule, ...]:
    """How A and B are read from DRAM: the tile distribution pattern of each load, and the
    register transpose of a column-major A / row-major B tile."""
    a_layout, b_layout = ck.a_layout, ck.b_layout
    # (Y, X) of the tile each operand is loaded as from DRAM (policy MakeA/BDramTileDistribution).
    a_tile = (TILE_M, TILE_K) if a_layout == "row" else (TILE_K, TILE_M)
    b_tile = (TILE_N, TILE_K) if b_layout == "col" else (TILE_K, TILE_N)
    return (
        ck.rule(
            "ck_load_pattern_a",
            _load_pattern(*a_tile, F("vec_a"), WARPS, ck.warp_size),
            f"A is read as a {'tile_m x tile_k' if a_layout == 'row' else 'tile_k x tile_m'} tile with vec_a "
            "loads: the tile distribution pattern static_asserts X % vec == 0, X0 = X / min(vec, X*Y/threads) "
            "divides the wave and the rows split evenly over the waves",
            f"{PATTERN} 148-166 (thread raked), 232-246 (warp raked); {POLICY} 527-563",
        ),
        ck.rule(
            "ck_load_pattern_b",
            _load_pattern(*b_tile, F("vec_b"), WARPS, ck.warp_size),
            f"B is read as a {'tile_n x tile_k' if b_layout == 'col' else 'tile_k x tile_n'} tile with vec_b "
            "loads: the same pattern static_asserts as for A",
            f"{PATTERN} 148-166, 232-246; {POLICY} 565-600",
        ),
        _shuffle_vector(ck, "A", a_layout == "col", F("vec_a"), TILE_M),
        _shuffle_vector(ck, "B", b_layout == "row", F("vec_b"), TILE_N),
    )


def _shuffle_vector(ck: _CkCell, op: str, transposed: bool, vec: Expr, x: Expr) -> Rule:
    """The register transpose of operand ``op`` (when its layout makes one): the DRAM distribution
    and the shuffled one must agree on the vector size."""
    name = f"ck_shuffle_vector_{op.lower()}"
    features = ("shuffle_auto_vector", "shuffle_always", "shuffle_without_load_tr", "load_tr_archs")
    shuffling = ck.shuffling
    if not (transposed and ck.revision.shuffle_auto_vector and shuffling):
        return ck.rule(name, TRUE, f"no register transpose of {op} here", reads=features)
    candidates = auto_vector_sizes(element_size(ck.dtype))
    per_thread = x * TILE_K // (WARPS * ck.warp_size)
    largest = per_thread  # LargestVec of the pattern: the tile's elements per thread
    same = any_of(
        *(
            all_of(
                _auto_vector_is(v, candidates, x, per_thread), any_of(vec.eq(v), all_of(vec > largest, largest.eq(v)))
            )
            for v in candidates
        )
    )
    extent = "m" if op == "A" else "n"
    return ck.rule(
        name,
        implies(F("pipeline").isin(Pipeline.codes_of(shuffling)), same),
        f"{'column-major A' if op == 'A' else 'row-major B'} is transposed in registers by "
        f"{', '.join(shuffling)}: transpose_tile2d static_asserts that the DRAM distribution (built "
        f"with vec_{op.lower()}) and the shuffled one (built with the policy's own vector size, the "
        f"first of {list(candidates)} dividing both tile_{extent} and "
        f"tile_{extent} x tile_k / threads) are transposes: "
        f"min(vec_{op.lower()}, tile_{extent} x tile_k / threads) must equal that size",
        "core/tensor/transpose_tile.hpp 219-228 (static_assert), "
        f"{POLICY} 565-600 (DRAM: Problem::VectorSize{op} under FixedVectorSize), "
        f"603-643 (shuffled: GetVectorSize{op}<Problem>()), 395-450 and 346-391 (its value), "
        f"{PATTERN} 134-200 (X1 = min(VecSize, LargestVec)); pipelines/*: "
        "if constexpr(is_b_row_major && !is_b_load_tr_v()), gemm_pipeline_ag_bg_cr_base.hpp 28-34",
        reads=features,
    )


def _atomic_vector(ck: _CkCell) -> Rule:
    """The split-K atomic_add epilogue the bwd_weight launcher also instantiates."""
    if ck.variant is not Variant.BWD_WEIGHT:  # only bwd_weight launchers instantiate atomic_add (split-K)
        atomic_vector: Expr = TRUE
    elif ck.dtype is Dtype.FP32:
        atomic_vector = F("vec_c").isin([1, 2, 4])
    else:
        atomic_vector = all_of(
            implies(F("two_stage").eq(1), F("vec_c").isin([1, 2, 4])),
            implies(F("two_stage").eq(0), any_of((F("vec_c") % 2).eq(1), F("vec_c").isin([2, 4, 8]))),
        )
    return ck.rule(
        "ck_atomic_vector",
        atomic_vector,
        "the bwd_weight launcher also instantiates the atomic_add epilogue (split-K, k_batch > 1); its "
        "buffer atomic of vec_c elements exists for float only with vec_c in {1, 2, 4} (an fp32 dtype, "
        "or the fp32 workspace of two-stage) and for fp16/bf16 with vec_c in {2, 4, 8} (odd vec_c: the "
        "kernels compile that body out)",
        "core/arch/amd_buffer_addressing.hpp 2277-2281 (static_assert 'wrong! not implemented'); "
        "kernel/grouped_convolution_backward_weight_kernel.hpp 902-904 (odd vec_c compiled out)",
    )


def _padding(ck: _CkCell) -> Rule:
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


def _wave_groups_transpose(ck: _CkCell) -> Rule:
    """The register transpose (:func:`_shuffle_vector`) with two wave groups."""
    shuffling, a_layout, b_layout = ck.shuffling, ck.a_layout, ck.b_layout
    return ck.rule(
        "ck_wave_groups_transpose",
        implies(F("pipeline").isin(Pipeline.codes_of(shuffling)), F("num_wave_groups").eq(1))
        if shuffling and (a_layout == "col" or b_layout == "row")
        else TRUE,
        f"with two wave groups, the register transpose of {'column-major A' if a_layout == 'col' else 'row-major B'} "
        f"({', '.join(shuffling)}) reads its input vectors at offsets that are not multiples of the vector "
        "length: transpose_tile2d static_asserts in_offset % vec_length_in == 0 (found by `ckspace probe` on "
        "rule set open: bwd_data compv3 112x64x32 1x2x1 16x16x32 vec1_8_1 with 2 wave groups fails, the same "
        "config with 1 compiles; CK pairs two wave groups only with compv5 on forward, which transposes nothing)",
        "core/tensor/transpose_tile.hpp 147-160 (static_assert), "
        f"{PATTERN} 168-201 (the wave-group distributions); {POLICY} 603-643; example/ck_tile/"
        "20_grouped_convolution/conv_configs.hpp 190-207",
        reads=("shuffle_always", "shuffle_without_load_tr", "load_tr_archs"),
    )


def _epilogue_stores(ck: _CkCell) -> tuple[Rule, ...]:
    """How the CShuffle epilogue stores C: an (MPerIterationShuffle x NPerIterationShuffle) tile with
    vec_c-wide stores over wave_m x wave_n waves (its kBlockSize has no wave_k): N is warp_tile_n x
    wave_n, M is warp_tile_m x wave_m times the XDL tiles one shuffle gathers, unless that does not
    divide tile_m."""
    warp_size = ck.warp_size
    e_per_thread = F("warp_tile_m") * F("warp_tile_n") // warp_size
    base_m = F("warp_tile_m") * F("wave_m")
    gathered = F("vec_c") // e_per_thread
    per_block = TILE_M // base_m

    def store(m_tiles: Expr) -> Expr:
        m_val = base_m * m_tiles
        width = F("warp_tile_n") * F("wave_n")
        waves = F("wave_m") * F("wave_n")
        return any_of(
            all_of((TILE_M % m_val).eq(0), _load_pattern(m_val, width, F("vec_c"), waves, warp_size)),
            all_of((TILE_M % m_val).ne(0), _load_pattern(base_m, width, F("vec_c"), waves, warp_size)),
        )

    pattern = any_of(
        all_of(e_per_thread >= F("vec_c"), store(Const(1))),
        all_of(e_per_thread < F("vec_c"), gathered <= per_block, store(gathered)),
        all_of(e_per_thread < F("vec_c"), gathered > per_block, store(per_block)),
    )
    return (
        ck.rule(
            "ck_epilogue_pattern",
            pattern,
            "the CShuffle epilogue stores C as an MPerIterationShuffle x NPerIterationShuffle tile (N: warp_tile_n x "
            "wave_n; M: warp_tile_m x wave_m times min(vec_c / elements per thread, tile_m / (warp_tile_m x wave_m)) "
            "when vec_c exceeds the warp tile's elements per thread and that divides tile_m, else times 1) with "
            "vec_c-wide stores by wave_m x wave_n waves: the tile distribution pattern's static_asserts as for A and "
            "B (found by `ckspace probe` on rule set open: vec_c = 1 with warp_tile_n x wave_n = 128 > the wave)",
            "ops/epilogue/cshuffle_epilogue.hpp 49 (kBlockSize), 151-156 (FixedVectorSize), 206-249 "
            f"(MNPerIterationShuffle), 641-647; {PATTERN} 148-166",
        ),
        ck.rule(
            "ck_epilogue_shuffle",
            implies(
                F("vec_c") > e_per_thread,
                all_of((TILE_M % (F("warp_tile_m") * F("wave_m"))).eq(0), (TILE_M % gathered).eq(0)),
            ),
            "CShuffleEpilogue (row-major E): when vec_c exceeds the warp tile's elements per thread "
            "(warp_tile_m x warp_tile_n / wave size), tile_m must be a multiple of warp_tile_m x wave_m and of "
            "vec_c / that count",
            "ops/epilogue/cshuffle_epilogue.hpp 209-224",
        ),
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
