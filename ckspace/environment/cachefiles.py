"""Entries of ckspace's cache directory: a damaged one is a miss, and a cache that cannot be written
costs time, never the answer.

The cache directory is ckspace's own, and every entry lies at a name ckspace derives from a sha256
key (``cells/<hex>.json``, ``ck/<hex>.json``, ``compiled-selectors/<hex>/``, ``objects/<hex>.o``),
so whatever is at such a name is ckspace's to replace. The name is also all that proves a file
ckspace's: ``cache clear`` and ``cache info`` count and remove only files so named and the
temporaries of their writers, never another file a user keeps there (a ``results.json``, a
``mylib.o``). An entry that cannot be used -- short,
garbage, not UTF-8, JSON nested deeper than the parser recurses, or a fifo, a link or a directory
in its place -- is a miss: the answer is computed again and the entry written anew, atomically. A
fifo is never opened for reading in a way that waits for a writer.

A cache that cannot be written at all (under a file, on a read-only or full file system, a
directory that cannot be created) is said once per process and cache, in one warning line that names
the directory and why; each command then answers without it.
"""

from __future__ import annotations

import errno
import json
import logging
import os
import re
import secrets
import stat
from pathlib import Path
from typing import Any

from ckspace.environment.files import unique_temporary
from ckspace.environment.inputs import file_kind, read_to_end
from ckspace.environment.trees import TEMPORARY, discard, listed

log = logging.getLogger(__name__)

_READ_FLAGS = os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_NOCTTY | os.O_CLOEXEC
_ABSENT = (errno.ENOENT, errno.ENOTDIR, errno.EACCES, errno.EPERM)
"""Errors that mean the entry is not there for this process (absent, the cache under a file or not
readable): a quiet miss; writing it says whether the cache is usable."""
_CACHE_WIDE = (errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM, errno.EIO)
"""Errors of writing an entry's bytes or renaming it that concern the whole cache; others concern
the entry (its temporary removed by a ``cache clear`` meanwhile, a directory put in its place)."""

_warned: set[str] = set()

ENTRY = re.compile(r"[0-9a-f]{40}\.json")
"""The name of an entry of a folder of JSON entries (``cells/``, ``ck/``): see :func:`entry_path`."""


def entry_path(folder: Path, digest: str) -> Path:
    """Where the JSON entry of the hex ``digest`` of its key lies in ``folder`` (its first 40 digits)."""
    return folder / f"{digest[:40]}.json"


def unusable(root: Path, why: str) -> None:
    """Say once per process that the cache at ``root`` is not used, and why."""
    if str(root) not in _warned:
        _warned.add(str(root))
        log.warning("cache %s is not used this run (%s); answers are computed without it", root, why)


def read_entry(path: Path) -> bytes | None:
    """The bytes of the entry at ``path``; None when it is absent or cannot be read here. Anything
    but a regular file in its place (a fifo, a directory, a link, a device) is ``ValueError``:
    a damaged entry, rebuilt by the caller."""
    try:
        fd = os.open(path, _READ_FLAGS)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise ValueError("a symbolic link is in its place") from None
        if exc.errno in _ABSENT:
            return None
        raise ValueError(exc.strerror or str(exc)) from None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise ValueError(f"{file_kind(mode)} is in its place")
        return read_to_end(fd)
    except OSError as exc:
        raise ValueError(exc.strerror or str(exc)) from None
    finally:
        os.close(fd)


def read_json_entry(path: Path) -> Any:
    """The JSON value of the entry at ``path`` (None when absent, see :func:`read_entry`);
    ``ValueError`` when it is damaged: not a regular file, not UTF-8, not JSON, or nested too deeply."""
    data = read_entry(path)
    if data is None:
        return None
    try:
        return json.loads(data.decode("utf-8"))
    except RecursionError:
        raise ValueError("JSON nested too deeply") from None


def folder_info(folder: Path, entry: re.Pattern[str] = ENTRY) -> dict[str, object]:
    """Where a cache of one folder is (``cells/``, ``ck/``), how many entries it holds and their
    size in bytes."""
    return summary(folder, entries(folder, entry))


def entries(folder: Path, entry: re.Pattern[str] = ENTRY) -> list[Path]:
    """A cache's entries in ``folder``: its regular files named as ``entry`` says."""
    return [path for path in listed(folder) if entry.fullmatch(path.name) and _regular(path)]


def summary(directory: Path, files: list[Path]) -> dict[str, object]:
    """What ``cache info`` says of a cache: its directory, its entries' count and size in bytes."""
    return {"directory": str(directory), "entries": len(files), "bytes": sum(map(_size, files))}


def clear_folder(folder: Path, entry: re.Pattern[str] = ENTRY) -> int:
    """Delete a cache's entries (regular files of ``folder`` named as ``entry`` says) and the
    temporaries their writers left (:data:`~ckspace.environment.trees.TEMPORARY` names of such entries),
    nothing else: the name is what proves a file ckspace's. Returns how many entries were removed."""
    removed = 0
    for path in listed(folder):
        temporary = TEMPORARY.fullmatch(path.name)
        ours = entry.fullmatch(path.name) or (temporary and entry.fullmatch(temporary["name"]))
        if ours and _regular(path):
            discard(path)
            if not temporary:
                removed += 1
    return removed


def _regular(path: Path) -> bool:
    """A regular file itself (a link, even to one, is not ckspace's: it never writes links)."""
    return stat.S_ISREG(_mode(path))


def _size(path: Path) -> int:
    try:
        return os.lstat(path).st_size
    except OSError:  # removed meanwhile
        return 0


def usable_folder(root: Path, folder: Path) -> bool:
    """Create ``folder`` of the cache at ``root`` if needed; False (said once, :func:`unusable`)
    when it cannot be created or written (``os.access`` answers for root too: a read-only file system)."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        unusable(root, f"cannot create {folder}: {exc.strerror}")
        return False
    if not os.access(folder, os.W_OK | os.X_OK):
        unusable(root, f"{folder} is not writable")
        return False
    return True


def write_entry(root: Path, path: Path, data: bytes) -> bool:
    """Write the entry at ``path`` of the cache at ``root`` atomically (a temporary beside it, then
    a rename); True when written. Whatever is in the entry's place goes: a file, fifo or link is
    replaced by the rename, a directory is moved aside and removed. False when it cannot be
    written: the cache is unusable (said once) or, rarely, just this entry (a warning)."""
    tmp = unique_temporary(path)
    aside = path.parent / f".{path.name}.{secrets.token_hex(6)}.old"
    try:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o666)
        except OSError as exc:
            unusable(root, f"cannot write in {path.parent}: {exc.strerror}")
            return False
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        if stat.S_ISDIR(_mode(path)):
            os.replace(path, aside)
        os.replace(tmp, path)
        return True
    except OSError as exc:
        if exc.errno in _CACHE_WIDE:
            unusable(root, f"cannot write {path}: {exc.strerror}")
        else:
            log.warning("could not write cache entry %s (%s); continuing without it", path, exc.strerror or exc)
        return False
    finally:  # a signal at any moment leaves neither the temporary nor what was moved aside
        discard(tmp)
        discard(aside)


def _mode(path: Path) -> int:
    try:
        return os.lstat(path).st_mode
    except OSError:
        return 0
