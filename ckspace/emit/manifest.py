"""``manifest.json`` of an emitted tree: what was emitted, from what, and what was left out and why;
and the layout of the tree once built, stated here once.

Every path ``ckspace build``, ``bench``, ``hipdnn census`` and the Python flow read or write inside
a tree is asked of this module (:func:`build_dir`, :func:`kernels_library`, :func:`host_library`,
:func:`plugin_library`, :func:`census_build_dir`, ...): a second spelling of ``build/<arch>/`` or of
a library's name would let one command write where another no longer looks.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from ckspace.core.ck import CkRevision
from ckspace.core.config import GemmConfig
from ckspace.core.errors import CkspaceError

MANIFEST_NAME = "manifest.json"

# -- the built tree's layout -------------------------------------------------------------------------

BUILD_FOLDER = "build"
"""The tree's folder of everything built (nothing emitted lives there; ``emit`` leaves it alone)."""
HOST_LABEL = "host"
"""The build folder of the dispatcher's host part alone (``ckspace build --host-only``)."""
CENSUS_LABEL = "census"
"""The build folder of the plugin ``hipdnn census TREE`` links without kernels."""
LOGS_FOLDER = "logs"
"""Inside a build folder: the compile and link logs (``logs/kernels/<name>.log`` per kernel)."""
OBJECTS_FOLDER = "obj"
"""Inside a build folder: the objects compiled for it."""
HOST_LIBRARY_NAME = "libckspace_dispatch.so"
"""The host part's library: the dispatcher's C API without ``ckspace_run``."""


def build_root(tree: Path) -> Path:
    """``TREE/build``: every build folder of the tree."""
    return Path(tree) / BUILD_FOLDER


def build_dir(tree: Path, label: str) -> Path:
    """``TREE/build/<label>``: the build folder of one library, named by its arch or archs
    (:attr:`Manifest.label`), :data:`HOST_LABEL` or :data:`CENSUS_LABEL`."""
    return build_root(tree) / label


def host_build_dir(tree: Path) -> Path:
    """The build folder of the host part alone."""
    return build_dir(tree, HOST_LABEL)


def census_build_dir(tree: Path) -> Path:
    """The build folder of the census's plugin without kernels."""
    return build_dir(tree, CENSUS_LABEL)


def logs_dir(build: Path) -> Path:
    """The logs of the build folder ``build``."""
    return build / LOGS_FOLDER


def objects_dir(build: Path) -> Path:
    """The objects of the build folder ``build``."""
    return build / OBJECTS_FOLDER


def kernels_library_name(label: str) -> str:
    """The kernels' library of an arch or archs (``libckspace_kernels_gfx942.so``)."""
    return f"libckspace_kernels_{label}.so"


def plugin_name(label: str) -> str:
    """The hipDNN plugin's name for an arch or archs (``ckspace_hipdnn_gfx942``): what the plugin
    calls itself to hipDNN and what its library is named after."""
    return f"ckspace_hipdnn_{label}"


def plugin_library_name(label: str) -> str:
    """The hipDNN plugin of an arch or archs (``libckspace_hipdnn_gfx942.so``): what
    ``HIPDNN_PLUGIN_DIR`` finds (hipDNN loads every plugin in its directory)."""
    return f"lib{plugin_name(label)}.so"


def kernels_library(tree: Path, label: str) -> Path:
    """Where ``ckspace build`` links the kernels' library of ``label``."""
    return build_dir(tree, label) / kernels_library_name(label)


def plugin_library(tree: Path, label: str) -> Path:
    """Where ``ckspace build`` links the hipDNN plugin of ``label``."""
    return build_dir(tree, label) / plugin_library_name(label)


def host_library(tree: Path) -> Path:
    """Where ``ckspace build --host-only`` links the host part."""
    return host_build_dir(tree) / HOST_LIBRARY_NAME


def built_kernel_libraries(tree: Path) -> list[Path]:
    """The kernels' libraries built in ``tree``, one per build folder of an arch or archs, sorted."""
    return sorted(build_root(tree).glob(f"*/{kernels_library_name('*')}"))


def built_libraries(tree: Path) -> list[Path]:
    """Every library built in ``tree`` (kernels, host part, plugins), sorted."""
    return sorted(build_root(tree).glob("*/lib*.so"))


class FileRecord(BaseModel):
    model_config = ConfigDict(frozen=True)

    path: str
    """Relative to the tree's root."""
    sha256: str


class EmittedKernel(BaseModel):
    model_config = ConfigDict(frozen=True)

    name: str
    variant: str
    config: dict[str, Any]
    """Every config field (as ``GemmConfig.fields()``)."""
    header: FileRecord
    source: FileRecord
    wrapper: FileRecord
    archs: list[str] | None = None
    """In a library of several archs, the archs whose kernels it is (it is compiled for each);
    absent in a tree of one arch."""

    def gemm_config(self) -> GemmConfig:
        """The kernel's config (its identity), from the recorded fields."""
        return GemmConfig.from_fields(self.config)


class ExcludedKernel(BaseModel):
    model_config = ConfigDict(frozen=True)

    name: str
    rules: list[str]
    """The ``ck_revision`` rules the config breaks."""


def ranked_by_model(ranker_sha256: str) -> str:
    """How ``DispatcherRecord.models`` names a cell ranked by a model: by the sha256 of its
    ranker.txt as its card records it (the model's identity, whatever C was generated from it)."""
    return f"{RANKED_BY_MODEL}{ranker_sha256}"


RANKED_BY_MODEL = "model "
"""The prefix of a model's entry in ``DispatcherRecord.models`` (the other value: ``analytical``)."""


class DispatcherRecord(BaseModel):
    """What ``--with-selector`` generated: the dispatcher's kernel table and where each cell's
    ranking comes from."""

    model_config = ConfigDict(frozen=True)

    kernels: list[str]
    """Kernel names in table order (the indices of the C API)."""
    fallback_only: list[str] = []
    """Kernels emitted only as vector-width fallbacks of the others (``--fallbacks``)."""
    models: dict[str, str]
    """Per cell (``variant dtype``): ``model <sha256 of its ranker.txt, as the model card records
    it>`` or ``analytical``."""
    host_units: list[str]
    """The C translation units of the host part (``ckspace build --host-only`` compiles these)."""
    run_unit: str
    """The HIP translation unit of ``ckspace_run``."""
    archs: dict[str, list[str]] | None = None
    """In a library of several archs, each arch's kernels (its ``ckspace_select`` ranks these);
    absent in a tree of one arch."""


class HipdnnRecord(BaseModel):
    """What ``--hipdnn-plugin`` generated (:mod:`ckspace.emit.hipdnn_plugin`)."""

    model_config = ConfigDict(frozen=True)

    plugin: str
    """The plugin's name (``hipdnnPluginGetName``)."""
    engines: dict[str, int]
    """Each engine's name and id (the 64-bit FNV-1a hash of the name, as hipDNN requires)."""
    schema_file: str
    """The wire-format schema ``ckspace build`` generates the graph reader from with flatc."""
    source: str
    """The plugin's C++ translation unit."""


class Manifest(BaseModel):
    """The whole tree; kernels and exclusions sorted by name so equal requests give equal bytes."""

    ckspace_version: str
    arch: str
    """The arch, or the archs of a library of several, comma-separated (as ``ckspace_arch()``)."""
    archs: list[str] | None = None
    """The archs of a library of several (absent in a tree of one arch)."""
    request: dict[str, Any]
    ck_revision: CkRevision
    kernels: list[EmittedKernel]
    shared: list[FileRecord]
    excluded: list[ExcludedKernel]
    depthwise_skipped: int
    depthwise_note: str | None
    dispatcher: DispatcherRecord | None = None
    hipdnn: HipdnnRecord | None = None

    def to_bytes(self) -> bytes:
        """``manifest.json`` as written: indented JSON with sorted keys, so equal trees give equal bytes."""
        data = self.model_dump(mode="json")
        _drop_absent(data, "archs")  # a tree of one arch: the same bytes as before libraries of several
        if data["dispatcher"] is not None:
            _drop_absent(data["dispatcher"], "archs")
        for kernel in data["kernels"]:
            _drop_absent(kernel, "archs")
        return (json.dumps(data, indent=1, sort_keys=True) + "\n").encode()

    @property
    def arch_list(self) -> list[str]:
        """The archs the tree's kernels are for: one, or a library of several's."""
        return self.archs or [self.arch]

    @property
    def label(self) -> str:
        """What the tree's library, build folder and plugin are named by: its arch, or its archs
        joined by ``_`` (``gfx942_gfx950``)."""
        return "_".join(self.arch_list)

    def arch_kernels(self) -> dict[str, list[EmittedKernel]]:
        """Each arch's kernels (a kernel of several archs under each): in a library of several
        archs the archs its record names, else every kernel is the one arch's."""
        return {arch: [k for k in self.kernels if k.archs is None or arch in k.archs] for arch in self.arch_list}

    def arch_models(self) -> dict[str, dict[str, str]]:
        """Each arch's cells (``variant dtype``) and what ranks them in its dispatcher (``model
        <sha256 of the ranker>`` or ``analytical``); empty without a dispatcher. A library of several
        archs keys its dispatcher's cells ``arch variant dtype``."""
        if self.dispatcher is None:
            return {arch: {} for arch in self.arch_list}
        if self.archs is None:
            return {self.arch: dict(self.dispatcher.models)}
        out: dict[str, dict[str, str]] = {arch: {} for arch in self.arch_list}
        for key, source in self.dispatcher.models.items():
            arch, _, cell = key.partition(" ")
            out[arch][cell] = source
        return out

    def shared_kernels(self) -> list[EmittedKernel]:
        """The kernels several archs hold: each emitted once and compiled for every one of them."""
        return [k for k in self.kernels if k.archs is not None and len(k.archs) > 1]

    def files(self) -> list[str]:
        """Every file of the tree (manifest excluded)."""
        paths = [f.path for f in self.shared]
        for kernel in self.kernels:
            paths += [kernel.header.path, kernel.source.path, kernel.wrapper.path]
        return paths


def _drop_absent(record: dict[str, Any], key: str) -> None:
    if record.get(key) is None:
        record.pop(key, None)


def read_manifest(tree: Path, dispatcher: bool = False, named: str | None = None) -> Manifest:
    """The manifest of the emitted tree ``tree``; a folder that holds none is one line saying how one is made,
    and so is a tree without the dispatcher when ``dispatcher`` (bench and ``learn --tree`` run through it).
    ``named``: how the line names the tree (default: its path)."""
    from ckspace.environment.inputs import read_json_model

    path, named = tree / MANIFEST_NAME, named or str(tree)
    if not path.exists() and not path.is_symlink():  # anything else there: the reader says what it is
        raise CkspaceError(f"{named} has no {MANIFEST_NAME}: no tree ckspace emit wrote (ckspace emit --out {tree})")
    manifest = read_json_model(Manifest, path, "manifest")
    if dispatcher and manifest.dispatcher is None:
        raise CkspaceError(f"{named} has no dispatcher: emit it with --with-selector")
    return manifest
