"""Building ``tests/cmake_consumer/`` against the CMake package ``ckspace build`` writes beside a
library, as a framework's build would: ``find_package`` through ``CMAKE_PREFIX_PATH``, the imported
target linked, the program run with no ``LD_LIBRARY_PATH`` (the link must say where the library is).

:func:`configure_and_build_consumer` is the one entry: tests/test_package.py links the host-only
dispatcher and a HIP stand-in with it, and a test of a real HIP build can link its library the same
way (``configure_and_build_consumer(tree / "build" / "gfx942", "ckspace::kernels_gfx942", tmp_path)``).
The consumer is built with CMake's Ninja generator and the ninja ckspace runs: no make needed.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from conftest import skip_without_compiler

from ckspace.compiling.ninja_executor import ninja_binary

CONSUMER = Path(__file__).resolve().parent / "cmake_consumer"
NO_CMAKE = "no cmake on PATH (Debian: apt-get install cmake)"
NO_CXX = "no C++ compiler for the CMake consumer ($CXX, c++, g++, clang++ or clang++-19)"


def cmake() -> str:
    """The cmake on PATH, or a skip (a failure under CKSPACE_REQUIRE_TOOLCHAIN=1)."""
    found = shutil.which("cmake")
    if found is None:
        skip_without_compiler(NO_CMAKE)
    return found


def cxx_compiler() -> str:
    """``$CXX``, else the first C++ compiler on PATH (the toolchain script installs clang++-19)."""
    for name in (os.environ.get("CXX"), "c++", "g++", "clang++", "clang++-19"):
        found = shutil.which(name) if name else None
        if found:
            return found
    skip_without_compiler(NO_CXX)


def configure(source: Path, build: Path, *definitions: str) -> subprocess.CompletedProcess[str]:
    """``cmake -S source -B build -G Ninja -D...``; the caller judges the outcome (a configure
    that must fail is a test too)."""
    command = [cmake(), "-S", str(source), "-B", str(build), "-G", "Ninja", f"-DCMAKE_MAKE_PROGRAM={ninja_binary()}"]
    return subprocess.run(
        [*command, *(f"-D{d}" for d in definitions)], capture_output=True, text=True, check=False, timeout=600
    )


def without_library_path() -> dict[str, str]:
    """The environment less ``LD_LIBRARY_PATH``: a program finds its libraries by what its link says."""
    return {k: v for k, v in os.environ.items() if k != "LD_LIBRARY_PATH"}


def configure_and_build_consumer(prefix_path: Path, target_name: str, work_dir: Path, *, version: str = "") -> Path:
    """Configure the consumer with ``CMAKE_PREFIX_PATH=prefix_path`` (a build directory of
    ``ckspace build``) linking ``target_name`` (``find_package`` asking for ``version`` when one is
    given), build it under ``work_dir``, and return the executable. A configure or build that fails
    fails the test with CMake's output."""
    build = work_dir / "consumer build"
    done = configure(
        CONSUMER,
        build,
        f"CMAKE_PREFIX_PATH={prefix_path}",
        f"CMAKE_CXX_COMPILER={cxx_compiler()}",
        f"CKSPACE_TARGET={target_name}",
        f"CKSPACE_VERSION={version}",
    )
    assert done.returncode == 0, f"configuring the consumer failed:\n{done.stdout}\n{done.stderr}"
    built = subprocess.run([cmake(), "--build", str(build)], capture_output=True, text=True, check=False, timeout=600)
    assert built.returncode == 0, f"building the consumer failed:\n{built.stdout}\n{built.stderr}"
    return build / "consumer"
