"""Small things a new user tripped on (issue 25's list), each stated as the behaviour that is right."""

from __future__ import annotations

import re

import pytest
from conftest import ROOT

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
    from ckspace.constraints.expr import Field, Not
    from ckspace.constraints.render import why

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


def test_the_verification_doc_snippet_runs_as_written() -> None:
    text = (ROOT / "docs" / "verification.md").read_text()
    code = re.search(r"```python\n(.*?)```", text, re.S).group(1)
    namespace: dict = {}
    exec(compile(code, "docs/verification.md", "exec"), namespace)  # our own doc, not user text
    assert namespace["result"].checked > 0


def test_select_json_with_no_kernel_still_answers_on_stdout(tmp_path, capsys) -> None:
    import json

    from ckspace.cli import main

    names = tmp_path / "names.txt"
    names.write_text("grouped_conv_fwd_bf16_nhwgc_3d_compv3_cshuffle_intrawave_64x64x64_2x2x1_32x32x16_vec8_8_8\n")
    status = main(["select", "--arch", "gfx950", "--variant", "forward", "--dtype", "bf16", "--candidates", str(names),
                   "--problem", "N=1,C=64,K=64,Hi=8,Wi=8,Y=3,X=3,pad=1", "--format", "json"])
    record = json.loads(capsys.readouterr().out)
    assert status == 1 and record["pick"] is None and record["candidates"] == 1
    assert "problem_ndim" in json.dumps(record["blocking"]) and record["target"]["known_wrong_excluded"]
    assert main(["select", "--arch", "gfx950", "--variant", "forward", "--dtype", "bf16", "--top", "0",
                 "--problem", "N=1,C=64,K=64,Hi=8,Wi=8,Y=3,X=3,pad=1"]) == 2
    assert "--top 0: valid: how many kernels to list, at least 1" in capsys.readouterr().err
