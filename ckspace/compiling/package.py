"""What ``ckspace build`` writes beside a library so that other build systems adopt it as it is.

A framework links a ckspace library the way it links any other: ``find_package(ckspace_kernels
CONFIG REQUIRED)``, with ``CMAKE_PREFIX_PATH`` (or ``ckspace_kernels_DIR``) naming the build
directory, defines an imported target (``ckspace::kernels_<arch>``, or ``ckspace::dispatch_host``
for ``--host-only``); ``PKG_CONFIG_PATH`` naming it serves ``pkg-config --cflags --libs``. Both
carry the sha256 of the tree's manifest, so a consumer can check which emit it links, and both
point into the tree itself (the header is ``<tree>/ckspace_dispatch.h``): nothing is installed or
copied. The CMake files lie in the build directory itself, the first place ``find_package`` looks
under a prefix. ``compile_commands.json`` gives editors and clang tools the compile command of each
emitted source; ninja writes it (``ninja -t compdb``) from a ninja file that lists those sources.
The CMake files and the pkg-config file are jinja2 templates beside every other generated file's
(``ckspace/emit/templates``), so each is read as the file it makes.
"""

from __future__ import annotations

import io
import logging
import os
import re
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ckspace import __version__
from ckspace.compiling.ninja_executor import PLACEHOLDERS, command_value, ninja_binary, ninja_writer
from ckspace.compiling.toolchain import Toolchain, host_compile_command
from ckspace.core.errors import CkspaceError
from ckspace.emit.dispatcher import HEADER
from ckspace.emit.manifest import MANIFEST_NAME, Manifest, objects_dir
from ckspace.emit.rendering import template_environment
from ckspace.environment.files import generated, sha256, write_if_changed
from ckspace.select.compiled import host_c_compiler

log = logging.getLogger(__name__)

PACKAGE = "ckspace_kernels"
CONFIG = f"{PACKAGE}Config.cmake"
CONFIG_VERSION = f"{PACKAGE}ConfigVersion.cmake"
COMPILE_COMMANDS = "compile_commands.json"
COMPDB_NINJA = "compdb.ninja"
REBUILD = "ckspace build"
"""What re-makes the files this module writes (their banner names it: :func:`ckspace.environment.files.banner`)."""
NO_C_API = (
    "the tree has no C API, re-emit it with ckspace emit --with-selector (emit --kernels writes it by default), "
    "then ckspace build"
)
"""What a tree without the dispatcher lacks and how to get it: its library exports nothing to call,
so rebuilding it alone never gives ``ckspace_dispatch.h`` (said by the package and by build)."""

TEMPLATES = {
    CONFIG: "ckspace_kernelsConfig.cmake.j2",
    CONFIG_VERSION: "ckspace_kernelsConfigVersion.cmake.j2",
    "pc": "ckspace_kernels.pc.j2",
}
"""The package's files and the templates they are rendered from (``ckspace/emit/templates``, beside
every other generated file's, with the same banner); the pkg-config file is named for its module."""


@dataclass(frozen=True)
class PackagedLibrary:
    """A built library as its package describes it."""

    path: Path
    tree: Path
    """The emitted tree: where ``ckspace_dispatch.h`` lies."""
    target: str
    """The CMake imported target (``ckspace::...``)."""
    pc_name: str
    """The pkg-config module (``<pc_name>.pc``)."""
    arch: str
    description: str

    @property
    def link_name(self) -> str:
        """The ``-l`` name: the file's without ``lib`` and ``.so``."""
        return self.path.name.removeprefix("lib").removesuffix(".so")


def names_of(arch: str | None) -> tuple[str, str]:
    """The CMake imported target and the pkg-config module of the kernel library of ``arch``, or of
    the host-only dispatcher (``arch`` None)."""
    return (
        ("ckspace::dispatch_host", "ckspace_dispatch_host")
        if arch is None
        else (f"ckspace::kernels_{arch}", f"ckspace_kernels_{arch}")
    )


def adoption(build_dir: Path, arch: str | None, c_api: bool = True) -> str:
    """How a build system finds the library ``ckspace build`` wrote to ``build_dir`` (its output),
    or, for a tree without the dispatcher (``c_api`` false), how to get something it can call."""
    if not c_api:
        return f"no {HEADER}: {NO_C_API}"
    target, module = names_of(arch)
    return (
        f"cmake: find_package({PACKAGE} CONFIG) with CMAKE_PREFIX_PATH={build_dir}, target {target}; "
        f"pkg-config: {module} with PKG_CONFIG_PATH={build_dir}"
    )


def write_kernels_package(
    tree: Path,
    build_dir: Path,
    library: Path,
    manifest: Manifest,
    toolchain: Toolchain,
    ck_include: str,
    groups: Sequence[tuple[Toolchain, Sequence[str]]] | None = None,
) -> None:
    """The package of ``libckspace_kernels_<arch>.so`` and the compile commands of its sources: each
    kernel's own source and the dispatcher's run unit with the toolchain's command (the includes of
    the build's compiles: the tree and the CK headers), the dispatcher's host units with the host C
    compiler's. A build compiles batches of kernels; a source alone is what tools are asked about.
    A library of several archs is one package (``ckspace::kernels_gfx942_gfx950``, its ``ARCH``
    the archs comma-separated); ``groups`` gives each set of its kernels the toolchain of their archs."""
    arch = toolchain.arch
    _write_package(
        build_dir,
        PackagedLibrary(
            library,
            tree,
            *names_of(arch),
            manifest.arch,
            f"CK Tile grouped-convolution kernels for {', '.join(manifest.arch_list)} and their dispatcher, "
            "emitted by ckspace",
        ),
    )
    run = [manifest.dispatcher.run_unit] if manifest.dispatcher is not None else []
    include = (str(tree), ck_include)
    if groups is None or len(groups) == 1:
        hip = [*(k.source.path for k in manifest.kernels), *run]
        rules = {"hip": (toolchain.compile_command(*PLACEHOLDERS, include), hip)}
    else:
        sources = {k.name: k.source.path for k in manifest.kernels}
        rules = {
            f"hip_{t.arch}": (
                t.compile_command(*PLACEHOLDERS, include),
                [sources[name] for name in names] + (run if t.arch == arch else []),
            )
            for t, names in groups
        }
    if manifest.dispatcher is not None:
        rules.update(_host_rule(tree, manifest.dispatcher.host_units))
    write_compile_commands(tree, build_dir, rules)


def write_host_package(tree: Path, build_dir: Path, library: Path, manifest: Manifest) -> None:
    """The package of ``libckspace_dispatch.so`` (the host part alone) and its units' commands."""
    assert manifest.dispatcher is not None  # build_host refuses a tree without one
    _write_package(
        build_dir,
        PackagedLibrary(
            library,
            tree,
            *names_of(None),
            manifest.arch,
            f"The host part of a ckspace dispatcher for {manifest.arch} (no kernels, no ckspace_run)",
        ),
    )
    write_compile_commands(tree, build_dir, _host_rule(tree, manifest.dispatcher.host_units))


def _host_rule(tree: Path, units: list[str]) -> dict[str, tuple[list[str], list[str]]]:
    """The dispatcher's host units with the command the build compiles them with (none without a
    host C compiler: then the build had nothing to compile them with either)."""
    compiler = host_c_compiler()
    if compiler is None:
        return {}
    return {"cc": (host_compile_command(compiler, tree, *PLACEHOLDERS), units)}


def _write_package(build_dir: Path, library: PackagedLibrary) -> None:
    """The CMake config and version files and the pkg-config file of ``library``, rendered from
    their templates (:data:`TEMPLATES`); a value is escaped for where it lands (a CMake quoted
    argument, a pkg-config word) before it is rendered, and never read as a template."""
    common = {
        "rebuild": REBUILD,
        "arch": library.arch,
        "manifest_sha256": sha256((library.tree / MANIFEST_NAME).read_bytes()),
        "version": __version__,
    }
    contexts = {
        CONFIG: {
            "target": library.target,
            "library": _cmake_quoted(str(library.path)),
            "include_dir": _cmake_quoted(str(library.tree)),
            "header": HEADER,
            "no_header": NO_C_API,
        },
        CONFIG_VERSION: {"major": __version__.split(".")[0]},
        "pc": {
            "libdir": _pc_escaped(str(library.path.parent)),
            "includedir": _pc_escaped(str(library.tree)),
            "name": library.pc_name,
            "description": library.description,
            "link_name": library.link_name,
        },
    }
    environment = template_environment()
    for key, template in TEMPLATES.items():
        text = environment.get_template(template).render({**common, **contexts[key]})
        name = f"{library.pc_name}.pc" if key == "pc" else key
        write_if_changed(build_dir / name, text.encode())
    log.info("wrote the CMake package %s (%s) and %s.pc in %s", PACKAGE, library.target, library.pc_name, build_dir)


def _cmake_quoted(text: str) -> str:
    """``text`` as a CMake quoted argument that reads back as it is: ``\\``, ``"`` and ``$`` escaped
    (a ``${`` in a path would otherwise be a variable reference)."""
    return '"' + re.sub(r'([\\"$])', r"\\\1", text) + '"'


def _pc_escaped(text: str) -> str:
    """``text`` as one word of a pkg-config file: every character but letters, digits and
    ``/._+-,:=@%`` escaped with a backslash, which pkg-config reads back (spaces, quotes, ``#``),
    and which keeps a ``${`` of a path from being read as one of its variables."""
    return re.sub(r"([^A-Za-z0-9/._+\-,:=@%])", r"\\\1", text)


def write_compile_commands(tree: Path, build_dir: Path, rules: dict[str, tuple[list[str], list[str]]]) -> None:
    """``compile_commands.json`` in ``build_dir``, by ``ninja -t compdb`` from ``compdb.ninja``: per
    rule, its command (with ``$in``/``$out``) and the sources (relative to ``tree``) it compiles.
    ninja runs in ``tree``, the entries' directory, so the paths it reads are names ckspace chose
    (no ninja escaping needed: a path of the tree's own may hold ``$``, which ``ninja_syntax`` does
    not escape in paths). The file is a description, never built."""
    objects = os.path.relpath(objects_dir(build_dir) / "sources", tree)
    text = io.StringIO()
    ninja = ninja_writer(text)
    ninja.comment(f"{generated(REBUILD)} What {COMPILE_COMMANDS} is made from (ninja -t compdb); never built.")
    for rule, (words, sources) in rules.items():
        ninja.newline()
        ninja.rule(rule, command_value(words))
        for source in sources:
            ninja.build(f"{objects}/{source.replace('/', '__')}.o", rule, source)
    ninja_file = build_dir / COMPDB_NINJA
    write_if_changed(ninja_file, text.getvalue().encode())
    done = subprocess.run(
        [ninja_binary(), "-C", str(tree), "-f", str(ninja_file), "-t", "compdb", *rules],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise CkspaceError(f"ninja -t compdb failed on {ninja_file}: {done.stderr.strip() or done.stdout.strip()}")
    write_if_changed(build_dir / COMPILE_COMMANDS, done.stdout.encode())
