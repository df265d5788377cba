"""A rule: a named constraint on config fields, with the check it belongs to and where it comes from."""

from __future__ import annotations

from dataclasses import dataclass

from ckspace.constraints.expr import TRUE, Expr, fields_of
from ckspace.core.vocab import Predicate


@dataclass(frozen=True)
class Rule:
    """``expr`` must hold for a config to satisfy the rule.

    ``text`` says the rule in words (with the table values it uses), ``source`` the upstream function,
    header or ckspace module it restates. ``quirk`` names the upstream inconsistency that configs
    removed by this rule illustrate (an item of :data:`ckspace.constraints.lint.QUIRKS`), if any.
    """

    name: str
    predicate: Predicate
    expr: Expr
    text: str
    source: str
    quirk: str | None = None

    @property
    def fields(self) -> tuple[str, ...]:
        return fields_of(self.expr)

    @property
    def vacuous(self) -> bool:
        """True when the rule cannot fail in this cell (folded to the constant TRUE)."""
        return self.expr == TRUE
