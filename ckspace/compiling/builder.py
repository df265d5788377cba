"""``ckspace build``: compile an emitted tree into one shared library, batched and cached.

:func:`build` checks the tree, plans its translation units (:mod:`~ckspace.compiling.units`: kernels
``batch`` to a unit, the cached ones left out), has an executor (:mod:`~ckspace.compiling.executor`)
compile the misses — a generated ``build.ninja`` on this machine by default, or tasks on a Ray
cluster (``--executor ray``); one failure never stops the others — then compiles the kernels of
each failed unit one per unit, so the report names exactly the kernels that fail and their first
error. It then writes each kernel's log, links what compiled and writes the report. Everything
after the compiles is the same whichever executor ran them: the report and the kernels' logs are
:mod:`~ckspace.compiling.report`'s.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import logging
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import NamedTuple

from ckspace.compiling import objcache, plugin_build
from ckspace.compiling.executor import Executor, Unit, executor_name
from ckspace.compiling.ninja_executor import NinjaExecutor
from ckspace.compiling.package import write_host_package, write_kernels_package
from ckspace.compiling.report import REPORT_NAME, BuildReport, first_error, kernel_results
from ckspace.compiling.toolchain import (
    Toolchain,
    discover,
    discover_fleet,
    export_flags,
    for_archs,
    host_compile_command,
)
from ckspace.compiling.units import Planner
from ckspace.core.ck import CkRevision
from ckspace.core.errors import CkspaceError, InvalidInputError
from ckspace.core.vocab import parse_arch
from ckspace.emit import manifest as tree_layout
from ckspace.emit.dispatcher import HEADER as DISPATCH_HEADER
from ckspace.emit.dispatcher import LAYOUT_HEADER
from ckspace.emit.manifest import MANIFEST_NAME, Manifest
from ckspace.emit.rendering import REGISTRY_HEADER
from ckspace.environment.ck_header_cache import find_revision
from ckspace.environment.compilers import identify
from ckspace.environment.cpus import available_cpus
from ckspace.environment.files import sha256, unique_temporary, write_atomic, write_if_changed
from ckspace.environment.inputs import read_input, read_json_model
from ckspace.environment.progress import counted_steps
from ckspace.environment.trees import locked_directory

log = logging.getLogger(__name__)


def _compile(executor: Executor, stage: str, build_dir: Path, units: list[Unit], progress: bool, label: str) -> None:
    """Compile the cache misses among ``units`` with ``executor``; store their objects in the cache
    (atomically: a reader never sees half an object) and their logs under ``logs/``."""
    if not units:
        return
    with counted_steps(label, sum(len(u.items) for u in units), bar=progress) as finished:
        results = executor.compile(stage, units, lambda unit: finished(unit.items))
    for unit in units:
        result = results[unit.name]
        write_if_changed(tree_layout.logs_dir(build_dir) / f"{unit.name}.log", result.log.encode())
        if result.object is not None:
            objcache.store_bytes(unit.key, result.object)


def _reading_tree(function):
    """Run ``function(tree, ...)`` holding the tree's lock shared (builds and benches of one tree run
    side by side; each links to a name of its own), so that an emit, which holds it exclusively,
    never rewrites the sources while they are compiled (an object would be cached under the key of
    sources it was not compiled from). A tree that is not a directory is ``function``'s to refuse."""

    @functools.wraps(function)
    def run(tree, *args, **kwargs):
        if not os.path.isdir(tree):
            return function(tree, *args, **kwargs)
        with locked_directory(Path(os.path.realpath(tree)), "tree", shared=True):
            return function(tree, *args, **kwargs)

    return run


def arch_list(arch: str | Sequence[str]) -> list[str]:
    """The archs of a build: one (``gfx942``), or a library of several (``gfx942,gfx950`` or a list),
    each validated, sorted and once."""
    names = arch.split(",") if isinstance(arch, str) else list(arch)
    return sorted({parse_arch(name) for name in names})


def arch_label(archs: Sequence[str]) -> str:
    """The name of a library's build folder, files and package: its arch, or its archs joined by ``_``."""
    return "_".join(archs)


@_reading_tree
def build(
    tree: Path,
    arch: str | Sequence[str],
    *,
    jobs: int | None,
    batch: int,
    ck_root: str | None = None,
    progress: bool = False,
    allow_edited: bool = False,
    executor: str = "local",
    address: str | None = None,
) -> BuildReport:
    """Compile every kernel of the emitted ``tree`` for ``arch``; see the module docstring. A tree
    of several archs (``arch`` lists them: ``gfx942,gfx950``) is one library in
    ``DIR/build/gfx942_gfx950/``: each kernel compiled for every arch that holds it (one
    ``--offload-arch`` each), the kernels of one set of archs batched together.

    ``executor`` ``local`` compiles here with ninja, ``jobs`` at once (default: :func:`default_jobs`); ``ray``
    on the Ray cluster at ``address`` (:func:`ckspace.compiling.cluster.connected` says which
    without one), ``jobs`` units in flight (default: the cluster's CPUs)."""
    started = time.monotonic()
    executor = executor_name(executor)
    archs = arch_list(arch)
    label = arch_label(archs)
    manifest, revision = _checked(
        tree,
        archs,
        jobs=jobs,
        batch=batch,
        ck_root=ck_root,
        allow_edited=allow_edited,
        executor=executor,
        address=address,
    )
    toolchain = discover(archs[0]) if len(archs) == 1 else discover_fleet(archs)
    tree = tree.resolve()
    build_dir = tree_layout.build_dir(tree, label)
    tree_layout.logs_dir(build_dir).mkdir(parents=True, exist_ok=True)
    groups = _compile_groups(manifest, toolchain, archs)
    compiled = _compile_every_group(
        tree, build_dir, manifest, revision, toolchain, groups, executor, address, jobs, batch, progress
    )
    linked = _link_library_and_plugin(tree, build_dir, label, toolchain, manifest, compiled.every_object())
    report = _report(label, toolchain, revision, batch, executor, compiled, linked, time.monotonic() - started)
    write_atomic(build_dir / REPORT_NAME, (report.model_dump_json(indent=1) + "\n").encode())
    if linked.library is not None:
        write_kernels_package(
            tree,
            build_dir,
            Path(linked.library),
            manifest,
            toolchain,
            revision.include_dir,
            [(t, names) for t, _, names in groups],
        )
    return report


@dataclasses.dataclass
class _Compiled:
    """What the compiles of every group left: each kernel's result, the objects to link (the
    kernels', and the dispatcher's when the tree has one), the units planned and those compiled in
    this run (the rest came from the object cache), and how many units ran at once."""

    results: list = dataclasses.field(default_factory=list)
    objects: list[str] = dataclasses.field(default_factory=list)
    dispatcher_objects: list[str] = dataclasses.field(default_factory=list)
    units: int = 0
    fresh: set[str] = dataclasses.field(default_factory=set)
    jobs: int = 0

    def every_object(self) -> list[str]:
        return sorted(self.objects + self.dispatcher_objects)


def _compile_every_group(
    tree: Path,
    build_dir: Path,
    manifest: Manifest,
    revision: CkRevision,
    toolchain: Toolchain,
    groups: list[tuple[Toolchain, str, list[str]]],
    executor: str,
    address: str | None,
    jobs: int | None,
    batch: int,
    progress: bool,
) -> _Compiled:
    """Each group's kernels compiled in batches, the kernels of a failed batch again one per unit
    (so a failure names its kernel), and the dispatcher compiled with the group of every arch once
    a kernel compiled (it is linked beside kernels, never alone)."""
    compiled = _Compiled()
    for group_toolchain, prefix, names in groups:
        planner = Planner(tree, group_toolchain, revision)
        with _runner(executor, address, jobs, tree, build_dir, group_toolchain, revision) as (runner, used_jobs):
            batches = planner.batches(names, batch, prefix)
            what = f"compiling {group_toolchain.arch}" if len(groups) == 1 else f"compiling for {group_toolchain.arch}"
            _compile(runner, "build", build_dir, batches.misses, progress, what)
            failed = planner.failed(batches.units)
            singles = planner.singles(failed)
            _compile(runner, "singles", build_dir, singles.misses, progress, "isolating failures")
            group_fresh = {u.name for u in batches.misses + singles.misses}  # compiled in this run
            reported = [u for u in batches.units if u not in failed] + singles.units
            group_results, group_objects = kernel_results(build_dir, planner, reported, group_fresh)
            compiled.fresh |= group_fresh
            compiled.results += group_results
            compiled.objects += group_objects
            compiled.units += len(batches.units) + len(singles.units)
            compiled.jobs = used_jobs
            if group_toolchain is toolchain and manifest.dispatcher is not None and compiled.objects:
                compiled.dispatcher_objects = _dispatcher_objects(planner, build_dir, manifest, runner, progress)
    compiled.results.sort(key=lambda r: r.name)
    return compiled


class _Linked(NamedTuple):
    """The library and the hipDNN plugin linked, or why not (a failure is reported, never raised:
    the kernels' results are worth the report either way)."""

    library: str | None
    link_error: str | None
    plugin: str | None
    plugin_error: str | None


def _link_library_and_plugin(
    tree: Path, build_dir: Path, label: str, toolchain: Toolchain, manifest: Manifest, objects: list[str]
) -> _Linked:
    """The kernels' library from what compiled, then, for a tree emitted with the plugin and once the
    library linked, the plugin from the same objects."""
    library, link_error = _link(build_dir, label, toolchain, objects)
    plugin, plugin_error = None, None
    if library is not None and manifest.hipdnn is not None:
        try:
            plugin = str(_link_plugin(tree, build_dir, label, toolchain, objects))
        except CkspaceError as exc:
            plugin_error = str(exc)
    return _Linked(library, link_error, plugin, plugin_error)


def _report(
    label: str,
    toolchain: Toolchain,
    revision: CkRevision,
    batch: int,
    executor: str,
    compiled: _Compiled,
    linked: _Linked,
    seconds: float,
) -> BuildReport:
    """What ``build_report.json`` and ``ckspace build`` say: the inputs of the build, the counts of
    its units and kernels, and what it linked."""
    ok = sum(r.status == "ok" for r in compiled.results)
    return BuildReport(
        arch=label,
        toolchain=toolchain,
        ck_revision=revision.label,
        ck_fingerprint=revision.fingerprint,
        batch=batch,
        jobs=compiled.jobs,
        executor=executor,
        units=compiled.units,
        compiled_units=len(compiled.fresh),
        seconds=round(seconds, 2),
        ok=ok,
        failed=len(compiled.results) - ok,
        cached=sum(r.cached for r in compiled.results),
        library=linked.library,
        link_error=linked.link_error,
        kernels=compiled.results,
        plugin=linked.plugin,
        plugin_error=linked.plugin_error,
    )


def _compile_groups(
    manifest: Manifest, toolchain: Toolchain, archs: Sequence[str]
) -> list[tuple[Toolchain, str, list[str]]]:
    """The kernels compiled together (toolchain, unit name prefix, kernel names): all of them with
    ``toolchain`` for one arch; for several, the kernels of each set of archs with a toolchain for
    that set, the set of all archs last (it compiles the dispatcher too)."""
    names = [k.name for k in manifest.kernels]
    if len(archs) == 1:
        return [(toolchain, "batch", names)]
    by_set: dict[tuple[str, ...], list[str]] = {}
    for kernel in manifest.kernels:
        by_set.setdefault(tuple(sorted(kernel.archs or archs)), []).append(kernel.name)
    full = tuple(archs)
    order = [*sorted((s for s in by_set if s != full), key=lambda s: (len(s), s)), full]
    return [
        (toolchain if s == full else for_archs(toolchain, s), f"batch_{arch_label(s)}_", by_set.get(s, []))
        for s in order
    ]


def _checked(
    tree: Path,
    archs: Sequence[str],
    *,
    jobs: int | None,
    batch: int,
    ck_root: str | None,
    allow_edited: bool,
    executor: str,
    address: str | None,
) -> tuple[Manifest, CkRevision]:
    """The tree's manifest and the CK headers to compile against, once everything refused before a
    compile is refused, in this order: the options, a tree without a manifest, a tree emitted for
    another arch (its kernels were chosen by that arch's rules: compiled for this one, some would
    not compile and the rest would be another arch's choice), sources that are missing or edited
    (:func:`verify_sources`), an object cache that cannot be written, CK headers other than the
    tree's."""
    if address is not None and executor != "ray":
        raise InvalidInputError("--address names a Ray cluster; it needs --executor ray")
    manifest = _read_manifest(tree)
    if sorted(manifest.arch_list) != list(archs):
        emitted, asked = " ".join(sorted(manifest.arch_list)), " ".join(archs)
        raise InvalidInputError(
            f"{tree} was emitted for {emitted}, not {asked}: build it with --arch {emitted}, "
            f"or re-emit it with --arch {asked} for {asked} kernels"
        )
    if (jobs is not None and jobs < 1) or batch < 1:
        raise CkspaceError("--jobs and --batch must be at least 1")
    verify_sources(tree, manifest, allow_edited)
    _check_object_cache()
    revision = find_revision(ck_root)
    if revision.fingerprint != manifest.ck_revision.fingerprint:
        raise CkspaceError(
            f"{tree} was emitted for CK {manifest.ck_revision.label}, but the CK headers "
            f"found are {revision.label} ({revision.include_dir}); re-emit or pass --ck-root"
        )
    if manifest.hipdnn is not None:  # before the kernels compile, not after
        plugin_build.flatbuffers()
        plugin_build.host_cxx_compiler()
    return manifest, revision


@contextlib.contextmanager
def _runner(
    executor: str,
    address: str | None,
    jobs: int | None,
    tree: Path,
    build_dir: Path,
    toolchain: Toolchain,
    revision: CkRevision,
) -> Iterator[tuple[Executor, int]]:
    """The executor named ``executor`` (connected to its Ray cluster while the block runs) and the
    units it runs at once: ``jobs``, else its default."""
    if executor == "ray":
        from ckspace.compiling.cluster import connected
        from ckspace.compiling.ray_executor import RayExecutor

        with connected(address) as ray:
            jobs = jobs or max(1, int(ray.cluster_resources().get("CPU", 1)))
            yield RayExecutor(ray, tree, toolchain, revision.include_dir, jobs), jobs
    else:
        jobs = jobs or default_jobs()
        yield NinjaExecutor(build_dir, toolchain, (str(tree), revision.include_dir), jobs), jobs


def verify_sources(tree: Path, manifest: Manifest, allow_edited: bool) -> None:
    """Refuse a tree whose sources are missing or differ from the sha256 the manifest recorded
    (edited by hand, half-written, or from another emit), unless ``allow_edited``: what is built is
    then what ckspace emitted. A source that is a fifo or a device is refused, not waited on
    (:func:`~ckspace.environment.inputs.read_input`)."""
    records = [*manifest.shared, *(r for k in manifest.kernels for r in (k.header, k.source, k.wrapper))]
    missing, edited = [], []
    for record in records:
        path = tree / record.path
        if not path.exists():
            missing.append(record.path)
        elif sha256(read_input(path, "source")) != record.sha256:
            edited.append(record.path)
    if missing:
        raise CkspaceError(
            f"{tree}: {len(missing)} source(s) of {MANIFEST_NAME} are missing (e.g. {missing[0]}); re-emit the tree"
        )
    if edited and not allow_edited:
        raise CkspaceError(
            f"{tree}: {len(edited)} source(s) differ from the sha256 in {MANIFEST_NAME} "
            f"(e.g. {edited[0]}); re-emit, or --allow-edited to build them as they are"
        )
    if edited:
        log.warning("building %d edited source(s) (--allow-edited), e.g. %s", len(edited), edited[0])


def _check_object_cache() -> None:
    """Fail before compiling, not after, when compiled objects cannot be kept."""
    directory = objcache.object_cache_dir()
    try:
        directory.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=directory, prefix=".probe."):
            pass  # created and removed: the directory is writable
    except OSError as exc:
        raise CkspaceError(
            f"object cache {directory} is not writable ({exc.strerror}); set CKSPACE_BUILD_CACHE "
            "to a writable directory"
        ) from None


def _read_manifest(tree: Path) -> Manifest:
    path = tree / MANIFEST_NAME
    if not path.exists():
        raise CkspaceError(f"{tree} has no {MANIFEST_NAME} (run ckspace emit --out {tree} first)")
    return read_json_model(Manifest, path, "manifest")


def _host_objects(tree: Path, build_dir: Path, units: list[str]) -> list[str]:
    """The dispatcher's host C units compiled with the host C compiler (cached like the kernels)."""
    from ckspace.select.compiled import FLAGS, host_c_compiler

    compiler = host_c_compiler()
    if compiler is None:
        given = os.environ.get("CC")
        raise CkspaceError(
            f"CC is {given!r}, which names no executable (CC is one program, its flags go "
            "elsewhere); the dispatcher's host part needs a C compiler"
            if given
            else "the dispatcher's host part needs a C compiler ($CC, cc, gcc or clang); none was found"
        )
    identity = identify(compiler).digest
    objects = []
    for unit in units:
        source = tree / unit
        included = sorted(p for p in source.parent.glob(f"{source.stem}/*") if p.is_file())
        headers = [tree / DISPATCH_HEADER, tree / LAYOUT_HEADER]
        key = objcache.object_key(
            [read_input(p, "source") for p in (source, *included, *headers)], identity, FLAGS, "host", ""
        )
        cached = objcache.lookup(key)
        if cached is None:
            cached = _compile_host_unit(
                compiler,
                tree,
                source,
                tree_layout.objects_dir(build_dir) / tree_layout.HOST_LABEL / (unit.replace("/", "__") + ".o"),
            )
            objcache.store(key, cached)
            cached = objcache.lookup(key) or cached  # a cache that cannot be written costs time, not the link
        objects.append(str(cached))
    return objects


def _compile_host_unit(compiler: str, tree: Path, source: Path, obj: Path) -> Path:
    """Compile one host unit to ``obj``. The compiler writes a name of this build's own, renamed into
    place whole: two builds of one tree at once (two benches) would otherwise write, truncate and
    read one object file together."""
    obj.parent.mkdir(parents=True, exist_ok=True)
    tmp = unique_temporary(obj)
    try:
        done = subprocess.run(
            host_compile_command(compiler, tree, str(source), str(tmp)), capture_output=True, text=True, check=False
        )
        if done.returncode != 0:
            raise CkspaceError(
                f"compiling the dispatcher's {source.relative_to(tree)} failed: "
                f"{first_error(done.stderr) or done.stderr.strip()[-300:]}"
            )
        os.replace(tmp, obj)
    finally:
        tmp.unlink(missing_ok=True)
    return obj


def _dispatcher_objects(
    planner: Planner, build_dir: Path, manifest: Manifest, runner: Executor, progress: bool
) -> list[str]:
    """The host objects and the HIP ``ckspace_run`` unit of a tree emitted ``--with-selector``."""
    assert manifest.dispatcher is not None
    unit = planner.unit(
        "dispatch_run",
        [],
        f'#include "{manifest.dispatcher.run_unit}"\n',
        [manifest.dispatcher.run_unit, DISPATCH_HEADER, LAYOUT_HEADER, REGISTRY_HEADER],
    )
    if planner.cached(unit) is None:
        _compile(runner, "dispatch", build_dir, [unit], progress, "compiling ckspace_run")
    run_object = planner.cached(unit)
    if run_object is None:
        log_file = tree_layout.logs_dir(build_dir) / "dispatch_run.log"
        error = first_error(log_file.read_text(errors="replace")) if log_file.is_file() else None
        raise CkspaceError(f"compiling ckspace_run failed: {error or 'see ' + str(log_file)}")
    return [*_host_objects(planner.tree, build_dir, manifest.dispatcher.host_units), str(run_object)]


@_reading_tree
def build_host(tree: Path, allow_edited: bool = False) -> Path:
    """``ckspace build DIR --host-only``: the dispatcher's host part alone (no HIP, no kernels) as
    ``build/host/libckspace_dispatch.so``; ``ckspace_run`` is absent from it."""
    from ckspace.select.compiled import host_c_compiler

    manifest = _read_manifest(tree)
    if manifest.dispatcher is None:
        raise CkspaceError(f"{tree} has no dispatcher: emit it with --with-selector")
    verify_sources(tree, manifest, allow_edited)
    tree = tree.resolve()
    build_dir = tree_layout.host_build_dir(tree)
    objects = _host_objects(tree, build_dir, manifest.dispatcher.host_units)
    output = tree_layout.host_library(tree)
    output.parent.mkdir(parents=True, exist_ok=True)  # with every object cached, nothing else made it
    tmp = unique_temporary(output)  # two builds or benches of one tree link side by side
    try:
        done = subprocess.run(
            [host_c_compiler() or "cc", "-shared", "-fPIC", *objects, *export_flags(build_dir), "-o", str(tmp), "-lm"],
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode != 0:
            raise CkspaceError(
                f"linking the dispatcher failed: {first_error(done.stderr) or done.stderr.strip()[-300:]}"
            )
        os.replace(tmp, output)
    finally:
        tmp.unlink(missing_ok=True)
    write_host_package(tree, build_dir, output, manifest)
    return output


def _link(build_dir: Path, arch: str, toolchain: Toolchain, objects: list[str]) -> tuple[str | None, str | None]:
    """Link the kernels that compiled into ``libckspace_kernels_<arch>.so``."""
    if not objects:
        return None, None
    output = build_dir / tree_layout.kernels_library_name(arch)
    tmp = unique_temporary(output)  # two builds of one tree link side by side
    try:
        command = toolchain.link_command([*objects, *export_flags(build_dir)], str(tmp))
        result = subprocess.run(command, capture_output=True, text=True, check=False)
        tree_layout.logs_dir(build_dir).mkdir(parents=True, exist_ok=True)
        write_atomic(tree_layout.logs_dir(build_dir) / "link.log", (result.stdout + result.stderr).encode())
        if result.returncode != 0:
            return None, first_error(result.stderr) or "link failed (see logs/link.log)"
        os.replace(tmp, output)
    finally:
        tmp.unlink(missing_ok=True)
    return str(output), None


def _link_plugin(tree: Path, build_dir: Path, arch: str, toolchain: Toolchain, objects: list[str]) -> Path:
    """``libckspace_hipdnn_<arch>.so``: the hipDNN plugin linked with the kernels and the
    dispatcher, exporting hipDNN's plugin API alone (:mod:`~ckspace.compiling.plugin_build`)."""
    plugin = str(plugin_build.plugin_object(tree, build_dir))
    output = build_dir / tree_layout.plugin_library_name(arch)
    plugin_build.link(
        lambda out: toolchain.link_command([*objects, plugin, *plugin_build.export_flags(build_dir)], out), output
    )
    return output


def default_jobs() -> int:
    """One compile per CPU this process may run on (:func:`~ckspace.environment.cpus.available_cpus`), as
    build tools default to: half of them left one of two cores idle through a build of minutes."""
    return available_cpus()


def stderr_is_terminal() -> bool:
    return sys.stderr.isatty()
