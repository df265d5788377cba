"""The target every command and entry point answers for: the arch, and the CK headers ckspace finds.

Counting the upstream rule space and building the kernels are different questions: the rule set
proposes kernels the installed CK cannot compile, and upstream emits some it documents as giving
wrong results. A :class:`Target` says which question is asked. By default ckspace looks for CK
headers the way ``emit`` always has (``--ck-root``, ``CK_ROOT``, the ROCm include directory, the
``amd-aiter`` wheel: :func:`ckspace.environment.ck_locate.locate_ck`), and the space of every command is
the rule set's valid kernels that those headers can build and that upstream does not document as
wrong. ``rules only`` (``--rules-only``, ``Space(..., ck=None)``) asks for the upstream rule space
whatever is installed: what the parity tests compare.

Resolving a target stays cheap (a warm ``ckspace enumerate --count`` answers in about a tenth of a
second): the headers' fingerprint and label come from the revision cache of
:mod:`ckspace.environment.ck_header_cache` without loading pydantic; the revision itself is read only when a
listing is not cached.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ckspace.core.errors import CkHeadersNotFound, CkspaceError

if TYPE_CHECKING:
    from ckspace.core.ck import CkRevision

AUTO = "auto"
"""``ck=AUTO``: find the CK headers as ``emit`` does (the default of every entry point)."""

KNOWN_WRONG_VERSION = 1
"""Bumped with every change to the rules of :mod:`ckspace.constraints.rulebook.known_wrong` (part of a target's
cache key, stated here so that a cached listing is answered without importing the rules)."""


@dataclass(frozen=True)
class CkHeaders:
    """CK headers found for a target: where, their fingerprint and label (cheap, from the cache),
    and their revision (:meth:`revision`, read on first need)."""

    include_dir: str
    fingerprint: str
    label: str
    verified: bool
    signature: str | None = field(default=None, compare=False, repr=False)
    """The headers' signature when they were found
    (:func:`~ckspace.environment.ck_header_cache.identity_at`): the revision read later is of those
    headers, without a second stat of each."""
    given: CkRevision | None = field(default=None, compare=False, repr=False)
    """The revision the caller passed (``Space(..., ck=revision)``): used as it is, never read again
    from ``include_dir``, which need not exist on this machine."""

    def revision(self) -> CkRevision:
        """The features of these headers (:class:`~ckspace.core.ck.CkRevision`), read once per target:
        every cell of a listing asks for them, and each read would stat the ~300 headers again to
        check the revision cache (what the fingerprint, fixed when the target was resolved, says)."""
        if self.given is not None:
            return self.given
        read = self.__dict__.get("_revision")
        if read is None:
            from ckspace.environment.ck_header_cache import revision_at

            read = revision_at(self.include_dir, self.signature)
            object.__setattr__(self, "_revision", read)  # frozen: a memo, not part of the identity
        return read


def _headers(include: Path) -> CkHeaders:
    from ckspace.environment.ck_header_cache import identity_at

    return CkHeaders(str(include), *identity_at(include))


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
            return (
                f"target: no CK headers found (looked at {self.looked}): the upstream rule space, known-wrong "
                "kernels excluded"
            )
        return (
            f"target: CK {self.ck.label}{'' if self.ck.verified else ' (unverified)'} at {self.ck.include_dir}; "
            "known-wrong kernels excluded"
        )

    def record(self) -> dict[str, Any]:
        """The target as a JSON field."""
        return {
            "ck": self.ck.label if self.ck else None,
            "ck_root": self.ck.include_dir if self.ck else None,
            "rules_only": self.rules_only,
            "known_wrong_excluded": not self.rules_only,
            "note": self.describe().removeprefix("target: "),
        }


def resolve_target(ck: object = AUTO) -> Target:
    """The target of ``ck``: :data:`AUTO` (find the headers; none found is the rule space less the
    known-wrong kernels), None (the rule space: rules only), a path (the headers there, an error if
    it holds none), a :class:`~ckspace.core.ck.CkRevision` or a :class:`Target`."""
    from ckspace.environment.ck_locate import locate_ck

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
        return Target(CkHeaders(ck.include_dir, ck.fingerprint, ck.label, ck.verified, given=ck), rules_only=False)
    raise CkspaceError(f"ck {ck!r}: valid: 'auto', None (rules only), a CK root path, a CkRevision or a Target")
