"""The Space API's small details a new user tripped on, each stated as the behaviour that is right: the
package's exports, a kernel record's text, ``replace`` validating, a filter's hint, an excluded table and a
partial explain in words."""

from __future__ import annotations

import re

import pytest

import ckspace
from ckspace import GemmConfig, Space
from ckspace.core.errors import InvalidChoiceError, InvalidInputError


def test_dir_lists_the_lazy_exports_and_no_kernel_error_is_one() -> None:
    names = dir(ckspace)
    assert {"Space", "Selector", "NoKernelError", "Target", "GemmConfig"} <= set(names)
    assert "import_module" not in names and "Any" not in names
    assert issubclass(ckspace.NoKernelError, ckspace.CkspaceError)


def test_a_kernel_record_shows_its_name() -> None:
    kernel = Space("gfx950", "forward", 2, "bf16", ck=None).kernels()[0]
    assert repr(kernel) == f"Kernel({kernel.name!r}, arch='gfx950')"


def test_replace_validates_where_model_copy_does_not() -> None:
    config = next(iter(Space("gfx950", "bwd_weight", 2, "bf16", ck=None)))
    assert config.replace(pipeline="compv4").pipeline.value == "compv4"
    assert config.model_copy(update={"pipline": "mem"}) is not None  # pydantic's own: no check at all
    with pytest.raises(InvalidChoiceError, match="unknown GemmConfig field 'pipline'; valid: kind, arch"):
        config.replace(pipline="mem")
    with pytest.raises(InvalidInputError, match="tile_m=0"):
        config.replace(tile_m=0)
    with pytest.raises(InvalidInputError, match="pipeline='nope'"):
        config.replace(pipeline="nope")
    assert isinstance(config.replace(), GemmConfig) and config.replace() == config


def test_a_filter_written_with_an_object_prefix_gets_the_field_name_as_a_hint() -> None:
    with pytest.raises(ckspace.CkspaceError, match=r"name the field alone \('tile_n', not c.tile_n\)"):
        Space("gfx950", "forward", 2, "bf16", ck=None).where("c.tile_n >= 64")


def test_an_excluded_table_reads_as_words() -> None:
    from ckspace.constraints.language.expr import Field, Not
    from ckspace.constraints.language.render import why

    big = Not(Field("tile_m").isin(range(10, 22)))
    assert why(big, {"tile_m": 12}) == "tile_m = 12 is one of the 12 excluded"
    small = Not(Field("tile_m").isin([12, 16]))
    assert why(small, {"tile_m": 12}) == "tile_m = 12 is one of the excluded 12, 16"


def test_a_partial_explain_over_several_cells_ends_with_a_summary() -> None:
    space = Space("gfx950", ["forward", "bwd_data", "bwd_weight"], 2, "bf16", ck=None)
    text = space.explain({"pipeline": "mem", "tile_m": 16}).text()
    summary = [line for line in text.splitlines() if line.startswith("summary: ")]
    assert len(summary) == 1
    found = re.fullmatch(r"summary: (\d+) valid completion\(s\) in (\d) of 3 cells", summary[0])
    per_cell = [int(n) for n in re.findall(r"VALID; (\d+) valid completion", text)]
    assert found and int(found[1]) == sum(per_cell) and int(found[2]) == len(per_cell) > 0
