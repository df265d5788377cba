"""How a CK revision's kernels move tiles, as ``ck_revision`` rules: the DRAM load pattern of A and
B, their register transpose, and the epilogue's stores of C (plus the cell those rules and
:mod:`~ckspace.constraints.rulebook.ck_rules` read).

Split from :mod:`~ckspace.constraints.rulebook.ck_rules` along its widest seam: these families all state
static_asserts of the tile distribution pattern and of ``transpose_tile2d`` for vector accesses,
sharing their pattern arithmetic, while ``ck_rules`` keeps what a revision lacks or gets wrong
and the table of contents. The cell (:class:`CkCell`, with :func:`headers` and :func:`feature`)
sits here, below ``ck_rules``, so both modules build rules the same way without an import cycle.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from functools import cached_property

from ckspace.constraints.language.expr import TRUE, Const, Expr, Field, Not, all_of, any_of, implies
from ckspace.constraints.language.rule import TILE, Rule, TableValue
from ckspace.core.arch import element_size, warp_size_of
from ckspace.core.ck import CkRevision
from ckspace.core.vocab import Dtype, Pipeline, Predicate, Variant
from ckspace.workloads.operands import OPERANDS

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


@dataclass(frozen=True)
class CkCell:
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


def operand_loads(ck: CkCell) -> tuple[Rule, ...]:
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


def _shuffle_vector(ck: CkCell, op: str, transposed: bool, vec: Expr, x: Expr) -> Rule:
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


def atomic_vector(ck: CkCell) -> Rule:
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


def wave_groups_transpose(ck: CkCell) -> Rule:
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


def epilogue_stores(ck: CkCell) -> tuple[Rule, ...]:
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
