"""Which compiler a path is, and where a ROCm installation is looked for: stated once, below the
build (the HIP toolchain, the object cache) and the selection (the selector compiled to C).

A cache key lists everything that changes its answer, and the compiler that made an object is one
such thing. The first line of ``--version`` does not say which compiler it is: two builds of one
release print the same line, and a wrapper script (``CKSPACE_CXX`` naming clang in a chroot, with
flags of its own) prints whatever the compiler behind it prints. So every cache of compiled code
keys on :func:`identify`'s digest, for the HIP compiler and the host C compiler alike. (A Ray
worker checks its compiler against the driver's by the first line only: it runs without ckspace,
see :mod:`ckspace.compiling.ray_task`.)
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from pathlib import Path
from typing import NamedTuple

ROCM_DEFAULT = "/opt/rocm"

WRAPPER_SIZE = 64 * 1024
"""A compiler file smaller than this is a wrapper script (a real compiler is megabytes): its text
decides what runs, so it is part of the identity."""


def rocm_roots() -> tuple[str, ...]:
    """Where a ROCm installation is looked for, in order: ``$ROCM_PATH`` when set, then
    ``/opt/rocm`` (its compilers under ``bin/``, CK's headers under ``include/``)."""
    return tuple(filter(None, (os.environ.get("ROCM_PATH"), ROCM_DEFAULT)))


class CompilerIdentity(NamedTuple):
    """What a compiler is, in two strengths: one for people, one for cache keys."""

    version: str
    """The first line of ``--version`` ('' when it printed nothing): what reports show."""
    digest: str
    """sha256 of the compiler's resolved path, its whole ``--version`` output and, for a wrapper
    script, the script's text: what every cache key of compiled code holds."""


def identify(compiler: str) -> CompilerIdentity:
    """The identity of ``compiler`` (a path, or a name looked up on PATH). A compiler that cannot
    run ``--version`` has the empty output: its compiles fail with their own message."""
    try:
        output = subprocess.run(
            [compiler, "--version"], capture_output=True, text=True, timeout=120, check=False
        ).stdout
    except (OSError, subprocess.SubprocessError):
        output = ""
    path = Path(shutil.which(compiler) or compiler).resolve()
    digest = hashlib.sha256(str(path).encode())
    digest.update(output.encode())
    if path.is_file() and path.stat().st_size < WRAPPER_SIZE:
        digest.update(path.read_bytes())
    lines = output.splitlines()
    return CompilerIdentity(lines[0] if lines else "", digest.hexdigest())
