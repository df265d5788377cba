"""What a Ray worker runs to compile one translation unit: standard library only.

This module is shipped to the workers *by value* (:mod:`~ckspace.build.ray_executor` registers
it with Ray's pickler), so a worker needs Ray, the same Python and the toolchain and CK headers at
the driver's paths, but not ckspace itself — nor, on a shared machine, the same ckspace as the
driver. The unit's emitted sources come with the task (a worker may be another machine with no view
of the tree); the compile runs in a private temporary folder and the object comes back as bytes,
so a compile that dies half-way leaves nothing the driver could mistake for an object.
"""

from __future__ import annotations

import socket
import subprocess
import tempfile
from pathlib import Path, PurePosixPath


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
    with tempfile.TemporaryDirectory(prefix="ckspace-unit-") as folder:
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
