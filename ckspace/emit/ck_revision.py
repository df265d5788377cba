"""Which CK Tile headers are in use, what that revision offers, and the rules for what it lacks.

CK's grouped-convolution API changes between releases (template parameters appear, pipelines and
traits come and go). The revision is read from the headers themselves -- never assumed from a
version string -- as a set of *features*, each probed by a fact a compile depends on (a class that
exists, a template parameter that is declared). What a revision lacks becomes ``Rule`` objects of
predicate ``ck_revision``, so the space can say why a config is excluded for this CK and ``emit``
never writes a kernel its CK cannot compile.
"""

from __future__ import annotations

import hashlib
import importlib.util
import logging
import os
import re
from collections.abc import Iterable
from functools import cache
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from ckspace.constraints.expr import TRUE, Const, Expr, Field, Not, all_of, any_of, implies, in_table
from ckspace.constraints.rules import Rule
from ckspace.errors import CkspaceError
from ckspace.space.arch import arch_facts, element_size
from ckspace.space.vocab import Dtype, Epilogue, Pipeline, Specialization, Variant

log = logging.getLogger(__name__)

F = Field
WARP = (F("warp_tile_m"), F("warp_tile_n"), F("warp_tile_k"))
CONV_DIR = Path("ck_tile/ops/grouped_convolution")
PIPELINE_DIR = Path("ck_tile/ops/gemm/pipeline")
WARP_DIR = Path("ck_tile/ops/gemm/warp")
MARKER = CONV_DIR.parent / "grouped_convolution.hpp"

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
"""The base class a grouped-conv launcher dispatches hot loop and tail through (EMIT.md)."""

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

KNOWN_REVISIONS: dict[str, str] = {
    "8584972ba06fd07fa50485012614e38c42ae6e297a504084c8ddde5db8545469":
        "amd-aiter 0.1.7.post2.dev18 (CK 2025-11-18)",
}
"""Fingerprint -> label of the revisions the emitted code has been compiled against (verified)."""


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

    def summary(self) -> dict[str, object]:
        return self.model_dump(mode="json")


def _aiter_include() -> Path | None:
    spec = importlib.util.find_spec("aiter_meta")
    if spec is None or not spec.submodule_search_locations:
        return None
    for location in spec.submodule_search_locations:
        candidate = Path(location) / "3rdparty" / "composable_kernel" / "include"
        if (candidate / MARKER).is_file():
            return candidate
    return None


def _include_dir(root: Path) -> Path | None:
    """``root`` itself if it holds ``ck_tile/``, else ``root/include``."""
    for candidate in (root, root / "include"):
        if (candidate / MARKER).is_file():
            return candidate
    return None


def locate_ck(ck_root: str | os.PathLike[str] | None = None) -> Path:
    """The CK include directory: ``ck_root``, ``$CK_ROOT``, the ROCm include dir, the amd-aiter wheel.

    An explicit ``ck_root`` or ``$CK_ROOT`` that holds no CK Tile headers is an error rather than a
    silent fall-through, so a typo cannot select a different CK.
    """
    looked: list[str] = []
    for source, value in (("--ck-root", ck_root), ("CK_ROOT", os.environ.get("CK_ROOT"))):
        if value:
            found = _include_dir(Path(value))
            if found is None:
                raise CkspaceError(f"{source} {value!r} holds no {MARKER} (nor include/{MARKER})")
            return found.resolve()
    rocm = [os.environ.get("ROCM_PATH"), "/opt/rocm"]
    for value in rocm:
        if value:
            looked.append(f"{value}/include")
            found = _include_dir(Path(value) / "include")
            if found is not None:
                return found.resolve()
    looked.append("the amd-aiter wheel (aiter_meta/3rdparty/composable_kernel/include)")
    found = _aiter_include()
    if found is not None:
        return found.resolve()
    raise CkspaceError("no CK Tile headers found; looked at --ck-root, CK_ROOT, " + ", ".join(looked)
                       + " (scripts/install-toolchain-gfx942.sh installs them)")


def _read(include: Path, relative: Path | str) -> str:
    path = include / relative
    return path.read_text(encoding="utf-8", errors="replace") if path.is_file() else ""


WARP_GEMM_DTYPES = {"float": Dtype.FP32, "ck_tile::half_t": Dtype.FP16, "ck_tile::bf16_t": Dtype.BF16}
_WARP_GEMM = re.compile(r"struct WarpGemmDispatcher<\s*([\w:]+),\s*\1,\s*float,\s*(\d+),\s*(\d+),\s*(\d+),\s*false\s*>")


def _warp_gemms(include: Path) -> dict[str, tuple[tuple[int, int, int], ...]]:
    text = _read(include, "ck_tile/ops/gemm/warp/warp_gemm_dispatcher.hpp")
    found: dict[str, list[tuple[int, int, int]]] = {d.value: [] for d in Dtype}
    for match in _WARP_GEMM.finditer(text):
        dtype = WARP_GEMM_DTYPES.get(match.group(1))
        if dtype is not None:
            found[dtype.value].append((int(match.group(2)), int(match.group(3)), int(match.group(4))))
    return {d: tuple(sorted(set(t))) for d, t in found.items()}


_DECL = re.compile(r"CK_TILE_DEVICE\s+auto\s+operator\(\)\s*\(([^)]*)\)")


def _param_kind(param: str) -> str:
    name = param.split("&")[-1].split("*")[-1].split()[-1] if param.strip() else ""
    if "dram_block_window" in name:
        return "window"
    if name == "num_loop":
        return "num_loop"
    if param.lstrip().startswith("void*"):
        return "smem"
    return name


def _call_forms(text: str) -> set[int]:
    """Numbers of LDS pointers of the plain-window ``operator()(a, b, num_loop, smem...)`` overloads
    declared in ``text`` (one pipeline's header). An overload restricted to tuples of windows by its
    ``enable_if`` does not accept the single windows the grouped-conv kernels pass."""
    forms: set[int] = set()
    for match in _DECL.finditer(text):
        kinds = [_param_kind(p) for p in match.group(1).split(",")]
        head = text[:match.start()].rsplit("template", 1)[-1]
        tuple_only = "is_detected<is_tuple" in head and "!is_detected<is_tuple" not in head
        following = _DECL.search(text, match.end())
        body = text[match.end():following.start() if following else len(text)]
        # The pipeline implementations take tuples of windows: a plain-window overload works only if
        # it wraps them (comp_async's forwards the bare windows and cannot be instantiated).
        wraps = "make_tuple(a_dram_block_window_tmp" in body
        if (not tuple_only and wraps and kinds[:3] == ["window", "window", "num_loop"]
                and set(kinds[3:]) == {"smem"}):
            forms.add(len(kinds) - 3)
    return forms


def _pipeline_texts(include: Path) -> dict[Pipeline, str]:
    """Each pipeline's own header (the one defining its class)."""
    out: dict[Pipeline, str] = {}
    for path in sorted((include / PIPELINE_DIR).glob("*.hpp")):
        text = path.read_text(encoding="utf-8", errors="replace")
        for pipeline, cls in PIPELINE_CLASSES.items():
            if re.search(rf"\bstruct {cls}\b\s*(:|\{{)", text):
                out.setdefault(pipeline, text)
    return out


def _load_tr_archs(include: Path) -> tuple[str, ...]:
    base = _read(include, PIPELINE_DIR / "gemm_pipeline_ag_bg_cr_base.hpp")
    match = re.search(r"#if\s+([^\n]*)\n\s*static constexpr bool is_a_load_tr\s*=\s*std::is_same_v", base)
    return tuple(sorted(re.findall(r"__(gfx\w+)__", match.group(1)))) if match else ()


def _shuffle_auto_vector(include: Path) -> bool:
    policy = _read(include, PIPELINE_DIR / "gemm_universal_pipeline_ag_bg_cr_policy.hpp")
    out = True
    for op in ("A", "B"):
        dram = policy[policy.find(f"Make{op}DramTileDistribution"):]
        shuffled = policy[policy.find(f"MakeShuffled{op}RegTileDistribution"):]
        dram, shuffled = dram[:dram.find("return")], shuffled[:shuffled.find("return")]
        out &= (f"Problem::VectorSize{op}" in dram and f"GetVectorSize{op}<Problem>()" in shuffled
                and "FixedVectorSize" not in shuffled)
    return out


def _fingerprint(include: Path) -> str:
    """sha256 over the grouped-convolution and GEMM-pipeline headers (names and contents)."""
    digest = hashlib.sha256()
    for folder in (CONV_DIR, PIPELINE_DIR, WARP_DIR):
        for path in sorted((include / folder).rglob("*.hpp")):
            digest.update(str(path.relative_to(include)).encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()


@cache
def detect_revision(include_dir: str) -> CkRevision:
    """Probe the headers under ``include_dir`` (a result of :func:`locate_ck`)."""
    include = Path(include_dir)
    pipeline_text = "\n".join(p.read_text(encoding="utf-8", errors="replace")
                              for p in sorted((include / PIPELINE_DIR).glob("*.hpp")))
    classes = {p for p, cls in PIPELINE_CLASSES.items() if re.search(rf"\bstruct {cls}\b", pipeline_text)}
    bases = {p for p, base in PIPELINE_BASES.items() if re.search(rf"\bstruct {base}\b", pipeline_text)}
    pipelines = tuple(p.value for p in Pipeline if p in classes and p in bases)
    utils = _read(include, CONV_DIR / "utils/grouped_convolution_utils.hpp")
    traits = utils[utils.find("struct GroupedConvTraits"):] if "struct GroupedConvTraits" in utils else ""
    traits_head = utils[:utils.find("struct GroupedConvTraits")].rsplit("template", 1)[-1] if traits else ""
    kernels = {
        Variant.FORWARD: _read(include, CONV_DIR / "kernel/grouped_convolution_forward_kernel.hpp"),
        Variant.BWD_DATA: _read(include, CONV_DIR / "kernel/grouped_convolution_backward_data_kernel.hpp"),
        Variant.BWD_WEIGHT: _read(include, CONV_DIR / "kernel/grouped_convolution_backward_weight_kernel.hpp"),
    }
    elementwise = _read(include, "ck_tile/ops/elementwise/unary_element_wise_operation.hpp")
    own = _pipeline_texts(include)
    forms = {p: _call_forms(text) for p, text in own.items()}
    shuffles = {p: text for p, text in own.items() if "MakeShuffledBRegTileDistribution" in text}
    gated = {p for p, text in shuffles.items() if re.search(r"is_b_row_major\s*&&\s*!is_b_load_tr", text)}
    bwd_weight_transform = _read(include, CONV_DIR / "utils/transform_conv_bwd_weight_to_gemm.hpp")
    fingerprint = _fingerprint(include)
    label = KNOWN_REVISIONS.get(fingerprint, f"unknown CK ({fingerprint[:12]})")
    return CkRevision(
        include_dir=str(include),
        fingerprint=fingerprint,
        label=label,
        verified=fingerprint in KNOWN_REVISIONS,
        pipelines=pipelines,
        streamk_conv=any("StreamK" in text for text in kernels.values()),
        explicit_gemm="ExplicitGemm" in traits_head,
        split_image_variants=tuple(v.value for v, text in kernels.items() if "EnableSplitImage" in text),
        # A kernel merges groups when it batches them (NumGroupsPerBatch); the 2025-11 forward kernel
        # only passes NumGroupsToMerge on to its transformer while its GemmM/GemmN, GemmBatch and
        # group strides stay per single group.
        merge_groups_variants=tuple(v.value for v, text in kernels.items()
                                    if re.search(r"=\s*GroupedConvTraitsType_::NumGroupsToMerge", text)),
        two_stage=(include / "ck_tile/ops/elementwise.hpp").is_file() and "struct UnaryConvert" in elementwise,
        instance_string=any("GetInstanceString" in text for text in kernels.values()),
        warp_gemms=_warp_gemms(include),
        depthwise=any("depthwise" in p.name.lower() for p in (include / "ck_tile/ops").rglob("*.hpp")),
        single_lds_pipelines=tuple(p.value for p in Pipeline if p.value in pipelines and 1 in forms.get(p, ())),
        double_lds_pipelines=tuple(p.value for p in Pipeline if p.value in pipelines and 2 in forms.get(p, ())),
        shuffle_always=tuple(p.value for p in Pipeline if p in shuffles and p not in gated),
        shuffle_without_load_tr=tuple(p.value for p in Pipeline if p in gated),
        load_tr_archs=_load_tr_archs(include),
        shuffle_auto_vector=_shuffle_auto_vector(include),
        broken_specialization_variants=tuple(
            v.value for v, text in kernels.items()
            if "GroupedConvTraitsType_::NDimSpatial_" in text and not re.search(r"\bNDimSpatial_\s*=", traits)),
        bwd_data_double_lds_broken="gemm_tile_windows.at(I0).get_length(" in kernels[Variant.BWD_DATA],
        compv5_ping_pong="KPerBlock % ((NumWarps / 2) * KTileSize) == 0" in own.get(Pipeline.COMPV5, ""),
        bwd_weight_1d_transposed=bool(re.search(r"make_tuple\(K_,\s*N_\s*\*\s*Wo_\)", bwd_weight_transform)),
    )


GEMM_LAYOUTS: dict[Variant, tuple[str, str]] = {
    Variant.FORWARD: ("row", "col"),
    Variant.BWD_DATA: ("row", "row"),
    Variant.BWD_WEIGHT: ("col", "row"),
}
"""GEMM layouts of A and B per variant (``GroupedConvTraits`` AsLayout*/BsLayout*,
grouped_convolution_utils.hpp 102-112)."""

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
    earlier = [fits(v) for v in candidates[:candidates.index(value)]]
    return all_of(fits(value), *(Not(e) for e in earlier)) if earlier else fits(value)


def _load_pattern(y: Expr, x: Expr, vec: Expr, warps: Expr, groups: Expr, warp_size: int) -> Expr:
    """The static_asserts of ``tile_distribution_encoding_pattern_2d`` (thread- and warp-raked alike)
    for a Y x X tile read with ``vec``-wide loads by ``warps`` waves: X % vec == 0; with
    X1 = min(vec, X*Y/threads) and X0 = X/X1, X0 divides the wave; the Y split covers Y exactly."""
    threads = warps * warp_size
    largest = x * y // threads

    def with_x1(x1: Expr) -> Expr:
        x0 = x // x1
        y1 = Const(warp_size) // x0
        y0 = warps // groups
        return all_of(x1 >= 1, (x0 * y1).eq(warp_size), y0 * y1 >= 1, (y % (y0 * y1)).eq(0))

    return all_of((x % vec).eq(0), any_of(all_of(vec <= largest, with_x1(vec)),
                                          all_of(vec > largest, with_x1(largest))))


def ck_rules(revision: CkRevision, variant: Variant, dtype: Dtype, arch: str | None = None,
             ndim: int | None = None) -> tuple[Rule, ...]:
    """What ``revision`` cannot build, as rules of predicate ``ck_revision`` for one cell's variant
    and dtype, and where known its arch and ndim. The register transpose of row-major B /
    column-major A tiles is compiled only on archs without the LDS transpose load: with ``arch``
    None it is assumed, which only ever excludes more. ``ck_bwd_weight_1d`` needs ``ndim`` (not a
    config field) and folds to TRUE without it.

    A rule folds to TRUE where the revision has the feature, keeping its name (as the space's
    other rules do), so callers can list every revision rule and see which ones bite.
    """
    source = f"CK headers {revision.label}"
    missing = [p.code for p in Pipeline if p.value not in revision.pipelines]
    warp_size = 64 if arch is None else arch_facts(arch).warp_size
    warps = F("wave_m") * F("wave_n") * F("wave_k")
    groups = F("num_wave_groups")
    tile_m, tile_n, tile_k = F("tile_m"), F("tile_n"), F("tile_k")
    a_layout, b_layout = GEMM_LAYOUTS[variant]
    # (Y, X) of the tile each operand is loaded as from DRAM (policy MakeA/BDramTileDistribution).
    a_tile = (tile_m, tile_k) if a_layout == "row" else (tile_k, tile_m)
    b_tile = (tile_n, tile_k) if b_layout == "col" else (tile_k, tile_n)

    def rule(name: str, expr: Expr, text: str, where: str = "") -> Rule:
        return Rule(name, "ck_revision", expr, text, f"{source}: {where}" if where else source)

    def codes(names: Iterable[str]) -> list[int]:
        return [Pipeline(n).code for n in names]

    # Register transpose (transpose_tile2d) of a column-major A / row-major B tile.
    shuffling = list(revision.shuffle_always)
    if arch is None or arch not in revision.load_tr_archs:
        shuffling += revision.shuffle_without_load_tr
    candidates = auto_vector_sizes(element_size(dtype))

    def shuffle_rule(op: str, transposed: bool, vec: Expr, x: Expr) -> Rule:
        name = f"ck_shuffle_vector_{op.lower()}"
        if not (transposed and revision.shuffle_auto_vector and shuffling):
            return rule(name, TRUE, f"no register transpose of {op} here")
        per_thread = x * tile_k // (warps * warp_size)
        largest = per_thread  # LargestVec of the pattern: the tile's elements per thread
        same = any_of(*(all_of(_auto_vector_is(v, candidates, x, per_thread),
                               any_of(vec.eq(v), all_of(vec > largest, largest.eq(v))))
                        for v in candidates))
        return rule(
            name, implies(F("pipeline").isin(codes(shuffling)), same),
            f"{'column-major A' if op == 'A' else 'row-major B'} is transposed in registers by "
            f"{', '.join(shuffling)}: transpose_tile2d static_asserts that the DRAM distribution (built "
            f"with vec_{op.lower()}) and the shuffled one (built with the policy's own vector size, the "
            f"first of {list(candidates)} dividing both tile_{'m' if op == 'A' else 'n'} and "
            f"tile_{'m' if op == 'A' else 'n'} x tile_k / threads) are transposes: "
            f"min(vec_{op.lower()}, tile_{'m' if op == 'A' else 'n'} x tile_k / threads) must equal that size",
            "core/tensor/transpose_tile.hpp 219-228 (static_assert), "
            f"{POLICY} 565-600 (DRAM: Problem::VectorSize{op} under FixedVectorSize), "
            f"603-643 (shuffled: GetVectorSize{op}<Problem>()), 395-450 and 346-391 (its value), "
            f"{PATTERN} 134-200 (X1 = min(VecSize, LargestVec)); pipelines/*: "
            "if constexpr(is_b_row_major && !is_b_load_tr_v()), gemm_pipeline_ag_bg_cr_base.hpp 28-34")

    single = revision.single_lds_pipelines
    double = revision.double_lds_pipelines
    e_per_thread = F("warp_tile_m") * F("warp_tile_n") // warp_size
    shuffles = F("vec_c") // e_per_thread
    if variant is not Variant.BWD_WEIGHT:  # only bwd_weight launchers instantiate atomic_add (split-K)
        atomic_vector: Expr = TRUE
    elif dtype is Dtype.FP32:
        atomic_vector = F("vec_c").isin([1, 2, 4])
    else:
        atomic_vector = all_of(implies(F("two_stage").eq(1), F("vec_c").isin([1, 2, 4])),
                               implies(F("two_stage").eq(0), any_of((F("vec_c") % 2).eq(1), F("vec_c").isin([2, 4, 8]))))
    return (
        rule("ck_pipeline", Not(F("pipeline").isin(missing)) if missing else TRUE,
             "the pipeline's class and dispatch base exist in this CK: "
             + (", ".join(revision.pipelines) or "none")),
        rule("ck_streamk", TRUE if revision.streamk_conv else F("streamk_enabled").eq(0),
             "this CK's grouped-conv kernels take no stream-K partitioner"),
        rule("ck_explicit_gemm", TRUE if revision.explicit_gemm else F("explicit_gemm").eq(0),
             "this CK's GroupedConvTraits has no explicit-GEMM parameter"),
        rule("ck_split_image",
             TRUE if variant.value in revision.split_image_variants else F("split_image").eq(0),
             f"this CK's {variant.value} kernel has no split-image mode"),
        rule("ck_groups_to_merge",
             TRUE if variant.value in revision.merge_groups_variants else F("num_groups_to_merge").eq(1),
             f"this CK's {variant.value} kernel does not merge groups: at most it passes NumGroupsToMerge to "
             "its transformer (forward), whose merged descriptors then disagree with the kernel's per-group "
             "GemmM/GemmN, GemmBatch and group strides; only a kernel that sets NumGroupsPerBatch from it "
             "(bwd_weight) merges",
             "ops/grouped_convolution/kernel/grouped_convolution_forward_kernel.hpp 26-33, 97-103, 189-195; "
             "grouped_convolution_backward_weight_kernel.hpp 88"),
        rule("ck_two_stage",
             TRUE if revision.two_stage or variant is not Variant.BWD_WEIGHT else F("two_stage").eq(0),
             "this CK lacks the element-wise convert kernel of the two-stage bwd_weight"),
        rule("ck_warp_gemm", in_table(WARP, revision.warp_gemms.get(dtype.value, ())),
             f"this CK's warp-GEMM dispatcher has a {dtype.value} warp tile (m, n, k) in "
             f"{list(revision.warp_gemms.get(dtype.value, ()))}"),
        rule("ck_epilogue", F("epilogue").eq(Epilogue.CSHUFFLE.code),
             "grouped-conv kernels are emitted with the CShuffle epilogue only"),
        rule("ck_pipeline_call",
             all_of(implies(F("double_smem_buffer").eq(0), F("pipeline").isin(codes(single))),
                    implies(F("double_smem_buffer").eq(1), F("pipeline").isin(codes(double)))),
             "the grouped-conv kernels call GemmPipeline{}(a_window, b_window, num_loop, p_smem) with plain "
             "(non-tuple) windows, or (..., p_smem_0, p_smem_1) with the double LDS buffer; pipelines with the "
             f"first overload: {', '.join(single) or 'none'}; with the second: {', '.join(double) or 'none'} "
             "(compv6 declares the plain-window overload only with element functions, so no grouped-conv kernel "
             "can call it)",
             "ops/grouped_convolution/kernel/grouped_convolution_forward_kernel.hpp 887-888 and 944-945, "
             "grouped_convolution_backward_data_kernel.hpp 883-884 and 934, "
             "grouped_convolution_backward_weight_kernel.hpp 812-813 and 862; "
             "ops/gemm/pipeline/gemm_pipeline_ag_bg_cr_comp_v6.hpp 706-767 (no 4-argument plain-window "
             "overload; compare comp_v5.hpp 450-465, comp_v3.hpp 766-781)"),
        rule("ck_bwd_data_double_lds",
             F("double_smem_buffer").eq(0)
             if variant is Variant.BWD_DATA and revision.bwd_data_double_lds_broken else TRUE,
             "this CK's bwd_data kernel computes its loop count in the two-LDS path (RunGemm2LDS) with "
             "gemm_tile_windows.at(I0).get_length(I1), a member tile windows do not have: no bwd_data kernel "
             "with the double LDS buffer compiles (family excluded: the defect is in the kernel)",
             "ops/grouped_convolution/kernel/grouped_convolution_backward_data_kernel.hpp 926-927"),
        rule("ck_compv5_ping_pong",
             implies(F("pipeline").eq(Pipeline.COMPV5.code),
                     all_of(warps >= 2, (tile_k % ((warps // 2) * F("warp_tile_k"))).eq(0)))
             if revision.compv5_ping_pong else TRUE,
             "compv5 splits the waves into two ping-pong halves: it static_asserts "
             "tile_k % ((waves / 2) x warp_tile_k) == 0, which with one wave divides by zero",
             "ops/gemm/pipeline/gemm_pipeline_ag_bg_cr_comp_v5.hpp 99-100, 158-160"),
        rule("ck_specialization",
             F("specialization").eq(Specialization.DEFAULT.code)
             if variant.value in revision.broken_specialization_variants else TRUE,
             f"this CK's {variant.value} kernel declares NDimSpatial = GroupedConvTraitsType_::NDimSpatial_, a "
             "member GroupedConvTraits lacks (it has NDimSpatial); only IsSupportedArgument's specialization "
             "branches use it, so every non-default specialization fails to compile (the whole family is "
             "excluded because the defect is in the kernel, not in a config value)",
             "ops/grouped_convolution/kernel/grouped_convolution_backward_data_kernel.hpp 510 (used 619, 635, "
             "653), grouped_convolution_backward_weight_kernel.hpp 369 (used 529, 545, 563), "
             "utils/grouped_convolution_utils.hpp 94"),
        rule("ck_bwd_weight_1d",
             Const(0) if variant is Variant.BWD_WEIGHT and revision.bwd_weight_1d_transposed and ndim == 1 else TRUE,
             "this CK's 1D bwd_weight output descriptor is (K, N*Wo) and is used as (GemmK, GemmM), so the "
             "kernel's GemmM = N*Wo and GemmK = K disagree with B (K = N*Wo) and C (M = K): it compiles but "
             "does not compute the weight gradient (2D/3D use (N*Ho*Wo, K)); excluded as a family because the "
             "defect is in the transformer",
             "ops/grouped_convolution/utils/transform_conv_bwd_weight_to_gemm.hpp 412-434, 835; "
             "kernel/grouped_convolution_backward_weight_kernel.hpp 84-100"),
        rule("ck_load_pattern_a", _load_pattern(*a_tile, F("vec_a"), warps, groups, warp_size),
             f"A is read as a {'tile_m x tile_k' if a_layout == 'row' else 'tile_k x tile_m'} tile with vec_a "
             "loads: the tile distribution pattern static_asserts X % vec == 0, X0 = X / min(vec, X*Y/threads) "
             "divides the wave and the rows split evenly over the waves",
             f"{PATTERN} 148-166 (thread raked), 232-246 (warp raked); {POLICY} 527-563"),
        rule("ck_load_pattern_b", _load_pattern(*b_tile, F("vec_b"), warps, groups, warp_size),
             f"B is read as a {'tile_n x tile_k' if b_layout == 'col' else 'tile_k x tile_n'} tile with vec_b "
             "loads: the same pattern static_asserts as for A",
             f"{PATTERN} 148-166, 232-246; {POLICY} 565-600"),
        shuffle_rule("A", a_layout == "col", F("vec_a"), tile_m),
        shuffle_rule("B", b_layout == "row", F("vec_b"), tile_n),
        rule("ck_atomic_vector", atomic_vector,
             "the bwd_weight launcher also instantiates the atomic_add epilogue (split-K, k_batch > 1); its "
             "buffer atomic of vec_c elements exists for float only with vec_c in {1, 2, 4} (an fp32 dtype, "
             "or the fp32 workspace of two-stage) and for fp16/bf16 with vec_c in {2, 4, 8} (odd vec_c: the "
             "kernels compile that body out)",
             "core/arch/amd_buffer_addressing.hpp 2277-2281 (static_assert 'wrong! not implemented'); "
             "kernel/grouped_convolution_backward_weight_kernel.hpp 902-904 (odd vec_c compiled out)"),
        rule("ck_epilogue_shuffle",
             implies(F("vec_c") > e_per_thread,
                     all_of((tile_m % (F("warp_tile_m") * F("wave_m"))).eq(0), (tile_m % shuffles).eq(0))),
             "CShuffleEpilogue (row-major E): when vec_c exceeds the warp tile's elements per thread "
             "(warp_tile_m x warp_tile_n / wave size), tile_m must be a multiple of warp_tile_m x wave_m and of "
             "vec_c / that count",
             "ops/epilogue/cshuffle_epilogue.hpp 209-224"),
    )


def depthwise_note(revision: CkRevision) -> str:
    """Why depthwise configs are not emitted (stated in the manifest, never silent)."""
    if revision.depthwise:
        return "this CK has a depthwise kernel, but ckspace emits GEMM kernels only: depthwise configs skipped"
    return "this CK has no direct depthwise convolution kernel: depthwise configs skipped"
