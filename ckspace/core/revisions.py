"""Rule revisions: the upstream states of the generator's rules that ckspace reproduces.

Upstream moves: a later change can make a check arch-aware or correct an arch fact, and a user of
today's upstream then gets a different space than the one the oracle fixtures pin. Each state is a
:class:`RulesRevision`, read from ``revisions.json``. A revision is a *delta* on its parent, never a
copy: it names the formulation it gives each rule it changes (the formulations live with the rules,
in :mod:`ckspace.constraints.rulebook.validity`) and carries JSON merge patches on its parent's tables. The
oldest revision is the shipped tables as they are. A revision can follow an upstream change that is
not merged yet (an open pull request): it is chosen only on request, so the default everywhere is the
newest *merged* revision, the rules a user of today's upstream gets.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from functools import cache
from typing import Any

from ckspace.core.errors import InvalidChoiceError
from ckspace.core.tables import table


class Quirk(StrEnum):
    """An inconsistency of the upstream generator that ckspace reproduces: the one statement of the
    ids (those of the reference specification ckspace was written against, as ``docs/rules.md`` lists
    them) that rules (``Rule.quirk``), lint findings and the revisions that fix one
    (``revisions.json`` ``fixes``) refer to. Each is said in words by
    :data:`ckspace.constraints.linting.lint.QUIRKS`."""

    BACKWARD_PIPELINES = "14.1"
    WAVE_K_FORCED = "14.2"
    WMMA_DTYPE_TAG = "14.3"
    MISSING_WARP_TILES = "14.4"
    LDS_ARCH_BLIND = "14.5"
    VECTOR_GATE_WARP_SIZE = "14.6"
    WARP_TILE_K_UNCHECKED = "14.7"
    STRUCTURAL_FALLBACK = "14.8"
    NO_1D_TILES = "14.9"
    LAYOUT_NAME = "14.10"
    TINY_PER_CATEGORY = "14.11"
    COMPV4_DOUBLED_TILE_K = "14.13"
    KNOWN_WRONG_EMITTED = "14.15"
    ARCH_TABLES_DISAGREE = "14.16"
    DEPTHWISE_UNCHECKED = "14.18"


@dataclass(frozen=True, eq=False)
class RulesRevision:
    """One upstream state of the rules, as a delta on ``parent`` (None for the oldest). A plain
    dataclass, not a pydantic model: requests carry revisions, and a warm listing loads no pydantic."""

    name: str
    parent: str | None
    upstream: str
    """Which upstream state this is (commits, pull request)."""
    merged: bool
    """Whether the state is merged upstream; an unmerged one (an open pull request) is opt-in and
    never the default."""
    summary: str
    fixes: tuple[Quirk, ...]
    """Upstream quirks this revision removes."""
    rules: dict[str, str]
    """Rule name -> the formulation this revision gives it."""
    tables: dict[str, dict[str, Any]]
    """Table name -> JSON merge patch (RFC 7386) on the parent's table."""

    def chain(self) -> tuple[RulesRevision, ...]:
        """This revision and its ancestors, oldest first."""
        ancestors = [self]
        while ancestors[0].parent is not None:
            ancestors.insert(0, rules_revision(ancestors[0].parent))
        return tuple(ancestors)

    def formulation(self, rule: str) -> tuple[str, RulesRevision]:
        """The formulation of ``rule`` here and the revision that introduced it (the newest one in
        the chain that names the rule)."""
        for revision in reversed(self.chain()):
            if rule in revision.rules:
                return revision.rules[rule], revision
        raise KeyError(f"rules revision {self.name} gives rule {rule!r} no formulation")

    def fixed(self) -> frozenset[str]:
        """The quirks this revision or an ancestor removes."""
        return frozenset(q for revision in self.chain() for q in revision.fixes)

    def patched(self, name: str, base: Mapping[str, Any]) -> dict[str, Any]:
        """Table ``name`` as this revision has it: ``base`` (the shipped table) with the patches of
        the chain applied, oldest first. ``base`` is not modified."""
        value: dict[str, Any] = dict(base)
        for revision in self.chain():
            if name in revision.tables:
                value = _merge_patch(value, revision.tables[name])
        return value

    def changed_by(self, name: str, keys: Sequence[str]) -> RulesRevision | None:
        """The newest revision of the chain whose patch of table ``name`` reaches the value at
        ``keys`` (sets it, a key inside it or a key around it), or None when no patch does."""
        for revision in reversed(self.chain()):
            if any(_overlaps(path, tuple(keys)) for path in _paths(revision.tables.get(name, {}))):
                return revision
        return None


def _merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386: objects merge key by key, ``null`` deletes, anything else replaces."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = _merge_patch(out.get(key), value)
    return out


def _paths(patch: Mapping[str, Any], prefix: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    """The key paths a merge patch sets or deletes."""
    for key, value in patch.items():
        if isinstance(value, dict):
            yield from _paths(value, (*prefix, key))
        else:
            yield (*prefix, key)


def _overlaps(a: tuple[str, ...], b: tuple[str, ...]) -> bool:
    return a[: len(b)] == b[: len(a)]


@cache
def _revisions() -> dict[str, RulesRevision]:
    revisions: dict[str, RulesRevision] = {}
    for entry in table("revisions")["revisions"]:
        revision = RulesRevision(
            name=entry["name"],
            parent=entry["parent"],
            upstream=entry["upstream"],
            merged=entry["merged"],
            summary=entry["summary"],
            fixes=tuple(_quirk(entry["name"], q) for q in entry["fixes"]),
            rules=dict(entry["rules"]),
            tables=dict(entry["tables"]),
        )
        if revision.parent is not None and revision.parent not in revisions:
            raise ValueError(f"revisions.json: {revision.name}'s parent {revision.parent!r} is not listed before it")
        if revision.merged and revision.parent is not None and not revisions[revision.parent].merged:
            raise ValueError(f"revisions.json: merged {revision.name} descends from unmerged {revision.parent}")
        revisions[revision.name] = revision
    return revisions


def _quirk(revision: str, text: str) -> Quirk:
    """A quirk id ``revisions.json`` gives ``revision``, checked against :class:`Quirk`."""
    try:
        return Quirk(text)
    except ValueError:
        raise ValueError(f"revisions.json: {revision} fixes {text!r}, which is no quirk of Quirk") from None


def rules_revision_names() -> tuple[str, ...]:
    """Every rule revision, oldest first."""
    return tuple(_revisions())


def default_rules_revision() -> str:
    """The newest merged revision: the rules of today's upstream, used unless one is chosen (an
    unmerged upstream proposal must be asked for by name)."""
    return [name for name, revision in _revisions().items() if revision.merged][-1]


def rules_revision(name: str | None = None) -> RulesRevision:
    """The revision ``name`` (None: the default, the newest merged one); :class:`InvalidChoiceError`
    for an unknown name."""
    revisions = _revisions()
    key = default_rules_revision() if name is None else str(name).strip().lower()
    if key not in revisions:
        raise InvalidChoiceError("rules revision", name, revisions)
    return revisions[key]
