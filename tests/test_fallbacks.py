"""Vector-width fallbacks against brute-force statements of what they are.

``vector_variants``: every narrower-or-equal vector triple of the tables' widths (the kernel's own
excluded) whose config breaks no validity rule the kernel keeps, widest first (largest product of
the three widths, then vec_a, vec_b, vec_c). ``serving_variants``: for every pair of channel
counts (Cg, Kg) the kernel cannot serve by vector alignment, the first variant that divides them;
nothing else. Both are restated here by enumeration, not by the module's own shortcuts (the
power-of-two caps, the vectorised rule masks)."""

from __future__ import annotations

from itertools import product

import pytest

from ckspace.select.fallbacks import VECTOR_WIDTHS, serving_variants, vector_variants
from ckspace.space.space import Space
from ckspace.workloads.operands import OPERANDS, VECTOR_FIELDS

CELLS = [("forward", "default"), ("bwd_data", "default"), ("bwd_weight", "default"), ("forward", "tiny")]


def _configs(variant: str, rule_set: str) -> tuple[Space, list]:
    """Twelve kernels of the cell, plus three widened to 16-wide vectors (the tables' widest: no
    kernel of these rule sets has them) and one that breaks tile rules (a measured kernel some rule
    rejects), so that the widest caps and the rules a kernel already breaks are exercised. The rule
    space (``ck=None``): ``vector_variants`` without a target keeps the validity rules alone, and
    ``violated_rules`` names the target's rules too."""
    space = Space("gfx950", variant, ndim=2, dtype="bf16", rule_set=rule_set, ck=None)
    configs = [k.config() for k in space.kernels() if not k.depthwise][:12]
    assert configs
    widest = max(VECTOR_WIDTHS)
    widened = [c.model_copy(update=dict.fromkeys(VECTOR_FIELDS[i : i + 2], widest)) for i, c in enumerate(configs[:3])]
    broken = configs[3 % len(configs)].model_copy(update={"wave_m": 3})  # rules it breaks may stay broken
    assert space.violated_rules(broken)
    return space, configs + widened + [broken]


def _triple(config) -> tuple[int, int, int]:
    return tuple(getattr(config, f) for f in VECTOR_FIELDS)


@pytest.mark.parametrize("variant, rule_set", CELLS)
@pytest.mark.slow
def test_vector_variants_are_every_valid_narrower_triple_widest_first(variant: str, rule_set: str) -> None:
    space, configs = _configs(variant, rule_set)
    for config, family in zip(configs, vector_variants(configs), strict=True):
        own = _triple(config)
        kept = set(space.violated_rules(config))
        expected = []
        for triple in product(*([w for w in VECTOR_WIDTHS if w <= v] for v in own)):
            if triple == own:
                continue
            candidate = config.model_copy(update=dict(zip(VECTOR_FIELDS, triple, strict=True)))
            if set(space.violated_rules(candidate)) <= kept:
                expected.append(triple)
        expected.sort(key=lambda t: (-(t[0] * t[1] * t[2]), -t[0], -t[1], -t[2]))
        assert [_triple(v) for v in family] == expected
        for member in family:  # only the widths differ
            assert member.model_copy(update=dict(zip(VECTOR_FIELDS, own, strict=True))) == config


@pytest.mark.parametrize("variant, rule_set", CELLS)
@pytest.mark.slow
def test_serving_variants_are_the_first_variant_for_each_channel_pair(variant: str, rule_set: str) -> None:
    _, configs = _configs(variant, rule_set)
    gemm = OPERANDS[configs[0].variant]
    channels = {f: gemm.operand(f).channels for f in VECTOR_FIELDS}
    for config, family, served in zip(configs, vector_variants(configs), serving_variants(configs), strict=True):
        own = _triple(config)
        expected: dict[tuple[int, int, int], None] = {}
        for cg, kg in product(range(1, 65), repeat=2):
            count = {"Cg": cg, "Kg": kg}
            if all(count[channels[f]] % getattr(config, f) == 0 for f in VECTOR_FIELDS):
                continue
            first = next(
                (v for v in family if all(count[channels[f]] % getattr(v, f) == 0 for f in VECTOR_FIELDS)), None
            )
            if first is not None and _triple(first) != own:
                expected.setdefault(_triple(first))
        assert {_triple(v) for v in served} == set(expected)
        assert len(served) == len(expected)


def test_one_config_has_its_variants() -> None:
    """A single config (no cell to take from another)."""
    _, configs = _configs("forward", "default")
    assert [_triple(v) for v in vector_variants(configs[:1])[0]] == [_triple(v) for v in vector_variants(configs)[0]]
    assert vector_variants([]) == [] and serving_variants(configs[:1])
