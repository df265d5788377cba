"""Finding a HIP compiler for an offload target, with or without ROCm installed.

Order: ``$CKSPACE_CXX`` (an explicit compiler or wrapper), then ROCm's ``amdclang++`` / ``hipcc``
under ``$ROCM_PATH`` or ``/opt/rocm`` (:func:`~ckspace.environment.compilers.rocm_roots`), then a system
clang (newest first) that knows the target, with the HIP headers of the distribution and ROCm
device libraries that hold the target's ISA bitcode. When nothing fits, the error lists every
candidate and why it was refused.
"""

from __future__ import annotations

import logging
import os
import shlex
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from ckspace.core.errors import CkspaceError, InvalidInputError
from ckspace.environment.compilers import identify, rocm_roots
from ckspace.environment.files import write_if_changed
from ckspace.select.compiled import FLAGS

log = logging.getLogger(__name__)

SYSTEM_CLANGS = (*(f"clang++-{v}" for v in range(25, 18, -1)), "clang++")
DEVICE_LIB_DIRS = (
    "/opt/ckspace-toolchain/devlibs",
    "/usr/lib/x86_64-linux-gnu/amdgcn/bitcode",
    "/usr/share/amdgcn/bitcode",
)
TOOLCHAIN_SCRIPTS: dict[str, str] = {
    "gfx942": "scripts/install-toolchain-gfx942.sh installs one on Debian bookworm",
    "gfx950": "scripts/prepare-trixie-gfx950.sh prepares clang-22 for gfx950 in a Debian trixie chroot "
    "(then export CKSPACE_CXX to its wrapper)",
}
"""Which of the project's scripts provides a compiler for an arch (clang-19 of bookworm knows gfx942
but not gfx950)."""


def toolchain_hint(arch: str) -> str:
    """Where a HIP compiler for ``arch`` comes from, for the error that found none."""
    return TOOLCHAIN_SCRIPTS.get(
        arch,
        f"a ROCm installation whose amdclang++ knows {arch}, or CKSPACE_CXX "
        f"naming such a compiler; the project's scripts cover "
        f"{', '.join(TOOLCHAIN_SCRIPTS)}",
    )


class Toolchain(BaseModel):
    """A compiler and the flags that make it compile CK Tile for one offload target."""

    model_config = ConfigDict(frozen=True)

    kind: str
    """``rocm`` (amdclang++/hipcc) or ``clang`` (a system or wrapped clang)."""
    compiler: str
    version: str
    """First line of ``--version``."""
    identity: str
    """The compiler's digest (:class:`~ckspace.environment.compilers.CompilerIdentity`): what the object
    cache keys on."""
    arch: str
    """The offload target; for a library of several archs their label (``gfx942_gfx950``)."""
    compile_flags: tuple[str, ...]
    link_flags: tuple[str, ...]

    def compile_command(self, source: str, output: str, includes: tuple[str, ...]) -> list[str]:
        """The one compile command line, whichever executor runs it (ninja here, a Ray worker
        elsewhere): the same flags must give the same object the cache key promises."""
        return [self.compiler, *self.compile_flags, *(f"-I{i}" for i in includes), "-c", source, "-o", output]

    def link_command(self, objects: list[str], output: str) -> list[str]:
        return [self.compiler, "-shared", "-fPIC", *objects, "-o", output, *self.link_flags]


def _run(command: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)


def _knows_target(compiler: str, arch: str) -> bool:
    probe = _run(
        [
            compiler,
            "--target=amdgcn-amd-amdhsa",
            f"-mcpu={arch}",
            "-nogpulib",
            "-x",
            "c",
            "-c",
            os.devnull,
            "-o",
            os.devnull,
        ]
    )
    return probe.returncode == 0


def _device_libs(arch: str) -> str | None:
    isa = f"oclc_isa_version_{arch.removeprefix('gfx')}.bc"
    for folder in filter(None, (os.environ.get("CKSPACE_DEVICE_LIBS"), *DEVICE_LIB_DIRS)):
        if (Path(folder) / isa).is_file() and (Path(folder) / "ockl.bc").is_file():
            return folder
    return None


def _base_flags(arch: str) -> list[str]:
    return ["-x", "hip", f"--offload-arch={arch}", "-std=c++20", "-O3", "-fPIC", *_hip_flags()]


def _hip_flags() -> list[str]:
    """``$CKSPACE_HIP_FLAGS`` as shell words; a value the shell could not split either (an
    unbalanced quote, a trailing backslash) is one line naming the variable and its value."""
    value = os.environ.get("CKSPACE_HIP_FLAGS", "")
    try:
        return shlex.split(value)
    except ValueError as exc:
        raise InvalidInputError(
            f"CKSPACE_HIP_FLAGS is {value!r}: {exc} (give compiler flags as shell words, e.g. '-O2 -DNDEBUG')"
        ) from None


def _make(kind: str, compiler: str, arch: str, flags: list[str], link: list[str]) -> Toolchain:
    found = identify(compiler)
    return Toolchain(
        kind=kind,
        compiler=compiler,
        version=found.version,
        identity=found.digest,
        arch=arch,
        compile_flags=tuple(flags),
        link_flags=tuple(link),
    )


def discover(arch: str) -> Toolchain:
    """The first usable compiler for ``arch``; :class:`CkspaceError` listing what was tried."""
    _hip_flags()  # a value that is no shell words is refused before any compiler is looked for
    refused: list[str] = []
    variable = "CKSPACE_CXX" if os.environ.get("CKSPACE_CXX") else "CKSPACE_CLANG"
    explicit = os.environ.get(variable)
    if explicit:
        if variable == "CKSPACE_CLANG":  # what env.sh of older install scripts exported
            log.warning("CKSPACE_CLANG is read as CKSPACE_CXX; export CKSPACE_CXX instead")
        path = shutil.which(explicit)
        if path is None:
            raise CkspaceError(f"{variable}={explicit!r} is not an executable ({toolchain_hint(arch)})")
        return _system_clang(path, arch, refused, explicit=True)  # type: ignore[return-value]
    for root in rocm_roots():
        for name in ("amdclang++", "hipcc"):
            candidate = Path(root) / "bin" / name
            if not candidate.is_file():
                refused.append(f"{candidate} (absent)")
                continue
            if name == "amdclang++" and not _knows_target(str(candidate), arch):
                refused.append(f"{candidate} (does not know {arch})")
                continue
            return _make("rocm", str(candidate), arch, _base_flags(arch), [f"-L{root}/lib", "-lamdhip64"])
    for name in SYSTEM_CLANGS:
        path = shutil.which(name)
        if path is None:
            continue
        found = _system_clang(path, arch, refused, explicit=False)
        if found is not None:
            return found
    if not any(shutil.which(n) for n in SYSTEM_CLANGS):
        refused.append(f"system clang ({', '.join(SYSTEM_CLANGS[:3])}, ..., clang++: none on PATH)")
    raise CkspaceError(f"no HIP compiler for {arch}; tried: " + "; ".join(refused) + f" ({toolchain_hint(arch)})")


def discover_fleet(archs: Sequence[str]) -> Toolchain:
    """One compiler for a library of several ``archs`` (:func:`discover` for each must find the
    same one, with the same flags but the offload target): its toolchain for all of them
    (:func:`for_archs` narrows it to the archs of a kernel)."""
    found = [discover(arch) for arch in archs]
    first = found[0]
    for arch, toolchain in zip(archs[1:], found[1:], strict=True):
        if toolchain.compiler != first.compiler or _without_offload(toolchain) != _without_offload(first):
            raise CkspaceError(
                f"no one HIP compiler for {', '.join(archs)}: {archs[0]} compiles with {first.compiler}, "
                f"{arch} with {toolchain.compiler} (CKSPACE_CXX naming a compiler that knows them all builds it)"
            )
    return for_archs(first, archs)


def for_archs(toolchain: Toolchain, archs: Sequence[str]) -> Toolchain:
    """``toolchain`` compiling for each of ``archs`` (one ``--offload-arch`` each: one code object
    per arch in each object, as hipcc's fat binaries hold them); its ``arch`` is their label."""
    flags: list[str] = []
    for flag in toolchain.compile_flags:
        if flag.startswith("--offload-arch="):
            flags += [f"--offload-arch={arch}" for arch in archs if f"--offload-arch={arch}" not in flags]
        else:
            flags.append(flag)
    return toolchain.model_copy(update={"compile_flags": tuple(flags), "arch": "_".join(archs)})


def _without_offload(toolchain: Toolchain) -> tuple[str, ...]:
    return tuple(f for f in toolchain.compile_flags if not f.startswith("--offload-arch="))


def _system_clang(path: str, arch: str, refused: list[str], *, explicit: bool) -> Toolchain | None:
    def refuse(reason: str) -> None:
        if explicit:
            raise CkspaceError(f"CKSPACE_CXX={path}: {reason} ({toolchain_hint(arch)})")
        refused.append(f"{path} ({reason})")

    if not _knows_target(path, arch):
        refuse(f"does not know {arch}")
        return None
    if not explicit and not Path("/usr/include/hip/hip_runtime.h").is_file():
        refuse("no HIP headers in /usr/include/hip (libamdhip64-dev)")
        return None
    # A wrapped compiler (CKSPACE_CXX, e.g. clang in a chroot) may see another file system: there
    # CKSPACE_DEVICE_LIBS is taken as given.
    libs = os.environ.get("CKSPACE_DEVICE_LIBS") if explicit else None
    libs = libs or _device_libs(arch)
    if libs is None:
        refuse(
            f"no ROCm device libraries with oclc_isa_version_{arch.removeprefix('gfx')}.bc "
            f"(CKSPACE_DEVICE_LIBS, {', '.join(DEVICE_LIB_DIRS)})"
        )
        return None
    flags = [*_base_flags(arch), "--rocm-path=/usr", f"--rocm-device-lib-path={libs}"]
    return _make("clang", path, arch, flags, ["-lamdhip64"])


EXPORTS = "{\n  global: ckspace_*;\n  local: *;\n};\n"
"""The version script of every library ckspace links: its dynamic symbol table holds the C API
(``ckspace_*``: the dispatcher's functions and the kernels' C entry points) and nothing else. The
ck_tile template instantiations the kernels compile are weak C++ symbols; exported, two libraries
in one process (two archs, or ckspace beside MIOpen's own CK) would bind each other's."""


def export_flags(build_dir: Path) -> list[str]:
    """Link flags that export only the C API (:data:`EXPORTS`, written to ``build_dir``) and bind
    the library's own calls to its own definitions (``-Bsymbolic``: ``ckspace_run`` calls this
    library's ``ckspace_is_supported`` even when another ckspace library in the process exports one)."""
    script = build_dir / "exports.map"
    write_if_changed(script, EXPORTS.encode())
    return ["-Xlinker", f"--version-script={script}", "-Xlinker", "-Bsymbolic"]  # -Xlinker: a comma in the path stays


def host_compile_command(compiler: str, tree: str | Path, source: str, output: str) -> list[str]:
    """How the dispatcher's host C units compile (the build runs it; ``compile_commands.json``
    records it): the host C compiler, the selector's floating-point flags, the tree's headers."""
    return [compiler, *FLAGS, f"-I{tree}", "-c", source, "-o", output]
