"""Rendering kernel configs into a CK Tile source tree: per kernel the header, compilation unit and
dispatcher wrapper upstream's ``unified_grouped_conv_codegen.py`` writes, plus the per-variant headers.

Input is what the space lists (:class:`~ckspace.space.listing.Kernel`); configs the CK revision
cannot build are dropped by its ``ck_revision`` rules and listed in the manifest with the rule
names, depthwise configs are counted and skipped with the reason. Output is deterministic: files
are rendered from sorted inputs with no timestamps, and only changed files are rewritten.
"""

from __future__ import annotations

import json
import logging
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import jinja2

from ckspace import __version__
from ckspace.constraints.ck_rules import ck_rules, depthwise_note
from ckspace.constraints.classify import columns, rule_masks
from ckspace.core.ck import CkRevision
from ckspace.core.config import GemmConfig
from ckspace.core.errors import CkspaceError
from ckspace.core.fields import GEMM_FIELD_NAMES
from ckspace.core.files import sha256, write_if_changed
from ckspace.core.vocab import Dtype, Variant
from ckspace.emit.cxx import kernel_context
from ckspace.emit.dispatcher import MODEL_DIR, RUN_SOURCE, Library, dispatcher_sources, host_units
from ckspace.select.fallbacks import serving_variants
from ckspace.emit.manifest import (
    MANIFEST_NAME,
    DispatcherRecord,
    EmittedKernel,
    ExcludedKernel,
    FileRecord,
    Manifest,
)
from ckspace.space.listing import Kernel

log = logging.getLogger(__name__)

REGISTRY_HEADER = "ckspace_registry.hpp"
REGISTER_ALL = "register_all_grouped_conv_kernels.hpp"
WRAPPER_DIR = "dispatcher_wrappers"


@cache
def _environment() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.PackageLoader("ckspace.emit", "templates"),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        autoescape=False,
    )


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


@dataclass
class EmitResult:
    manifest: Manifest
    written: list[str] = field(default_factory=list)
    unchanged: int = 0
    removed: list[str] = field(default_factory=list)


def ck_broken(configs: Sequence[GemmConfig], revision: CkRevision) -> list[list[str]]:
    """For each config, the ``ck_revision`` rules it breaks (empty: the CK revision can build it)."""
    by_cell: dict[tuple[str, Variant, int, Dtype], list[int]] = defaultdict(list)
    for i, config in enumerate(configs):
        by_cell[config.arch, config.variant, config.ndim, config.dtype].append(i)
    broken: list[list[str]] = [[] for _ in configs]
    for (arch, variant, ndim, dtype), members in by_cell.items():
        rules = [r for r in ck_rules(revision, variant, dtype, arch=arch, ndim=ndim) if not r.vacuous]
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
    for config, broken in zip(listed, ck_broken(listed, revision)):
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
    that this CK can build."""
    have = {c.name for c in configs}
    extra: dict[str, GemmConfig] = {}
    for family in serving_variants(configs):
        for variant in family:
            if variant.name not in have:
                extra.setdefault(variant.name, variant)
    candidates = list(extra.values())
    added = [c for c, broken in zip(candidates, ck_broken(candidates, revision)) if not broken]
    return sorted(configs + added, key=lambda c: c.name), frozenset(c.name for c in added)


def _model_dirs(model: Path | None, library: Library) -> dict[tuple[Variant, Dtype], Path]:
    """``--model`` as the model of its cell, which must be one of the library's."""
    if model is None:
        return {}
    from ckspace.select.store import load_model

    _, _, card = load_model(model)
    cell = (Variant.parse(card.variant), Dtype.parse(card.dtype))
    if cell not in {(c.variant, c.dtype) for c in library.kernels}:
        raise CkspaceError(f"--model {model} is a {card.variant} {card.dtype} model; the emitted kernels have no "
                           "such cell")
    return {cell: model}


def _model_sources(files: Mapping[str, bytes], library: Library) -> dict[str, str]:
    cells = sorted({(c.variant, c.dtype) for c in library.kernels}, key=lambda vd: (vd[0].code, vd[1].code))
    out = {}
    for variant, dtype in cells:
        ranker = files.get(f"{MODEL_DIR}/cks_{variant.value}_{dtype.value}_ranker/main.c")
        out[f"{variant.value} {dtype.value}"] = f"model {sha256(ranker)}" if ranker else "analytical"
    return out


def _previous_files(out: Path) -> set[str]:
    path = out / MANIFEST_NAME
    if not path.is_file():
        return set()
    try:
        return set(Manifest.model_validate_json(path.read_bytes()).files())
    except ValueError:
        log.warning("ignoring unreadable %s", path)
        return set()


def emit(kernels: Iterable[Kernel], out: Path, revision: CkRevision, *,
         arch: str, request: Mapping[str, Any], selector: SelectorOptions | None = None) -> EmitResult:
    """Write the tree for ``kernels`` under ``out``; see the module docstring."""
    if out.exists() and not out.is_dir():
        raise CkspaceError(f"--out {str(out)!r} exists and is not a directory")
    configs, excluded, depthwise = buildable(kernels, revision)
    fallback_only: frozenset[str] = frozenset()
    if selector is not None and selector.fallbacks:
        configs, fallback_only = with_fallbacks(configs, revision)
    names = [c.name for c in configs]
    if len(set(names)) != len(names):
        raise CkspaceError("duplicate kernel names in the request (several archs or rule sets?)")
    env = _environment()
    base = {"version": __version__, "revision": revision}
    kernel_hpp = env.get_template("kernel.hpp.j2")
    kernel_cpp = env.get_template("kernel.cpp.j2")
    wrapper = env.get_template("dispatcher_wrapper.hpp.j2")

    files: dict[str, bytes] = {}
    emitted: list[EmittedKernel] = []
    per_variant: dict[Variant, list[str]] = {v: [] for v in Variant}
    for config in configs:
        context = {**base, "k": kernel_context(config)}
        name = config.name
        records = {}
        for role, path, template in (("header", f"{name}.hpp", kernel_hpp),
                                     ("source", f"{name}.cpp", kernel_cpp),
                                     ("wrapper", f"{WRAPPER_DIR}/dispatcher_wrapper_{name}.hpp", wrapper)):
            data = template.render(context).encode()
            files[path] = data
            records[role] = FileRecord(path=path, sha256=sha256(data))
        emitted.append(EmittedKernel(name=name, variant=config.variant.value, config=config.fields(), **records))
        per_variant[config.variant].append(name)

    shared: dict[str, bytes] = {REGISTRY_HEADER: env.get_template("ckspace_registry.hpp.j2").render(base).encode()}
    for variant in Variant:
        shared[include_all_name(variant)] = env.get_template("include_all.hpp.j2").render(
            {**base, "variant": variant.value, "kernels": per_variant[variant]}).encode()
    shared[REGISTER_ALL] = env.get_template("register_all.hpp.j2").render(
        {**base, "variants": [(v.value, per_variant[v]) for v in Variant], "total": len(configs)}).encode()
    record = None
    if selector is not None:
        library = Library.build(configs, fallback_only)
        dispatch = dispatcher_sources(library, arch, env, _model_dirs(selector.model, library))
        shared.update(dispatch)
        record = DispatcherRecord(kernels=[c.name for c in library.kernels], fallback_only=sorted(fallback_only),
                                  models=_model_sources(dispatch, library),
                                  host_units=host_units(list(dispatch)), run_unit=RUN_SOURCE)
    files.update(shared)

    manifest = Manifest(
        ckspace_version=__version__, arch=arch, request=dict(request), ck_revision=revision,
        kernels=emitted, shared=[FileRecord(path=p, sha256=sha256(d)) for p, d in sorted(shared.items())],
        excluded=excluded, depthwise_skipped=depthwise,
        depthwise_note=depthwise_note(revision) if depthwise else None, dispatcher=record,
    )
    files[MANIFEST_NAME] = (json.dumps(manifest.model_dump(mode="json"), indent=1, sort_keys=True) + "\n").encode()

    result = EmitResult(manifest=manifest)
    stale = _previous_files(out) - set(files)
    for path, data in sorted(files.items()):
        if write_if_changed(out / path, data):
            result.written.append(path)
        else:
            result.unchanged += 1
    for path in sorted(stale):
        (out / path).unlink(missing_ok=True)
        result.removed.append(path)
    log.info("emitted %d kernels (%d files written, %d unchanged, %d removed, %d excluded by CK, "
             "%d depthwise skipped)", len(configs), len(result.written), result.unchanged,
             len(result.removed), len(excluded), depthwise)
    return result
