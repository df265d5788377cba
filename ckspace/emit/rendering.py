"""Deciding what an emitted tree holds and rendering it in memory (:func:`render_tree`): per kernel
the header, compilation unit and dispatcher wrapper upstream's ``unified_grouped_conv_codegen.py``
writes, the per-variant headers, with ``--with-selector`` the dispatcher
(:mod:`~ckspace.emit.dispatcher`), and the manifest that lists them all.

Input is what the space lists (:class:`~ckspace.space.listing.Kernel`); configs the CK revision
cannot build are dropped by its ``ck_revision`` rules (:mod:`~ckspace.constraints.rulebook.ck_rules`) and
listed in the manifest with the rule names, depthwise configs are counted and skipped with the
reason. Output is deterministic: files are rendered from sorted inputs with no timestamps. Nothing
here writes (model directories are read): :mod:`~ckspace.emit.emitter` writes the
:class:`RenderedTree`, so what a tree holds is tested without a disk.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import jinja2

from ckspace import __version__
from ckspace.constraints.evaluators.classify import columns, rule_masks
from ckspace.constraints.rulebook.catalogue import ck_revision_rules
from ckspace.constraints.rulebook.ck_rules import depthwise_note
from ckspace.core.cells import Cell
from ckspace.core.ck import CkRevision
from ckspace.core.config import GemmConfig
from ckspace.core.errors import CkspaceError
from ckspace.core.fields import GEMM_FIELD_NAMES
from ckspace.core.vocab import Dtype, Variant
from ckspace.emit import hipdnn_plugin
from ckspace.emit.cxx import kernel_context
from ckspace.emit.dispatcher import (
    RUN_SOURCE,
    Library,
    dispatcher_sources,
    fleet_dispatcher_sources,
    host_units,
    model_directory,
    ranker_source,
)
from ckspace.emit.manifest import (
    DispatcherRecord,
    EmittedKernel,
    ExcludedKernel,
    FileRecord,
    HipdnnRecord,
    Manifest,
    plugin_name,
    ranked_by_model,
)
from ckspace.environment.files import banner, sha256
from ckspace.environment.inputs import read_json_model
from ckspace.select.fallbacks import serving_variants
from ckspace.space.listing import Kernel

REGISTRY_HEADER = "ckspace_registry.hpp"
REGISTER_ALL = "register_all_grouped_conv_kernels.hpp"
WRAPPER_DIR = "dispatcher_wrappers"


@cache
def template_environment() -> jinja2.Environment:
    """The jinja2 environment of ``templates/``: undefined names fail, whitespace as written, and
    every template renders its first lines' banner with the one statement of it (``banner``)."""
    environment = jinja2.Environment(
        loader=jinja2.PackageLoader("ckspace.emit", "templates"),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        autoescape=False,
    )
    environment.globals["banner"] = banner
    return environment


def include_all_name(variant: Variant) -> str:
    return f"include_all_grouped_conv_{variant.value}_kernels.hpp"


@dataclass(frozen=True)
class SelectorOptions:
    """``--with-selector``: write the dispatcher (:mod:`ckspace.emit.dispatcher`); ``model`` is one
    cell's model directory (the others use the shipped models or the analytical score)."""

    model: Path | None = None
    fallbacks: bool = False
    """Also emit, as fallback-only kernels, the narrower-vector variants the kernels' families need
    to serve every channel count (:func:`with_fallbacks`)."""
    hipdnn_plugin: bool = False
    """Also emit the hipDNN engine plugin over the dispatcher (:mod:`ckspace.emit.hipdnn_plugin`)."""


@dataclass(frozen=True)
class RenderedTree:
    """A whole tree in memory: ``files`` maps each path in the tree to its bytes (the manifest's
    aside), the kernels' files first in name order, then the shared ones; ``manifest`` records them."""

    files: Mapping[str, bytes]
    manifest: Manifest


def ck_broken(configs: Sequence[GemmConfig], revision: CkRevision) -> list[list[str]]:
    """For each config, the ``ck_revision`` rules it breaks (empty: the CK revision can build it), as
    the catalogue states them for its cell (:func:`~ckspace.constraints.rulebook.catalogue.ck_revision_rules`)."""
    by_cell: dict[tuple[str, Variant, int, Dtype], list[int]] = defaultdict(list)
    for i, config in enumerate(configs):
        by_cell[config.arch, config.variant, config.ndim, config.dtype].append(i)
    broken: list[list[str]] = [[] for _ in configs]
    for (arch, variant, ndim, dtype), members in by_cell.items():
        rules = ck_revision_rules(revision, arch, Cell(variant, ndim, dtype))
        if not rules:
            continue
        rows = [configs[i].row() for i in members]
        masks = rule_masks(rules, columns(rows, GEMM_FIELD_NAMES), len(rows))
        for j, i in enumerate(members):
            broken[i] = [name for name, mask in masks.items() if not mask[j]]
    return broken


def buildable(kernels: Iterable[Kernel], revision: CkRevision) -> tuple[list[GemmConfig], list[ExcludedKernel], int]:
    """Split listed kernels into emittable configs, ck-revision exclusions and a depthwise count."""
    depthwise = 0
    listed: list[GemmConfig] = []
    for kernel in kernels:
        if kernel.depthwise:
            depthwise += 1
        elif kernel.valid:
            cell = kernel.cell
            listed.append(GemmConfig.from_row(kernel.arch, cell.variant, cell.ndim, cell.dtype, kernel.row))
    configs: list[GemmConfig] = []
    excluded: list[ExcludedKernel] = []
    for config, broken in zip(listed, ck_broken(listed, revision), strict=True):
        if broken:
            excluded.append(ExcludedKernel(name=config.name, rules=broken))
        else:
            configs.append(config)
    configs.sort(key=lambda c: c.name)
    excluded.sort(key=lambda e: e.name)
    return configs, excluded, depthwise


def with_fallbacks(configs: list[GemmConfig], revision: CkRevision) -> tuple[list[GemmConfig], frozenset[str]]:
    """``--fallbacks``: the configs plus, as fallback-only kernels, the vector-width variants their
    families need to serve every channel count (:func:`~ckspace.select.fallbacks.serving_variants`)
    that are kernels of the target of this CK (it can build them, upstream does not document them as
    wrong), as the selector's fallbacks are."""
    from ckspace.environment.target import resolve_target

    have = {c.name for c in configs}
    extra: dict[str, GemmConfig] = {}
    for family in serving_variants(configs, resolve_target(revision)):
        for variant in family:
            if variant.name not in have:
                extra.setdefault(variant.name, variant)
    added = list(extra.values())
    return sorted(configs + added, key=lambda c: c.name), frozenset(c.name for c in added)


def render_tree(
    kernels: Iterable[Kernel],
    revision: CkRevision,
    *,
    arch: str,
    request: Mapping[str, Any],
    selector: SelectorOptions | None = None,
) -> RenderedTree:
    """The tree of ``kernels`` for ``revision``; see the module docstring. ``request`` is recorded
    in the manifest as given. ``arch`` is one arch, or several comma-separated (a library of several
    archs: each arch's kernels are those listed for it, a kernel several archs list is emitted once
    and the manifest says which archs it serves; :func:`~ckspace.emit.dispatcher.fleet_dispatcher_sources`)."""
    archs = arch.split(",")
    configs, excluded, depthwise = buildable(kernels, revision)
    by_arch = {a: [c for c in configs if c.arch == a] for a in archs}
    fallback_only: dict[str, frozenset[str]] = {a: frozenset() for a in archs}
    if selector is not None and selector.fallbacks:
        for a in archs:
            by_arch[a], fallback_only[a] = with_fallbacks(by_arch[a], revision)
    for a, members in by_arch.items():
        names = [c.name for c in members]
        if len(set(names)) != len(names):
            raise CkspaceError(f"duplicate kernel names in the request for {a} (several rule sets?)")
    served: dict[str, list[str]] = {}  # kernel name -> the archs that list it
    union: dict[str, GemmConfig] = {}
    for a in archs:
        for config in by_arch[a]:
            served.setdefault(config.name, []).append(a)
            union.setdefault(config.name, config)
    configs = [union[name] for name in sorted(union)]
    fleet = len(archs) > 1
    base = {"revision": revision}
    files, emitted = _kernel_files(configs, base, served if fleet else None)
    shared = _shared_files(configs, base)
    record = plugin = None
    if selector is not None:
        if fleet:
            dispatch, record = _fleet_dispatcher(by_arch, fallback_only, selector.model)
        else:
            dispatch, record = _dispatcher(configs, fallback_only[arch], arch, selector.model)
        shared.update(dispatch)
        if selector.hipdnn_plugin:
            files_of_plugin, plugin = _hipdnn_plugin(configs, arch, by_arch if fleet else None)
            shared.update(files_of_plugin)
    manifest = Manifest(
        ckspace_version=__version__,
        arch=arch,
        archs=archs if fleet else None,
        request=dict(request),
        ck_revision=revision,
        kernels=emitted,
        shared=[FileRecord(path=p, sha256=sha256(d)) for p, d in sorted(shared.items())],
        excluded=excluded,
        depthwise_skipped=depthwise,
        depthwise_note=depthwise_note(revision) if depthwise else None,
        dispatcher=record,
        hipdnn=plugin,
    )
    return RenderedTree(files={**files, **shared}, manifest=manifest)


def _kernel_files(
    configs: Sequence[GemmConfig], base: Mapping[str, Any], served: Mapping[str, list[str]] | None = None
) -> tuple[dict[str, bytes], list[EmittedKernel]]:
    """Each kernel's header, compilation unit and dispatcher wrapper, and its manifest record
    (``served``: in a library of several archs, the archs each kernel serves, which its header
    names and its record lists)."""
    environment = template_environment()
    roles = (
        ("header", "{}.hpp", environment.get_template("kernel.hpp.j2")),
        ("source", "{}.cpp", environment.get_template("kernel.cpp.j2")),
        (
            "wrapper",
            f"{WRAPPER_DIR}/dispatcher_wrapper_{{}}.hpp",
            environment.get_template("dispatcher_wrapper.hpp.j2"),
        ),
    )
    files: dict[str, bytes] = {}
    emitted: list[EmittedKernel] = []
    for config in configs:
        context = {**base, "k": kernel_context(config)}
        if served is not None:
            context["k"]["arch"] = " ".join(served[config.name])
        records = {}
        for role, pattern, template in roles:
            path = pattern.format(config.name)
            files[path] = data = template.render(context).encode()
            records[role] = FileRecord(path=path, sha256=sha256(data))
        emitted.append(
            EmittedKernel(
                name=config.name,
                variant=config.variant.value,
                config=config.fields(),
                archs=served[config.name] if served is not None else None,
                **records,
            )
        )
    return files, emitted


def _shared_files(configs: Sequence[GemmConfig], base: Mapping[str, Any]) -> dict[str, bytes]:
    """The registry header, each variant's include-all header and the register-all header."""
    environment = template_environment()
    per_variant = {v: [c.name for c in configs if c.variant == v] for v in Variant}
    shared = {REGISTRY_HEADER: environment.get_template("ckspace_registry.hpp.j2").render(base).encode()}
    for variant in Variant:
        shared[include_all_name(variant)] = (
            environment.get_template("include_all.hpp.j2")
            .render({**base, "variant": variant.value, "kernels": per_variant[variant]})
            .encode()
        )
    shared[REGISTER_ALL] = (
        environment.get_template("register_all.hpp.j2")
        .render({**base, "variants": [(v.value, per_variant[v]) for v in Variant], "total": len(configs)})
        .encode()
    )
    return shared


def _dispatcher(
    configs: Sequence[GemmConfig], fallback_only: frozenset[str], arch: str, model: Path | None
) -> tuple[dict[str, bytes], DispatcherRecord]:
    """``--with-selector``: the dispatcher's files and their manifest record."""
    library = Library.build(configs, fallback_only)
    model_dirs = _model_dirs(model, library)
    files = dispatcher_sources(library, arch, template_environment(), model_dirs)
    record = DispatcherRecord(
        kernels=[c.name for c in library.kernels],
        fallback_only=sorted(fallback_only),
        models=_model_sources(files, library, arch, model_dirs),
        host_units=host_units(list(files)),
        run_unit=RUN_SOURCE,
    )
    return files, record


def _fleet_dispatcher(
    by_arch: Mapping[str, Sequence[GemmConfig]], fallback_only: Mapping[str, frozenset[str]], model: Path | None
) -> tuple[dict[str, bytes], DispatcherRecord]:
    """``--with-selector`` for several archs: each arch's library of its own kernels, one dispatcher."""
    empty = [a for a, members in by_arch.items() if not members]
    if empty:
        raise CkspaceError(
            f"no kernel to emit for {', '.join(empty)}: a library of several archs needs kernels of each"
        )
    libraries = {a: Library.build(members, fallback_only[a]) for a, members in by_arch.items()}
    model_dirs = {a: _model_dirs(model, library, a) for a, library in libraries.items()}
    if model is not None and not any(model_dirs.values()):
        raise CkspaceError(f"--model {model} is for none of the archs {', '.join(by_arch)}")
    files = fleet_dispatcher_sources(libraries, template_environment(), model_dirs)
    names = sorted({c.name for library in libraries.values() for c in library.kernels})
    record = DispatcherRecord(
        kernels=names,
        fallback_only=sorted(set.intersection(*(set(f) for f in fallback_only.values())) & set(names)),
        models={
            f"{a} {cell}": source
            for a, library in libraries.items()
            for cell, source in _model_sources(files, library, a, model_dirs[a], a).items()
        },
        host_units=host_units(list(files)),
        run_unit=RUN_SOURCE,
        archs={a: [c.name for c in library.kernels] for a, library in libraries.items()},
    )
    return files, record


def _hipdnn_plugin(
    configs: Sequence[GemmConfig], arch: str, by_arch: Mapping[str, Sequence[GemmConfig]] | None = None
) -> tuple[dict[str, bytes], HipdnnRecord]:
    """``--hipdnn-plugin``: the plugin's files and their manifest record (``by_arch``: each arch's
    kernels of a library of several archs, whose plugin has each arch's engines)."""
    variants = sorted({c.variant for c in configs}, key=lambda v: v.code)
    dtypes = sorted({c.dtype for c in configs}, key=lambda d: d.code)
    fleet = (
        {a: sorted({c.variant for c in members}, key=lambda v: v.code) for a, members in by_arch.items()}
        if by_arch is not None
        else None
    )
    label = "_".join(by_arch) if by_arch is not None else arch
    files = hipdnn_plugin.plugin_sources(label, variants, dtypes, template_environment(), fleet)
    listed = hipdnn_plugin.fleet_engines(fleet) if fleet else hipdnn_plugin.engines(arch, variants)
    record = HipdnnRecord(
        plugin=plugin_name(label),
        engines={e.name: e.id for e in listed},
        schema_file=hipdnn_plugin.SCHEMA,
        source=hipdnn_plugin.SOURCE,
    )
    return files, record


def _model_dirs(model: Path | None, library: Library, arch: str | None = None) -> dict[tuple[Variant, Dtype], Path]:
    """``--model`` as the model of its cell, which must be one of the library's (``arch``: the
    library is that arch's part of a library of several, and a model of another arch is not its)."""
    if model is None:
        return {}
    from ckspace.select.store import load_model

    _, _, card = load_model(model)
    if arch is not None and card.arch != arch:
        return {}
    cell = (Variant.parse(card.variant), Dtype.parse(card.dtype))
    if cell not in {(c.variant, c.dtype) for c in library.kernels}:
        raise CkspaceError(
            f"--model {model} is a {card.variant} {card.dtype} model; the emitted kernels have no such cell"
        )
    return {cell: model}


def _model_sources(
    files: Mapping[str, bytes],
    library: Library,
    arch: str,
    model_dirs: Mapping[tuple[Variant, Dtype], Path],
    unit: str | None = None,
) -> dict[str, str]:
    """Per cell what ranks it (the manifest's ``dispatcher.models``; ``unit``: of that arch's part
    of a library of several archs): a model by the sha256 of its ranker file as its card records it
    (the model's identity: ``ckspace info`` tells the shipped model from another by it), or the
    analytical score where no ranker was generated."""
    from ckspace.select.store import CARD_FILE, RANKER_FILE, ModelCard

    cells = sorted({(c.variant, c.dtype) for c in library.kernels}, key=lambda vd: (vd[0].code, vd[1].code))
    out = {}
    for variant, dtype in cells:
        if ranker_source(variant, dtype, unit) not in files:
            out[f"{variant.value} {dtype.value}"] = "analytical"
            continue
        card_path = model_directory(arch, variant, dtype, model_dirs) / CARD_FILE
        card = read_json_model(ModelCard, card_path, "model card")
        out[f"{variant.value} {dtype.value}"] = ranked_by_model(card.files[RANKER_FILE])
    return out
