"""The Python API: Space construction, listing, membership, and its errors."""

from __future__ import annotations

import pytest

from ckspace import CkspaceError, GemmConfig, InvalidChoiceError, Space


def test_single_cell_listing_is_consistent() -> None:
    space = Space(arch="gfx950", variant="bwd_weight", ndim=2, dtype="bf16", rule_set="full", ck=None)
    configs = list(space)
    assert space.count() == len(configs) == len(space.names()) == 790
    assert len(space.raw()) == 2068
    assert all(c.arch == "gfx950" and c.variant == "bwd_weight" and c.dtype == "bf16" for c in configs)


def test_lists_of_arguments() -> None:
    both = Space(arch=["gfx942", "gfx950"], variant=["forward"], ndim=[2], dtype=["fp16", "bf16"], rule_set="default")
    one = Space(arch="gfx942", variant="forward", ndim=2, dtype=["fp16", "bf16"], rule_set="default")
    assert both.count() > one.count() > 0
    union = Space("gfx942", "forward", 2, "fp16", rule_set=["default", "full"])
    assert union.count() == (
        Space("gfx942", "forward", 2, "fp16", rule_set="default").count()
        + Space("gfx942", "forward", 2, "fp16", rule_set="full").count()
        - len(
            set(Space("gfx942", "forward", 2, "fp16", rule_set="default").names())
            & set(Space("gfx942", "forward", 2, "fp16", rule_set="full").names())
        )
    )


def test_contains_name_and_config() -> None:
    space = Space("gfx942", "forward", 2, "fp16", rule_set="default")
    name = space.names()[0]
    assert space.contains(name) and name in space
    config = next(iter(space))
    assert space.contains(config)
    assert not space.contains(config.model_copy(update={"arch": "gfx950"}))  # not an arch of the space
    assert not space.contains(config.model_copy(update={"tile_k": config.tile_k * 2}))
    # tags come from the rule set: a user-built config with the default tag still matches
    assert space.contains(GemmConfig.from_name(name, "gfx942"))


def test_violated_rules_names_the_broken_checks() -> None:
    space = Space("gfx942", "bwd_data", 2, "fp16", rule_set="full")
    config = space.raw()[0]
    assert "backward_pipeline" in space.violated_rules(config)  # quirk 14.1 (docs/rules.md)
    assert not space.contains(config)


@pytest.mark.parametrize(
    "kwargs,bad",
    [
        ({"arch": "gfx1"}, "gfx1"),
        ({"arch": "gfx950", "variant": "up"}, "up"),
        ({"arch": "gfx950", "ndim": 0}, "0"),
        ({"arch": "gfx950", "dtype": "int8"}, "int8"),
        ({"arch": "gfx950", "rule_set": "all"}, "all"),
    ],
)
def test_bad_arguments_raise_ckspace_errors(kwargs: dict, bad: str) -> None:
    with pytest.raises(InvalidChoiceError) as info:
        Space(**kwargs)
    assert isinstance(info.value, CkspaceError) and isinstance(info.value, ValueError)
    assert bad in str(info.value) and "valid:" in str(info.value)


def test_bad_name_is_a_ckspace_error() -> None:
    with pytest.raises(CkspaceError):
        Space("gfx950", "forward", 2, "fp16").contains("grouped_conv_nonsense")
