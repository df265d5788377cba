"""The target every command and entry point answers for: the arch, and the CK headers ckspace finds.

Counting the upstream rule space and building the kernels are different questions: the rule set
proposes kernels the installed CK cannot compile, and upstream emits some it documents as giving
wrong results. A :class:`Target` says which question is asked. By default ckspace looks for CK
headers the way ``emit`` always has (``--ck-root``, ``CK_ROOT``, the ROCm include directory, the
``amd-aiter`` wheel: :func:`ckspace.core.ck_headers.locate_ck`), and the space of every command is
the rule set's valid kernels that those headers can build and that upstream does not document as
wrong. ``rules only`` (``--rules-only``, ``Space(..., ck=None)``) asks for the upstream rule space
whatever is installed: what the parity tests compare.

Resolving a target must stay cheap (a warm ``ckspace enumerate --count`` answers in about a tenth
of a second), while reading a CK revision off its headers takes ~0.2 s and pydantic. So the headers'
fingerprint, label and revision are cached on disk under a key made of the include directory and
the size and mtime of every file under ``ck_tile/ops`` (everything the revision is read from); a
changed header changes the key, and a cache that cannot be read or written costs time, not the
answer.
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ckspace.core.errors import CkHeadersNotFound, CkspaceError
from ckspace.core.files import cache_dir, sha256, write_atomic

if TYPE_CHECKING:
    from ckspace.core.ck import CkRevision

log = logging.getLogger(__name__)

AUTO = "auto"
"""``ck=AUTO``: find the CK headers as ``emit`` does (the default of every entry point)."""

KNOWN_WRONG_VERSION = 1
"""Bumped with every change to the rules of :mod:`ckspace.constraints.known_wrong` (part of a target's
cache key, stated here so that a cached listing is answered without importing the rules)."""

_FORMAT = 1
_OPS = "ck_tile/ops"


def _signature(include: Path) -> str:
    """What the revision read off ``include`` depends on: every file under ``ck_tile/ops`` by path,
    size and mtime (stat only: a few milliseconds for the ~300 headers)."""
    entries = []
    for root, dirs, files in os.walk(include / _OPS):
        dirs.sort()
        for name in sorted(files):
            path = Path(root) / name
            try:
                st = path.stat()
            except OSError:
                continue
            entries.append(f"{path.relative_to(include)}\0{st.st_size}\0{st.st_mtime_ns}")
    return sha256("\n".join([str(include), *entries]).encode())


@dataclass(frozen=True)
class CkHeaders:
    """CK headers found for a target: where, their fingerprint and label (cheap, from the cache),
    and their revision (:meth:`revision`, read on first need)."""

    include_dir: str
    fingerprint: str
    label: str
    verified: bool

    def revision(self) -> "CkRevision":
        """The features of these headers (:class:`~ckspace.core.ck.CkRevision`)."""
        return _revision(self.include_dir)


def _cache_path(signature: str) -> Path:
    return cache_dir() / "ck" / f"{signature[:40]}.json"


def _read_cached(signature: str) -> dict[str, Any] | None:
    path = _cache_path(signature)
    try:
        entry = json.loads(path.read_text(encoding="utf-8"))
        if entry.get("format") != _FORMAT or entry.get("signature") != signature:
            return None
        revision = entry["revision"]
        if not isinstance(revision, dict) or not isinstance(revision.get("fingerprint"), str):
            return None
        return revision
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        log.warning("CK revision cache entry %s is unreadable (%s): reading the headers again", path, exc)
        return None


_REVISIONS: dict[str, "CkRevision"] = {}
"""Revisions read in this process, by :func:`_signature` of their headers."""


def _revision(include_dir: str) -> "CkRevision":
    """The revision of the headers at ``include_dir``: from memory or the disk cache while their
    files are unchanged (by :func:`_signature`), else read off the headers."""
    from ckspace.core.ck import CkRevision
    from ckspace.core.ck_headers import detect_revision

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
    path = _cache_path(signature)
    try:
        write_atomic(path, text.encode(), "CK revision cache entry")
    except (OSError, CkspaceError) as exc:  # a read-only cache costs time, not the answer
        log.warning("could not write %s (%s); continuing without it", path, exc)


def revision_at(include_dir: str) -> "CkRevision":
    """The revision of the CK headers at a located include directory (cached while they are
    unchanged): what ``find_revision`` answers."""
    return _revision(include_dir)


def _headers(include: Path) -> CkHeaders:
    """The headers at a located include directory, from the cache when their files are unchanged."""
    signature = _signature(include)
    cached = _read_cached(signature)
    if cached is None:
        revision = _revision(str(include))
        cached = revision.model_dump(mode="json")
    return CkHeaders(str(include), cached["fingerprint"], cached["label"], bool(cached["verified"]))


@dataclass(frozen=True)
class Target:
    """What a space is for: the upstream rule space (``rules_only``), or the kernels the CK headers
    ``ck`` can build (or, when none were found, the rule space), less the known-wrong ones."""

    ck: CkHeaders | None
    rules_only: bool
    looked: str = ""
    """Where ckspace looked for CK headers and found none (empty when found or not looked for)."""

    @property
    def cache_key(self) -> str | None:
        """What a target listing's cache entry depends on beyond the rule space's key (None: the rule
        space itself)."""
        if self.rules_only:
            return None
        return f"known_wrong:{KNOWN_WRONG_VERSION};ck:{self.ck.fingerprint if self.ck else 'none'}"

    def describe(self) -> str:
        """One line: which question the answer is for."""
        if self.rules_only:
            return "target: rules only (--rules-only): the upstream rule space, known-wrong kernels included"
        if self.ck is None:
            return (f"target: rules only: no CK headers found (looked at {self.looked}); known-wrong kernels "
                    "excluded")
        return (f"target: CK {self.ck.label}{'' if self.ck.verified else ' (unverified)'} at {self.ck.include_dir}; "
                "known-wrong kernels excluded")

    def record(self) -> dict[str, Any]:
        """The target as a JSON field."""
        return {"ck": self.ck.label if self.ck else None, "ck_root": self.ck.include_dir if self.ck else None,
                "rules_only": self.rules_only, "known_wrong_excluded": not self.rules_only,
                "note": self.describe().removeprefix("target: ")}


def resolve_target(ck: object = AUTO) -> Target:
    """The target of ``ck``: :data:`AUTO` (find the headers; none found is the rule space less the
    known-wrong kernels), None (the rule space: rules only), a path (the headers there, an error if
    it holds none), a :class:`~ckspace.core.ck.CkRevision` or a :class:`Target`."""
    from ckspace.core.ck_headers import locate_ck

    if isinstance(ck, Target):
        return ck
    if ck is None:
        return Target(None, rules_only=True)
    if isinstance(ck, str) and ck == AUTO:
        try:
            return Target(_headers(locate_ck(None)), rules_only=False)
        except CkHeadersNotFound as exc:
            return Target(None, rules_only=False, looked=exc.looked)
    if isinstance(ck, (str, os.PathLike)):
        return Target(_headers(locate_ck(ck)), rules_only=False)
    from ckspace.core.ck import CkRevision

    if isinstance(ck, CkRevision):
        return Target(CkHeaders(ck.include_dir, ck.fingerprint, ck.label, ck.verified), rules_only=False)
    raise CkspaceError(f"ck {ck!r}: valid: 'auto', None (rules only), a CK root path, a CkRevision or a Target")
