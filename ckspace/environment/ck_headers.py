"""Which CK Tile headers are in use and what their revision offers (a fact of the target, read
below the space: every command's default space is what these headers can build).

CK's grouped-convolution API changes between releases (template parameters appear, pipelines and
traits come and go). The revision is read from the headers themselves -- never assumed from a
version string -- as a :class:`~ckspace.core.ck.CkRevision`: a set of *features*, each probed by a
fact a compile depends on (a class that exists, a template parameter that is declared). What a
revision lacks becomes rules (:mod:`ckspace.constraints.rulebook.ck_rules`), so the space can say why a
config is excluded for this CK and ``emit`` never writes a kernel its CK cannot compile.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import TYPE_CHECKING

from ckspace.core.errors import CkspaceError
from ckspace.core.vocab import Dtype, Pipeline, Variant
from ckspace.environment.ck_locate import CONV_DIR, MARKER, PIPELINE_DIR, WARP_DIR

if TYPE_CHECKING:  # pydantic loads only when a revision is read, not to locate the headers
    from ckspace.core.ck import CkRevision

KNOWN_REVISIONS: dict[str, str] = {
    "8584972ba06fd07fa50485012614e38c42ae6e297a504084c8ddde5db8545469": "amd-aiter 0.1.7.post2.dev18 (CK 2025-11-18)"
}
"""Fingerprint -> label of the revisions the emitted code has been compiled against (verified)."""


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
        head = text[: match.start()].rsplit("template", 1)[-1]
        tuple_only = "is_detected<is_tuple" in head and "!is_detected<is_tuple" not in head
        following = _DECL.search(text, match.end())
        body = text[match.end() : following.start() if following else len(text)]
        # The pipeline implementations take tuples of windows: a plain-window overload works only if
        # it wraps them (comp_async's forwards the bare windows and cannot be instantiated).
        wraps = "make_tuple(a_dram_block_window_tmp" in body
        if not tuple_only and wraps and kinds[:3] == ["window", "window", "num_loop"] and set(kinds[3:]) == {"smem"}:
            forms.add(len(kinds) - 3)
    return forms


def _pipeline_texts(include: Path) -> dict[Pipeline, str]:
    """Each pipeline's own header (the one defining its class)."""
    from ckspace.core.ck import PIPELINE_CLASSES

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
        dram = policy[policy.find(f"Make{op}DramTileDistribution") :]
        shuffled = policy[policy.find(f"MakeShuffled{op}RegTileDistribution") :]
        dram, shuffled = dram[: dram.find("return")], shuffled[: shuffled.find("return")]
        out &= (
            f"Problem::VectorSize{op}" in dram
            and f"GetVectorSize{op}<Problem>()" in shuffled
            and "FixedVectorSize" not in shuffled
        )
    return out


def _fingerprint(include: Path) -> str:
    """sha256 over the grouped-convolution and GEMM-pipeline headers (names and contents)."""
    digest = hashlib.sha256()
    for folder in (CONV_DIR, PIPELINE_DIR, WARP_DIR):
        for path in sorted((include / folder).rglob("*.hpp")):
            digest.update(str(path.relative_to(include)).encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()


def detect_revision(include_dir: str) -> CkRevision:
    """Probe the headers under ``include_dir`` (a result of
    :func:`~ckspace.environment.ck_locate.locate_ck`); ~0.2 s, so callers go through
    :func:`~ckspace.environment.ck_header_cache.find_revision`, which caches the answer while the
    headers are unchanged."""
    from ckspace.core.ck import PIPELINE_BASES, PIPELINE_CLASSES, CkRevision

    if not (Path(include_dir) / MARKER).is_file():  # an empty revision would exclude every kernel
        raise CkspaceError(f"{include_dir!r} holds no {MARKER}: not a CK include directory")
    include = Path(include_dir)
    pipeline_text = "\n".join(
        p.read_text(encoding="utf-8", errors="replace") for p in sorted((include / PIPELINE_DIR).glob("*.hpp"))
    )
    classes = {p for p, cls in PIPELINE_CLASSES.items() if re.search(rf"\bstruct {cls}\b", pipeline_text)}
    bases = {p for p, base in PIPELINE_BASES.items() if re.search(rf"\bstruct {base}\b", pipeline_text)}
    pipelines = tuple(p.value for p in Pipeline if p in classes and p in bases)
    utils = _read(include, CONV_DIR / "utils/grouped_convolution_utils.hpp")
    traits = utils[utils.find("struct GroupedConvTraits") :] if "struct GroupedConvTraits" in utils else ""
    traits_head = utils[: utils.find("struct GroupedConvTraits")].rsplit("template", 1)[-1] if traits else ""
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
        merge_groups_variants=tuple(
            v.value for v, text in kernels.items() if re.search(r"=\s*GroupedConvTraitsType_::NumGroupsToMerge", text)
        ),
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
            v.value
            for v, text in kernels.items()
            if "GroupedConvTraitsType_::NDimSpatial_" in text and not re.search(r"\bNDimSpatial_\s*=", traits)
        ),
        bwd_data_double_lds_broken="gemm_tile_windows.at(I0).get_length(" in kernels[Variant.BWD_DATA],
        compv5_ping_pong="KPerBlock % ((NumWarps / 2) * KTileSize) == 0" in own.get(Pipeline.COMPV5, ""),
        bwd_weight_1d_transposed=bool(re.search(r"make_tuple\(K_,\s*N_\s*\*\s*Wo_\)", bwd_weight_transform)),
    )
