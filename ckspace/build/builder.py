"""``ckspace build``: compile an emitted tree into one shared library, batched and cached.

Parsing the CK headers costs about 10 s per translation unit, so kernels are compiled ``batch`` to
a unit (each unit includes the kernels' compilation units). A unit whose object is in the
content-addressed cache is not compiled again. The misses go to an executor
(:mod:`~ckspace.build.executor`): a generated ``build.ninja`` on this machine by default, or
tasks on a Ray cluster (``--executor ray``); one failure never stops the others. The kernels of a
failed unit are then compiled one per unit, so the report names exactly the kernels that fail and
their first error. Everything after the compiles is the same whichever executor ran them.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Literal

from pydantic import BaseModel

from ckspace.core.ck import CkRevision
from ckspace.core.errors import CkspaceError, InvalidChoiceError, InvalidInputError
from ckspace.core.progress import counting_bar
from ckspace.core.files import sha256, unique_temporary, write_atomic, write_if_changed
from ckspace.core.inputs import read_input, read_json_model
from ckspace.core.trees import locked_directory
from ckspace.emit.dispatcher import HEADER as DISPATCH_HEADER
from ckspace.emit.emitter import REGISTRY_HEADER
from ckspace.emit.manifest import MANIFEST_NAME, Manifest
from ckspace.build import objcache
from ckspace.core.ck_headers import find_revision
from ckspace.build.executor import Executor, Unit
from ckspace.build.ninja_executor import NinjaExecutor
from ckspace.build.toolchain import Toolchain, discover

log = logging.getLogger(__name__)

REPORT_NAME = "report.json"
ERROR_LINE = re.compile(r"(^|\s)(fatal )?error:")


class KernelResult(BaseModel):
    name: str
    status: Literal["ok", "failed"]
    cached: bool
    unit: str
    log: str
    error: str | None


class BuildReport(BaseModel):
    arch: str
    toolchain: Toolchain
    ck_revision: str
    ck_fingerprint: str
    batch: int
    jobs: int
    executor: str = "ninja"
    """What ran the compiles: ``ninja`` (this machine) or ``ray`` (a cluster)."""
    units: int
    """Translation units: the batches, plus one per kernel of each failed batch."""
    compiled_units: int
    """Units compiled in this run (the others came from the object cache)."""
    seconds: float
    ok: int
    failed: int
    cached: int
    library: str | None
    link_error: str | None
    kernels: list[KernelResult]


EXECUTORS = ("ninja", "ray")


def first_error(text: str) -> str | None:
    for line in text.splitlines():
        if ERROR_LINE.search(line):
            return line.strip()
    return None


def _units(tree: Path, kernels: list[str], size: int, prefix: str, toolchain: Toolchain,
           revision: CkRevision) -> list[Unit]:
    units = []
    for start in range(0, len(kernels), size):
        members = kernels[start:start + size]
        text = "".join(f'#include "{name}.cpp"\n' for name in members)
        files = [REGISTRY_HEADER, *(f"{name}{suffix}" for name in members for suffix in (".hpp", ".cpp"))]
        units.append(Unit(name=f"{prefix}{start // size:04d}", kernels=members, text=text, files=files,
                          key=_key(tree, text, files, toolchain, revision)))
    return units


def _key(tree: Path, text: str, files: list[str], toolchain: Toolchain, revision: CkRevision) -> str:
    sources = [text.encode(), *(read_input(tree / f, "source") for f in files)]
    return objcache.object_key(sources, toolchain.identity, toolchain.compile_flags, toolchain.arch,
                               revision.fingerprint)


def _compile(executor: Executor, stage: str, build_dir: Path, units: list[Unit], progress: bool, label: str) -> None:
    """Compile the cache misses among ``units`` with ``executor``; store their objects in the cache
    (atomically: a reader never sees half an object) and their logs under ``logs/``."""
    if not units:
        return
    with counting_bar(enabled=progress) as bar:
        task = bar.add_task(label, total=len(units))
        results = executor.compile(stage, units, lambda n: bar.advance(task, n))
    for unit in units:
        result = results[unit.name]
        write_if_changed(build_dir / "logs" / f"{unit.name}.log", result.log.encode())
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


@_reading_tree
def build(tree: Path, arch: str, *, jobs: int | None, batch: int, ck_root: str | None = None,
          progress: bool = False, allow_edited: bool = False, executor: str = "ninja",
          address: str | None = None) -> BuildReport:
    """Compile every kernel of the emitted ``tree`` for ``arch``; see the module docstring.

    ``executor`` ``ninja`` compiles here, ``jobs`` at once (default: :func:`default_jobs`); ``ray``
    on the Ray cluster at ``address`` (:func:`ckspace.build.cluster.connected` says which
    without one), ``jobs`` units in flight (default: the cluster's CPUs)."""
    started = time.monotonic()
    if executor not in EXECUTORS:
        raise InvalidChoiceError("executor", executor, EXECUTORS)
    if address is not None and executor != "ray":
        raise InvalidInputError("--address names a Ray cluster; it needs --executor ray")
    manifest = _read_manifest(tree)
    if (jobs is not None and jobs < 1) or batch < 1:
        raise CkspaceError("--jobs and --batch must be at least 1")
    verify_sources(tree, manifest, allow_edited)
    _check_object_cache()
    revision = find_revision(ck_root)
    if revision.fingerprint != manifest.ck_revision.fingerprint:
        raise CkspaceError(f"{tree} was emitted for CK {manifest.ck_revision.label}, but the CK headers "
                           f"found are {revision.label} ({revision.include_dir}); re-emit or pass --ck-root")
    if manifest.arch != arch:
        log.warning("%s was emitted from the %s space; compiling for %s", tree, manifest.arch, arch)
    toolchain = discover(arch)
    tree = tree.resolve()
    build_dir = tree / "build" / arch
    includes = (str(tree), revision.include_dir)
    names = [k.name for k in manifest.kernels]
    (build_dir / "logs").mkdir(parents=True, exist_ok=True)
    with contextlib.ExitStack() as stack:
        if executor == "ray":
            from ckspace.build.cluster import connected
            from ckspace.build.ray_executor import RayExecutor

            ray = stack.enter_context(connected(address))
            jobs = jobs or max(1, int(ray.cluster_resources().get("CPU", 1)))
            runner: Executor = RayExecutor(ray, tree, toolchain, revision.include_dir, jobs)
        else:
            jobs = jobs or default_jobs()
            runner = NinjaExecutor(build_dir, toolchain, includes, jobs)
        units = _units(tree, names, batch, "batch", toolchain, revision)
        misses = [u for u in units if objcache.lookup(u.key) is None]
        _compile(runner, "build", build_dir, misses, progress, f"compiling {arch}")
        failed_batches = [u for u in units if len(u.kernels) > 1 and objcache.lookup(u.key) is None]
        singles = [s for u in failed_batches
                   for s in _units(tree, u.kernels, 1, f"single_{u.name}_", toolchain, revision)]
        single_misses = [u for u in singles if objcache.lookup(u.key) is None]
        _compile(runner, "singles", build_dir, single_misses, progress, "isolating failures")
        dispatcher_objects = (_dispatcher_objects(tree, build_dir, manifest, toolchain, revision, runner, progress)
                              if manifest.dispatcher is not None and any(objcache.lookup(u.key) for u in units + singles)
                              else [])

    fresh = {u.name for u in misses + single_misses}
    results: list[KernelResult] = []
    objects: list[str] = []
    for unit in [u for u in units if u not in failed_batches] + singles:
        cached_obj = objcache.lookup(unit.key)
        unit_log = build_dir / "logs" / f"{unit.name}.log"
        text = unit_log.read_text(errors="replace") if unit.name in fresh and unit_log.is_file() else ""
        if cached_obj is not None:
            objects.append(str(cached_obj))
        for name in unit.kernels:
            kernel_log = build_dir / "logs" / "kernels" / f"{name}.log"
            header = (f"# unit {unit.name} ({len(unit.kernels)} kernels), "
                      f"{'compiled' if unit.name in fresh else 'from cache'} {unit.key}\n")
            write_atomic(kernel_log, (header + text).encode())
            results.append(KernelResult(
                name=name, status="ok" if cached_obj is not None else "failed",
                cached=unit.name not in fresh, unit=unit.name, log=str(kernel_log.relative_to(build_dir)),
                error=None if cached_obj is not None else (first_error(text) or "compiler failed (see log)")))
    results.sort(key=lambda r: r.name)

    objects += dispatcher_objects
    library, link_error = _link(build_dir, arch, toolchain, sorted(objects))
    ok = sum(r.status == "ok" for r in results)
    report = BuildReport(
        arch=arch, toolchain=toolchain, ck_revision=revision.label, ck_fingerprint=revision.fingerprint,
        batch=batch, jobs=jobs, executor=executor, units=len(units) + len(singles), compiled_units=len(fresh),
        seconds=round(time.monotonic() - started, 2), ok=ok, failed=len(results) - ok,
        cached=sum(r.cached for r in results), library=library, link_error=link_error, kernels=results)
    write_atomic(build_dir / REPORT_NAME, (report.model_dump_json(indent=1) + "\n").encode())
    return report


def hip_build_of(library: Path) -> BuildReport | None:
    """The report ``ckspace build`` wrote beside ``library`` when it linked it, else None. Such a
    library is HIP code (``--host-only`` links no kernel library), whose ``ckspace_run`` cannot
    compute on host memory; a stand-in library has no report naming it. A report that cannot be
    read says nothing either way (None)."""
    path = library.parent / REPORT_NAME
    try:
        report = BuildReport.model_validate_json(read_input(path, "build report"))  # a fifo there: refused
    except (OSError, ValueError):  # InvalidInputError is a ValueError
        return None
    return report if report.library and Path(report.library).name == library.name else None


def verify_sources(tree: Path, manifest: Manifest, allow_edited: bool) -> None:
    """Refuse a tree whose sources are missing or differ from the sha256 the manifest recorded
    (edited by hand, half-written, or from another emit), unless ``allow_edited``: what is built is
    then what ckspace emitted. A source that is a fifo or a device is refused, not waited on
    (:func:`~ckspace.core.inputs.read_input`)."""
    records = [*manifest.shared, *(r for k in manifest.kernels for r in (k.header, k.source, k.wrapper))]
    missing, edited = [], []
    for record in records:
        path = tree / record.path
        if not path.exists():
            missing.append(record.path)
        elif sha256(read_input(path, "source")) != record.sha256:
            edited.append(record.path)
    if missing:
        raise CkspaceError(f"{tree}: {len(missing)} source(s) of {MANIFEST_NAME} are missing "
                           f"(e.g. {missing[0]}); re-emit the tree")
    if edited and not allow_edited:
        raise CkspaceError(f"{tree}: {len(edited)} source(s) differ from the sha256 in {MANIFEST_NAME} "
                           f"(e.g. {edited[0]}); re-emit, or --allow-edited to build them as they are")
    if edited:
        log.warning("building %d edited source(s) (--allow-edited), e.g. %s", len(edited), edited[0])


def _check_object_cache() -> None:
    """Fail before compiling, not after, when compiled objects cannot be kept."""
    directory = objcache.object_cache_dir()
    try:
        directory.mkdir(parents=True, exist_ok=True)
        probe = tempfile.NamedTemporaryFile(dir=directory, prefix=".probe.")
        probe.close()
    except OSError as exc:
        raise CkspaceError(f"object cache {directory} is not writable ({exc.strerror}); set CKSPACE_BUILD_CACHE "
                           "to a writable directory") from None


def _read_manifest(tree: Path) -> Manifest:
    path = tree / MANIFEST_NAME
    if not path.exists():
        raise CkspaceError(f"{tree} has no {MANIFEST_NAME} (run ckspace emit --out {tree} first)")
    return read_json_model(Manifest, path, "manifest")


def _host_objects(tree: Path, build_dir: Path, units: list[str]) -> list[str]:
    """The dispatcher's host C units compiled with the host C compiler (cached like the kernels)."""
    from ckspace.select.compiled import FLAGS, compiler_identity, host_c_compiler

    compiler = host_c_compiler()
    if compiler is None:
        given = os.environ.get("CC")
        raise CkspaceError(f"CC is {given!r}, which names no executable (CC is one program, its flags go "
                           "elsewhere); the dispatcher's host part needs a C compiler" if given else
                           "the dispatcher's host part needs a C compiler ($CC, cc, gcc or clang); none was found")
    identity = compiler_identity(compiler)
    objects = []
    for unit in units:
        source = tree / unit
        included = sorted(p for p in source.parent.glob(f"{source.stem}/*") if p.is_file())
        key = objcache.object_key([read_input(p, "source") for p in (source, *included, tree / DISPATCH_HEADER)],
                                  identity, FLAGS, "host", "")
        cached = objcache.lookup(key)
        if cached is None:
            obj = build_dir / "obj" / "host" / (unit.replace("/", "__") + ".o")
            obj.parent.mkdir(parents=True, exist_ok=True)
            done = subprocess.run([compiler, *FLAGS, f"-I{tree}", "-c", str(source), "-o", str(obj)],
                                  capture_output=True, text=True, check=False)
            if done.returncode != 0:
                raise CkspaceError(f"compiling the dispatcher's {unit} failed: "
                                   f"{first_error(done.stderr) or done.stderr.strip()[-300:]}")
            objcache.store(key, obj)
            cached = objcache.lookup(key) or obj  # a cache that cannot be written costs time, not the link
        objects.append(str(cached))
    return objects


def _dispatcher_objects(tree: Path, build_dir: Path, manifest: Manifest, toolchain: Toolchain,
                        revision: CkRevision, runner: Executor, progress: bool) -> list[str]:
    """The host objects and the HIP ``ckspace_run`` unit of a tree emitted ``--with-selector``."""
    assert manifest.dispatcher is not None
    text = f'#include "{manifest.dispatcher.run_unit}"\n'
    files = [manifest.dispatcher.run_unit, DISPATCH_HEADER, REGISTRY_HEADER]
    unit = Unit(name="dispatch_run", kernels=[], text=text, files=files,
                key=_key(tree, text, files, toolchain, revision))
    if objcache.lookup(unit.key) is None:
        _compile(runner, "dispatch", build_dir, [unit], progress, "compiling ckspace_run")
    run_object = objcache.lookup(unit.key)
    if run_object is None:
        log_file = build_dir / "logs" / "dispatch_run.log"
        error = first_error(log_file.read_text(errors="replace")) if log_file.is_file() else None
        raise CkspaceError(f"compiling ckspace_run failed: {error or 'see ' + str(log_file)}")
    return [*_host_objects(tree, build_dir, manifest.dispatcher.host_units), str(run_object)]


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
    build_dir = tree / "build" / "host"
    objects = _host_objects(tree, build_dir, manifest.dispatcher.host_units)
    output = build_dir / "libckspace_dispatch.so"
    output.parent.mkdir(parents=True, exist_ok=True)  # with every object cached, nothing else made it
    tmp = unique_temporary(output)  # two builds or benches of one tree link side by side
    try:
        done = subprocess.run([host_c_compiler() or "cc", "-shared", "-fPIC", *objects, "-o", str(tmp), "-lm"],
                              capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise CkspaceError(f"linking the dispatcher failed: {first_error(done.stderr) or done.stderr.strip()[-300:]}")
        os.replace(tmp, output)
    finally:
        tmp.unlink(missing_ok=True)
    return output


def _link(build_dir: Path, arch: str, toolchain: Toolchain, objects: list[str]) -> tuple[str | None, str | None]:
    """Link the kernels that compiled into ``libckspace_kernels_<arch>.so``."""
    if not objects:
        return None, None
    output = build_dir / f"libckspace_kernels_{arch}.so"
    tmp = unique_temporary(output)  # two builds of one tree link side by side
    try:
        result = subprocess.run(toolchain.link_command(objects, str(tmp)), capture_output=True, text=True,
                                check=False)
        (build_dir / "logs").mkdir(parents=True, exist_ok=True)
        write_atomic(build_dir / "logs" / "link.log", (result.stdout + result.stderr).encode())
        if result.returncode != 0:
            return None, first_error(result.stderr) or "link failed (see logs/link.log)"
        os.replace(tmp, output)
    finally:
        tmp.unlink(missing_ok=True)
    return str(output), None


def default_jobs() -> int:
    """Half the cores: a CK Tile compile is memory- and cache-heavy, and two of them on two cores
    gained little over one in our measurements (bench/build.py)."""
    return max(1, (os.cpu_count() or 2) // 2)


def stderr_is_terminal() -> bool:
    return sys.stderr.isatty()
