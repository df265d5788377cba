"""A rule: a named constraint on config fields, with the check it belongs to, where it comes from and
the table values it reads; and what a rule on fields a kind of config lacks means for that kind
(:func:`excludes_kind`)."""

from __future__ import annotations

import json
from collections.abc import Collection, Iterable
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any

from ckspace.constraints.language.expr import TRUE, Const, Expr, Field, fields_of
from ckspace.core.revisions import Quirk, RulesRevision
from ckspace.core.tables import table
from ckspace.core.vocab import Predicate

_REQUIRED = object()

TILE = (Field("tile_m"), Field("tile_n"), Field("tile_k"))
WAVE = (Field("wave_m"), Field("wave_n"), Field("wave_k"))
WARP = (Field("warp_tile_m"), Field("warp_tile_n"), Field("warp_tile_k"))
"""The (m, n, k) field triples many rules read: block tile, waves per block, warp tile."""


@dataclass(frozen=True)
class TableValue:
    """One value a rule reads: the table (``validity.json``, a CK revision, a CK header), the key path
    in it (``is_valid_for_arch.streamk_variants``) and the value.

    Two reads of one place are equal whatever the value: tables do not change while ckspace runs, and
    leaving the value (often a list) out of comparisons keeps rules hashable.
    """

    table: str
    path: str
    value: Any = field(compare=False)

    def __str__(self) -> str:
        return f"{self.table} {self.path} = {json.dumps(self.value)}"


def read(name: str, *keys: str, default: Any = _REQUIRED, revision: RulesRevision | None = None) -> TableValue:
    """The value at ``keys`` in table ``name``, with its place, for a rule's ``reads``: the shipped
    table, or the table as rule revision ``revision`` has it (a value a revision's delta changed is
    labelled with that revision).

    ``default`` stands in for a missing key (the arch tables leave out the dtypes an arch has no warp
    tiles for); without it a missing key raises ``KeyError``.
    """
    value: Any = table(name) if revision is None else revision.patched(name, table(name))
    changed = None if revision is None else revision.changed_by(name, keys)
    label = (
        f"{name}.json" if changed is None or changed.parent is None else f"{name}.json (rules revision {changed.name})"
    )
    try:
        for key in keys:
            value = value[key]
    except KeyError:
        if default is _REQUIRED:
            raise
        value = default
    return TableValue(label, ".".join(keys), value)


@dataclass(frozen=True)
class Rule:
    """``expr`` must hold for a config to satisfy the rule.

    ``text`` says the rule in words, built from the values in ``reads`` (so the words cannot drift
    from the tables); ``source`` names the upstream function, CK header or ckspace module it restates.
    ``quirk`` names the upstream inconsistency that configs removed by this rule illustrate (a key of
    :data:`ckspace.constraints.linting.lint.QUIRKS`), if any.
    """

    name: str
    predicate: Predicate
    expr: Expr
    text: str
    source: str
    quirk: Quirk | None = None
    reads: tuple[TableValue, ...] = ()

    @cached_property
    def fields(self) -> tuple[str, ...]:
        """The config fields the rule reads (walked once: the listing asks each rule of every cell
        whether a kind of config has them, :func:`excludes_kind`)."""
        return fields_of(self.expr)

    @property
    def vacuous(self) -> bool:
        """True when the rule cannot fail in this cell (folded to the constant TRUE)."""
        return self.expr == TRUE


def excludes_kind(rule: Rule, field_names: Collection[str]) -> bool:
    """Whether ``rule`` excludes every config whose fields are ``field_names`` (one kind of config:
    GEMM or depthwise) because it reads a field they lack: a filter on ``tile_m`` or a CK rule on
    GEMM fields, put to depthwise configs. Such a rule is neither skipped nor an error: no config of
    that kind satisfies it, which is the one statement of that policy for the listing's filters, the
    cells' models and the counted spaces alike."""
    return not set(rule.fields) <= set(field_names)


def any_excludes_kind(rules: Collection[Rule], field_names: Collection[str]) -> bool:
    """Whether some rule of ``rules`` :func:`excludes_kind` (the fields of all of them walked at once:
    the rules of a cell share their subexpressions)."""
    return not set(fields_of(*(rule.expr for rule in rules))) <= set(field_names)


def for_kind(rule: Rule, field_names: Collection[str], kind: str) -> Rule:
    """``rule`` as configs of ``kind`` (fields ``field_names``) meet it: itself, or, when it
    :func:`excludes_kind`, a rule of the same name that none of them satisfies and whose words say
    why (so an explanation still names it)."""
    if not excludes_kind(rule, field_names):
        return rule
    return replace(rule, expr=Const(0), text=f"{rule.text} (fields {kind} configs lack)")


def or_words(items: Iterable[object]) -> str:
    """``a, b or c``: a rule's list of allowed values in its words."""
    words = [str(i) for i in items]
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " or " + words[-1]
