"""Rule set ``tiny``: about ten configs chosen from ``full-tests``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ckspace.constraints.rulesets import register
from ckspace.constraints.rulesets.base import SampledRuleSet

if TYPE_CHECKING:
    from ckspace.constraints.generate.sampling import Entry


@register
class TinyRuleSet(SampledRuleSet):
    name = "tiny"
    summary = "the first full-tests config of each (category, ndim) group, round-robin to ten"

    def select(self, entries: list[Entry]) -> list[Entry]:
        from ckspace.constraints.generate.sampling import full_tests_select, tiny_select

        return tiny_select(full_tests_select(entries))
