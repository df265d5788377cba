"""Where the CK Tile headers are: ``--ck-root``, ``$CK_ROOT``, the ROCm include directories or the
amd-aiter wheel, in that order, and the folders under them that ckspace reads.

Locating is a stat or two, with no parsing and no pydantic, because every command resolves its
target first; what the headers offer is read by :mod:`ckspace.environment.ck_headers` and cached by
:mod:`ckspace.environment.ck_header_cache`.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

from ckspace.core.errors import CkHeadersNotFound, CkspaceError
from ckspace.environment.compilers import rocm_roots

CONV_DIR = Path("ck_tile/ops/grouped_convolution")
PIPELINE_DIR = Path("ck_tile/ops/gemm/pipeline")
WARP_DIR = Path("ck_tile/ops/gemm/warp")
MARKER = CONV_DIR.parent / "grouped_convolution.hpp"


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
    (:func:`~ckspace.environment.compilers.rocm_roots`), the amd-aiter wheel.

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
