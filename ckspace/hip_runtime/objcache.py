"""Content-addressed cache of compiled objects.

A batch's object is stored under the sha256 of everything that changes it: the translation unit's
text and the text of every emitted file it includes, the compiler's identity (path, version, and a
wrapper script's text), the flags, the offload target and the CK revision's fingerprint. Paths of
the emitted tree are not part of the key, so the same kernels emitted elsewhere hit the cache.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from ckspace.constraints.cellcache import cache_dir
from ckspace.core.files import write_atomic


def object_cache_dir() -> Path:
    """``$CKSPACE_BUILD_CACHE``, else ``objects/`` in ckspace's cache directory."""
    explicit = os.environ.get("CKSPACE_BUILD_CACHE")
    return Path(explicit) if explicit else cache_dir() / "objects"


def object_key(sources: list[bytes], compiler_identity: str, flags: tuple[str, ...], arch: str,
               ck_fingerprint: str) -> str:
    digest = hashlib.sha256()
    for data in sources:
        digest.update(hashlib.sha256(data).digest())
    digest.update(json.dumps([compiler_identity, list(flags), arch, ck_fingerprint]).encode())
    return digest.hexdigest()


def lookup(key: str) -> Path | None:
    path = object_cache_dir() / key[:2] / f"{key}.o"
    return path if path.is_file() else None


def store(key: str, obj: Path) -> None:
    """Copy ``obj`` into the cache atomically."""
    store_bytes(key, obj.read_bytes())


def store_bytes(key: str, data: bytes) -> None:
    """Write an object's bytes into the cache atomically (a temporary file moved into place): a
    build that dies while storing leaves no half object under the key, which a lookup would trust."""
    write_atomic(object_cache_dir() / key[:2] / f"{key}.o", data)


def info() -> dict[str, object]:
    """Where the object cache is, how many objects it holds and their size in bytes."""
    objects = [p for p in object_cache_dir().glob("??/*.o") if p.is_file()]
    return {"directory": str(object_cache_dir()), "entries": len(objects),
            "bytes": sum(p.stat().st_size for p in objects)}


def clear() -> int:
    """Delete the cached objects (``??/*.o`` only, nothing else in the directory); returns how many."""
    removed = 0
    for path in object_cache_dir().glob("??/*.o"):
        if path.is_file() and not path.is_symlink():
            path.unlink(missing_ok=True)
            removed += 1
    return removed
