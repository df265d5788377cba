"""Content-addressed cache of compiled objects.

A batch's object is stored under the sha256 of everything that changes it: the translation unit's
text and the text of every emitted file it includes, the compiler's identity (the digest of
:func:`ckspace.environment.compilers.identify`: its resolved path, whole ``--version`` and a wrapper
script's text), the flags, the offload target and the CK revision's fingerprint. Paths of
the emitted tree are not part of the key, so the same kernels emitted elsewhere hit the cache.

The key says what went in, not what came out, so a lookup checks the object itself: a regular
file (not a fifo, a directory or a link in its place) holding a whole ELF object (its section
headers, which compilers write last, inside the file). A damaged entry is a miss: the unit is
compiled again and the entry replaced (:mod:`ckspace.environment.cachefiles`).
"""

from __future__ import annotations

import errno
import hashlib
import json
import logging
import os
import re
import stat
import struct
from pathlib import Path

from ckspace.environment.cachefiles import clear_folder, entries, summary, write_entry
from ckspace.environment.files import cache_dir
from ckspace.environment.trees import listed

log = logging.getLogger(__name__)


def object_cache_dir() -> Path:
    """``$CKSPACE_BUILD_CACHE``, else ``objects/`` in ckspace's cache directory."""
    explicit = os.environ.get("CKSPACE_BUILD_CACHE")
    return Path(explicit) if explicit else cache_dir() / "objects"


def object_key(
    sources: list[bytes], compiler_identity: str, flags: tuple[str, ...], arch: str, ck_fingerprint: str
) -> str:
    """The key of one unit's object: ``compiler_identity`` is the compiler's
    :func:`~ckspace.environment.compilers.identify` digest, for the HIP toolchain and the host C compiler
    alike; the host units have no offload target nor CK (``arch`` "host", no fingerprint)."""
    digest = hashlib.sha256()
    for data in sources:
        digest.update(hashlib.sha256(data).digest())
    digest.update(json.dumps([compiler_identity, list(flags), arch, ck_fingerprint]).encode())
    return digest.hexdigest()


def _path(key: str) -> Path:
    return object_cache_dir() / key[:2] / f"{key}.o"


_SHARD = re.compile(r"[0-9a-f]{2}")


def _shards() -> list[tuple[Path, re.Pattern[str]]]:
    """The object cache's folders (``ab/``), each with the name of the objects it holds
    (``ab<62 hex digits>.o``, see :func:`_path`): the names that prove a file ckspace's, where
    ``CKSPACE_BUILD_CACHE`` may name a folder that holds other files too."""
    return [
        (folder, re.compile(rf"{folder.name}[0-9a-f]{{62}}\.o"))
        for folder in listed(object_cache_dir())
        if _SHARD.fullmatch(folder.name)
    ]


_damaged: set[Path] = set()
"""Damaged entries already reported (a build looks a key up several times)."""


def lookup(key: str) -> Path | None:
    """The cached object of ``key``, or None when absent or damaged (:func:`damage`)."""
    path = _path(key)
    why = damage(path)
    if why is None:
        return path
    if why and path not in _damaged:
        _damaged.add(path)
        log.warning("object cache entry %s is damaged (%s): compiling it again", path, why)
    return None


def damage(path: Path) -> str | None:
    """Why the entry at ``path`` is not a whole object ('' when there is none), None when it is.
    Whole: a regular ELF file whose section header table, which ends a compiler's object, lies
    inside the file (a truncated or garbage file fails; 64 bytes are read, not the object)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        return "" if exc.errno in (errno.ENOENT, errno.ENOTDIR) else exc.strerror or str(exc)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return "not a regular file"
        head = os.pread(fd, 64, 0)
    except OSError as exc:
        return exc.strerror or str(exc)
    finally:
        os.close(fd)
    if len(head) < 52 or head[:4] != b"\x7fELF" or head[4] not in (1, 2) or head[5] not in (1, 2):
        return "not an ELF object"
    order = "<" if head[5] == 1 else ">"
    if head[4] == 2:  # ELF64: e_shoff at 40, e_shentsize and e_shnum at 58
        if len(head) < 64:
            return "not an ELF object"
        (offset,), (size, count) = struct.unpack_from(order + "Q", head, 40), struct.unpack_from(order + "HH", head, 58)
    else:  # ELF32: e_shoff at 32, e_shentsize and e_shnum at 46
        (offset,), (size, count) = struct.unpack_from(order + "I", head, 32), struct.unpack_from(order + "HH", head, 46)
    if offset == 0 or offset + size * max(count, 1) > st.st_size:  # count 0: the real count is in entry 0
        return "truncated"
    return None


def store(key: str, obj: Path) -> None:
    """Copy ``obj`` into the cache atomically."""
    store_bytes(key, obj.read_bytes())


def store_bytes(key: str, data: bytes) -> None:
    """Write an object's bytes into the cache atomically (a temporary file moved into place): a
    build that dies while storing leaves no half object under the key. Whatever damaged entry is in
    its place is replaced."""
    path = _path(key)
    if write_entry(object_cache_dir(), path, data):
        _damaged.discard(path)


def info() -> dict[str, object]:
    """Where the object cache is, how many objects it holds and their size in bytes."""
    return summary(object_cache_dir(), [path for folder, name in _shards() for path in entries(folder, name)])


def clear() -> int:
    """Delete the cached objects and their writers' temporaries (by name, :func:`_shards`; nothing
    else in the directory); returns how many objects were removed."""
    return sum(clear_folder(folder, name) for folder, name in _shards())
