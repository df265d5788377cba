"""Rule set ``full-tests``: a deterministic ~20 % stratified subset of ``full``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ckspace.constraints.rulesets import register
from ckspace.constraints.rulesets.base import SampledRuleSet

if TYPE_CHECKING:
    from ckspace.constraints.generate.sampling import Entry


@register
class FullTestsRuleSet(SampledRuleSet):
    name = "full-tests"
    summary = "every 5th config of each full category, plus one per uncovered (pipeline, scheduler)"

    def select(self, entries: list[Entry]) -> list[Entry]:
        from ckspace.constraints.generate.sampling import full_tests_select

        return full_tests_select(entries)
