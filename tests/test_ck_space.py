"""The space restricted to what the CK headers in use can compile (Space.for_ck, --ck-root)."""

from __future__ import annotations

import pytest

from ckspace import Space
from ckspace.environment.ck_header_cache import find_revision


@pytest.fixture(scope="module")
def ck_space() -> Space:
    """The CK headers of the test extras (amd-aiter): always there in a test install."""
    return Space("gfx942", rule_set="full", ck=None).for_ck(find_revision())


@pytest.mark.slow
def test_ck_space_is_the_compilable_part(ck_space: Space) -> None:
    from ckspace.constraints.rulebook.ck_rules import ck_rules
    from ckspace.constraints.rulebook.known_wrong import known_wrong_rules

    full = Space("gfx942", rule_set="full", ck=None)
    kept = {(c.name, c.dtype) for c in ck_space}
    assert 0 < len(kept) < full.count()
    assert all(c.kind == "gemm" for c in ck_space)  # ckspace emits no depthwise kernel
    for config in full:
        if config.kind != "gemm":
            continue
        # a CK target also leaves out the kernels upstream documents as wrong
        rules = (
            *ck_rules(ck_space.ck, config.variant, config.dtype, arch="gfx942", ndim=config.ndim),
            *known_wrong_rules(config.variant, config.dtype),
        )
        broken = [r.name for r in rules if not _holds(r, config)]
        assert ((config.name, config.dtype) in kept) == (not broken), config.name


def _holds(rule, config) -> bool:
    from ckspace.constraints.evaluators.classify import columns, rule_masks
    from ckspace.core.fields import GEMM_FIELD_NAMES

    return bool(rule_masks([rule], columns([config.row()], GEMM_FIELD_NAMES), 1)[rule.name][0])


def test_explain_says_why_this_ck_excludes_a_kernel(ck_space: Space) -> None:
    full = Space("gfx942", "forward", 2, "bf16", ck=None)
    name = next(
        c.name
        for c in full
        if c.kind == "gemm" and c.pipeline == "compv1" and c.vec_c % 2 == 0 and c.specialization == "default"
    )
    (cell,) = ck_space.explain(name).cells
    assert not cell.valid and "ck_pipeline" in {b.constraint for b in cell.blame}
    assert {b.kind for b in cell.blame} == {"ck"}  # valid and proposed: only this CK excludes it
