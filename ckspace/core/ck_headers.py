"""Which CK Tile headers are in use and what their revision offers (a fact of the target, read
below the space: every command's default space is what these headers can build).

CK's grouped-convolution API changes between releases (template parameters appear, pipelines and
traits come and go). The revision is read from the headers themselves -- never assumed from a
version string -- as a :class:`~ckspace.core.ck.CkRevision`: a set of *features*, each probed by a
fact a compile depends on (a class that exists, a template parameter that is declared). What a
revision lacks becomes rules (:mod:`ckspace.constraints.ck_rules`), so the space can say why a
config is excluded for this CK and ``emit`` never writes a kernel its CK cannot compile.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import logging
import os
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ckspace.core.cachefiles import clear_folder, folder_info, read_json_entry, write_entry
from ckspace.core.compilers import rocm_roots
from ckspace.core.errors import CkHeadersNotFound, CkspaceError
from ckspace.core.files import cache_dir, sha256
from ckspace.core.vocab import Dtype, Pipeline, Variant

log = logging.getLogger(__name__)

if TYPE_CHECKING:  # pydantic loads only when a revision is read, not to locate the headers
    from ckspace.core.ck import CkRevision

CONV_DIR = Path("ck_tile/ops/grouped_convolution")
PIPELINE_DIR = Path("ck_tile/ops/gemm/pipeline")
WARP_DIR = Path("ck_tile/ops/gemm/warp")
MARKER = CONV_DIR.parent / "grouped_convolution.hpp"

KNOWN_REVISIONS: dict[str, str] = {
    "8584972ba06fd07fa50485012614e38c42ae6e297a504084c8ddde5db8545469": "amd-aiter 0.1.7.post2.dev18 (CK 2025-11-18)"
}
"""Fingerprint -> label of the revisions the emitted code has been compiled against (verified)."""


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
    """The CK include directory: ``ck_root``, ``$CK_ROOT``, the ROCm include dirs
    (:func:`~ckspace.core.compilers.rocm_roots`), the amd-aiter wheel.

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
    for root in rocm_roots():
        looked.append(f"{root}/include")
        found = _include_dir(Path(root) / "include")
        if found is not None:
            return found.resolve()
    looked.append("the amd-aiter wheel (aiter_meta/3rdparty/composable_kernel/include)")
    found = _aiter_include()
    if found is not None:
        return found.resolve()
    where = "--ck-root, CK_ROOT, " + ", ".join(looked)
    raise CkHeadersNotFound(
        f"no CK Tile headers found; looked at {where} (scripts/install-toolchain-gfx942.sh installs them)", where
    )


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
    """Probe the headers under ``include_dir`` (a result of :func:`locate_ck`); ~0.2 s, so callers go
    through :func:`find_revision`, which caches the answer while the headers are unchanged."""
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


def find_revision(ck_root: str | os.PathLike[str] | None = None) -> CkRevision:
    """The revision of the CK headers :func:`locate_ck` finds (``ck_root``, ``CK_ROOT``, ROCm,
    the amd-aiter wheel), cached while the headers are unchanged (:func:`revision_at`)."""
    return revision_at(str(locate_ck(ck_root)))


# -- the revision, cached ------------------------------------------------------------------------
# Reading a revision off its headers takes ~0.2 s and pydantic, while a warm listing must answer in
# about a tenth of a second. So the revision is cached on disk under a key made of the include
# directory and the size and mtime of every file under ``ck_tile/ops`` (everything it is read from):
# a changed header changes the key, and a cache that cannot be read or written, or a damaged entry,
# costs time, not the answer (:mod:`ckspace.core.cachefiles`).

_FORMAT = 1
_OPS = "ck_tile/ops"


def _signature(include: Path) -> str:
    """What the revision read off ``include`` depends on: every file under ``ck_tile/ops`` by path,
    size and mtime (stat only, through ``os.scandir``: ~2 ms for the ~300 headers, which every
    command resolving its target pays)."""
    entries: list[str] = []

    def walk(folder: str) -> None:
        try:
            listed = sorted(os.scandir(folder), key=lambda e: e.name)
        except OSError:
            return
        for entry in listed:
            try:
                if entry.is_dir(follow_symlinks=True):
                    walk(entry.path)
                else:
                    st = entry.stat(follow_symlinks=True)
                    entries.append(f"{entry.path}\0{st.st_size}\0{st.st_mtime_ns}")
            except OSError:
                continue

    walk(str(include / _OPS))
    return sha256("\n".join([str(include), *entries]).encode())


def _cache_path(signature: str) -> Path:
    return cache_dir() / "ck" / f"{signature[:40]}.json"


def _read_cached(signature: str) -> dict[str, Any] | None:
    path = _cache_path(signature)
    try:
        entry = read_json_entry(path)
        if entry is None:
            return None
        if entry.get("format") != _FORMAT or entry.get("signature") != signature:
            return None
        revision = entry["revision"]
        if not (
            isinstance(revision, dict)
            and isinstance(revision.get("fingerprint"), str)
            and isinstance(revision.get("label"), str)
            and isinstance(revision.get("verified"), bool)
        ):
            raise ValueError("not a revision")  # what identity_at reads without validating
        return revision
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        if path not in _DAMAGED:  # identity_at and revision_at both read it
            _DAMAGED.add(path)
            log.warning("CK revision cache entry %s is unreadable (%s): reading the headers again", path, exc)
        return None


_DAMAGED: set[Path] = set()
"""Damaged entries already reported in this process."""


_REVISIONS: dict[str, CkRevision] = {}
"""Revisions read in this process, by :func:`_signature` of their headers."""


def revision_at(include_dir: str) -> CkRevision:
    """The revision of the CK headers at a located include directory: from memory or the disk cache
    while their files are unchanged (by :func:`_signature`), else read off the headers (what
    ``find_revision`` answers)."""
    from ckspace.core.ck import CkRevision

    signature = _signature(Path(include_dir))
    if signature in _REVISIONS:
        return _REVISIONS[signature]
    cached = _read_cached(signature)
    revision = None
    if cached is not None:
        try:
            revision = CkRevision.model_validate(cached)
        except ValueError as exc:
            log.warning("CK revision cache entry for %s does not validate (%s): reading the headers", include_dir, exc)
    if revision is None:
        revision = detect_revision(include_dir)
        _store(signature, revision.model_dump(mode="json"))
    _REVISIONS[signature] = revision
    return revision


def _store(signature: str, revision: dict[str, Any]) -> None:
    text = json.dumps({"format": _FORMAT, "signature": signature, "revision": revision})
    write_entry(cache_dir(), _cache_path(signature), text.encode())


def cache_info() -> dict[str, object]:
    """Where the CK revision cache is, how many entries it holds and their size in bytes."""
    return folder_info(cache_dir() / "ck")


def clear_cache() -> int:
    """Delete the CK revision cache's entries (``ck/*.json`` and stray temporaries, nothing else);
    returns how many were removed."""
    return clear_folder(cache_dir() / "ck")


def identity_at(include: Path) -> tuple[str, str, bool]:
    """(fingerprint, label, verified) of the headers at a located include directory: from the cache
    while their files are unchanged, without loading pydantic (what a warm listing needs)."""
    signature = _signature(include)
    cached = _read_cached(signature)
    if cached is None:
        cached = revision_at(str(include)).model_dump(mode="json")
    return cached["fingerprint"], cached["label"], bool(cached["verified"])
