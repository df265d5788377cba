"""The revision of the CK headers found, cached while they are unchanged.

Reading a revision off its headers takes ~0.2 s and pydantic, while a warm listing must answer in
about a tenth of a second. So the revision is cached on disk under a key made of the include
directory and the size and mtime of every file under ``ck_tile/ops`` (everything it is read from):
a changed header changes the key, and a cache that cannot be read or written, or a damaged entry,
costs time, not the answer (:mod:`ckspace.environment.cachefiles`).
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ckspace.environment.cachefiles import clear_folder, folder_info, read_json_entry, write_entry
from ckspace.environment.ck_headers import detect_revision
from ckspace.environment.ck_locate import locate_ck
from ckspace.environment.files import cache_dir, sha256

log = logging.getLogger(__name__)

if TYPE_CHECKING:
    from ckspace.core.ck import CkRevision


def find_revision(ck_root: str | os.PathLike[str] | None = None) -> CkRevision:
    """The revision of the CK headers :func:`~ckspace.environment.ck_locate.locate_ck` finds
    (``ck_root``, ``CK_ROOT``, ROCm,
    the amd-aiter wheel), cached while the headers are unchanged (:func:`revision_at`)."""
    return revision_at(str(locate_ck(ck_root)))


_FORMAT = 1
_OPS = "ck_tile/ops"


def _signature(include: Path) -> str:
    """What the revision read off ``include`` depends on: every file under ``ck_tile/ops`` by path,
    size and mtime (stat only, through ``os.scandir``: ~2 ms for the ~300 headers, which every
    command resolving its target pays)."""
    entries: list[str] = []

    def walk(folder: str) -> None:
        try:
            listed = sorted(os.scandir(folder), key=lambda e: e.name)
        except OSError:
            return
        for entry in listed:
            try:
                if entry.is_dir(follow_symlinks=True):
                    walk(entry.path)
                else:
                    st = entry.stat(follow_symlinks=True)
                    entries.append(f"{entry.path}\0{st.st_size}\0{st.st_mtime_ns}")
            except OSError:
                continue

    walk(str(include / _OPS))
    return sha256("\n".join([str(include), *entries]).encode())


def _cache_path(signature: str) -> Path:
    return cache_dir() / "ck" / f"{signature[:40]}.json"


def _read_cached(signature: str) -> dict[str, Any] | None:
    path = _cache_path(signature)
    try:
        entry = read_json_entry(path)
        if entry is None:
            return None
        if entry.get("format") != _FORMAT or entry.get("signature") != signature:
            return None
        revision = entry["revision"]
        if not (
            isinstance(revision, dict)
            and isinstance(revision.get("fingerprint"), str)
            and isinstance(revision.get("label"), str)
            and isinstance(revision.get("verified"), bool)
        ):
            raise ValueError("not a revision")  # what identity_at reads without validating
        return revision
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        if path not in _DAMAGED:  # identity_at and revision_at both read it
            _DAMAGED.add(path)
            log.warning("CK revision cache entry %s is unreadable (%s): reading the headers again", path, exc)
        return None


_DAMAGED: set[Path] = set()
"""Damaged entries already reported in this process."""


_REVISIONS: dict[str, CkRevision] = {}
"""Revisions read in this process, by :func:`_signature` of their headers."""


def revision_at(include_dir: str, signature: str | None = None) -> CkRevision:
    """The revision of the CK headers at a located include directory: from memory or the disk cache
    while their files are unchanged (by :func:`_signature`), else read off the headers (what
    ``find_revision`` answers). ``signature``: the headers' signature as :func:`identity_at` took
    it, so that a target reads the revision of the headers it resolved without a second stat of
    every header (a cold listing's cost over the rule space)."""
    from ckspace.core.ck import CkRevision

    if signature is None:
        signature = _signature(Path(include_dir))
    if signature in _REVISIONS:
        return _REVISIONS[signature]
    cached = _read_cached(signature)
    revision = None
    if cached is not None:
        try:
            revision = CkRevision.model_validate(cached)
        except ValueError as exc:
            log.warning("CK revision cache entry for %s does not validate (%s): reading the headers", include_dir, exc)
    if revision is None:
        revision = detect_revision(include_dir)
        _store(signature, revision.model_dump(mode="json"))
    _REVISIONS[signature] = revision
    return revision


def _store(signature: str, revision: dict[str, Any]) -> None:
    text = json.dumps({"format": _FORMAT, "signature": signature, "revision": revision})
    write_entry(cache_dir(), _cache_path(signature), text.encode())


def cache_info() -> dict[str, object]:
    """Where the CK revision cache is, how many entries it holds and their size in bytes."""
    return folder_info(cache_dir() / "ck")


def clear_cache() -> int:
    """Delete the CK revision cache's entries (``ck/*.json`` and stray temporaries, nothing else);
    returns how many were removed."""
    return clear_folder(cache_dir() / "ck")


def identity_at(include: Path) -> tuple[str, str, bool, str]:
    """(fingerprint, label, verified, signature) of the headers at a located include directory: from
    the cache while their files are unchanged, without loading pydantic (what a warm listing needs);
    the signature lets :func:`revision_at` read the same headers' revision later without a stat."""
    signature = _signature(include)
    cached = _read_cached(signature)
    if cached is None:
        cached = revision_at(str(include), signature).model_dump(mode="json")
    return cached["fingerprint"], cached["label"], bool(cached["verified"]), signature
