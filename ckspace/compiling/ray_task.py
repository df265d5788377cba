"""What a Ray worker runs to compile one translation unit: standard library only.

This module is shipped to the workers *by value* (:mod:`~ckspace.compiling.ray_executor` registers
it with Ray's pickler), so a worker needs Ray, the same Python and the toolchain and CK headers at
the driver's paths, but not ckspace itself — nor, on a shared machine, the same ckspace as the
driver. The unit's emitted sources come with the task (a worker may be another machine with no view
of the tree); the compile runs in a private temporary folder and the object comes back as bytes,
so a compile that dies half-way leaves nothing the driver could mistake for an object. A worker that
is killed (by the OOM killer, by a cancel) cannot remove its folder: each folder's name carries its
worker's process id and host, and every unit first removes the folders of this host's workers that
are gone.
"""

from __future__ import annotations

import glob
import os
import re
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path, PurePosixPath

PREFIX = "ckspace-unit-"
"""The start of a unit folder's name; then ``<pid>@<host>-`` and tempfile's random part."""


def _alive(pid: int) -> bool:
    """Whether process ``pid`` still runs (a zombie, killed and not yet reaped, does not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: it exists
        return True
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except (OSError, IndexError):
        return True
    return state not in ("Z", "X")


def sweep(host: str, folder: Path | None = None) -> list[Path]:
    """Remove the unit folders of this host's workers that are gone (in ``folder``, default the
    temporary directory); returns what it removed. Only names this module makes are touched, and a
    folder whose process id is alive (or reused by another process) is left."""
    pattern = re.compile(re.escape(PREFIX) + r"(\d+)@" + re.escape(host) + r"-[^/]+")
    removed = []
    for path in Path(folder or tempfile.gettempdir()).glob(f"{PREFIX}*@{glob.escape(host)}-*"):
        found = pattern.fullmatch(path.name)
        if found and path.is_dir() and not path.is_symlink() and not _alive(int(found.group(1))):
            shutil.rmtree(path, ignore_errors=True)
            if not path.exists():
                removed.append(path)
    return removed


def compile_unit(
    name: str, text: str, shared: dict[str, bytes], own: dict[str, bytes], command: list[str], version: str
) -> tuple[bytes | None, str]:
    """Compile unit ``name`` (``tu/<name>.cpp`` holding ``text``; ``shared`` and ``own`` map the tree
    paths it includes to their bytes) with ``command`` run in the folder holding them; returns the
    object's bytes (``None`` on failure) and the log. ``version`` is the first line of the driver's
    ``compiler --version``: a worker with another compiler refuses, since the object would be cached
    under the driver's compiler."""
    host = socket.gethostname()
    try:
        found = subprocess.run([command[0], "--version"], capture_output=True, text=True, timeout=120, check=False)
    except OSError as exc:
        return None, f"error: worker {host}: cannot run the compiler {command[0]}: {exc.strerror or exc}\n"
    found_version = found.stdout.splitlines()[0] if found.stdout else ""
    if found_version != version:
        return None, (
            f"error: worker {host}: {command[0]} is {found_version!r}, the driver's is {version!r}; "
            "install the same toolchain at the same path on every worker\n"
        )
    sweep(host)
    with tempfile.TemporaryDirectory(prefix=f"{PREFIX}{os.getpid()}@{host}-") as folder:
        root = Path(folder)
        for relative, data in (*shared.items(), *own.items(), (f"tu/{name}.cpp", text.encode())):
            parts = PurePosixPath(relative).parts
            if PurePosixPath(relative).is_absolute() or ".." in parts:
                return None, f"error: worker {host}: refusing the source path {relative!r} (outside the unit folder)\n"
            target = root.joinpath(*parts)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
        done = subprocess.run(command, cwd=root, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, check=False)
        log = done.stdout.decode(errors="replace")
        obj = root / f"{name}.o"
        if done.returncode != 0 or not obj.is_file():
            return None, log + f"# worker {host}: compiler exited with status {done.returncode}\n"
        return obj.read_bytes(), log
