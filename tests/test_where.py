"""--where filters: semantics equal a plain Python filter; hostile input never runs."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from strategies import gemm_configs

from ckspace import CkspaceError, Space
from ckspace.constraints.evaluators.classify import columns, rule_masks, satisfies_all
from ckspace.constraints.evaluators.model import CellModel, cell_model
from ckspace.constraints.generate.full_walk import depthwise_rows
from ckspace.constraints.language.rule import excludes_kind
from ckspace.constraints.language.where import WhereError, parse_where
from ckspace.core.cells import Cell
from ckspace.core.fields import DEPTHWISE_FIELDS, GEMM_BOUNDS, GEMM_FIELD_NAMES
from ckspace.core.vocab import Dtype, Variant

CASES = [
    ("tile_m * tile_n >= 8192", lambda c: c.tile_m * c.tile_n >= 8192),
    (
        "pipeline in [compv3, compv4] and not double_smem_buffer",
        lambda c: c.pipeline in ("compv3", "compv4") and not c.double_smem_buffer,
    ),
    (
        "(vec_a == 8 or vec_b == 8) and tile_k // warp_tile_k >= 2",
        lambda c: (c.vec_a == 8 or c.vec_b == 8) and c.tile_k // c.warp_tile_k >= 2,
    ),
    ("16 <= tile_m < tile_n", lambda c: 16 <= c.tile_m < c.tile_n),
    (
        "scheduler != 'interwave' and specialization not in [filter3x3]",
        lambda c: c.scheduler != "interwave" and c.specialization != "filter3x3",
    ),
    (
        "tile_m % (wave_m * warp_tile_m) == 0 and -tile_k < -16",
        lambda c: c.tile_m % (c.wave_m * c.warp_tile_m) == 0 and -c.tile_k < -16,
    ),
    ("two_stage == true or num_groups_to_merge > 1", lambda c: c.two_stage or c.num_groups_to_merge > 1),
]


@pytest.mark.parametrize("text,check", CASES)
def test_filter_equals_plain_python_filter(text: str, check) -> None:
    space = Space("gfx942", ["forward", "bwd_weight"], 2, ["fp16", "fp32"], rule_set="full", ck=None)
    gemm = [c for c in space if c.kind == "gemm"]
    expected = {c.name for c in gemm if check(c)}
    filtered = space.where(text)
    assert set(filtered.names()) == expected
    assert expected, "the case should keep something"
    some = next(c for c in gemm if not check(c))
    assert not filtered.contains(some)  # the solver's model holds the filter too
    assert filtered.contains(next(iter(filtered)))


def test_depthwise_configs_are_filtered_by_their_own_fields() -> None:
    space = Space("gfx950", "forward", 2, "fp16", rule_set="full", ck=None)
    assert {c.kind for c in space.where("filter == 5")} == {"depthwise"}
    assert {c.kind for c in space.where("tile_m >= 16")} == {"gemm"}


def test_a_rule_on_fields_a_kind_lacks_excludes_that_kind_in_every_backend() -> None:
    """One policy (:func:`~ckspace.constraints.language.rule.excludes_kind`): the listing's filter, a cell's
    model (which names the rule and says why) and the counted space of ``open`` exclude every config
    of a kind a rule reads missing fields of."""
    on_gemm = parse_where("tile_m >= 16")
    assert excludes_kind(on_gemm, DEPTHWISE_FIELDS) and not excludes_kind(on_gemm, GEMM_FIELD_NAMES)
    cell = Cell(Variant.FORWARD, 2, Dtype.FP16)
    row = depthwise_rows(cell)[0]
    assert satisfies_all([on_gemm], [row], DEPTHWISE_FIELDS) == [False]
    model = cell_model("gfx950", cell, None, depthwise=True, extra=[on_gemm])
    assert model.rules[on_gemm.name].text == "user filter: tile_m >= 16 (fields depthwise configs lack)"
    assert not model.feasible(dict(zip(DEPTHWISE_FIELDS, row, strict=True)))
    assert model.feasible(
        dict(zip(DEPTHWISE_FIELDS, row, strict=True)), [r for r in model.literals if r != on_gemm.name]
    )
    assert Space("gfx950", "forward", 2, "fp16", rule_set="open", ck=None).where("filter == 5").count() == 0


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(gemm_configs())
def test_filter_rule_agrees_across_backends(config) -> None:
    rules = [parse_where(text) for text, _ in CASES]
    model = CellModel(GEMM_FIELD_NAMES, GEMM_BOUNDS, rules, None)
    row = config.row()
    masks = rule_masks(rules, columns([row], GEMM_FIELD_NAMES), 1)
    for rule in rules:
        assert model.feasible(dict(zip(GEMM_FIELD_NAMES, row, strict=True)), [rule.name]) == bool(masks[rule.name][0])


HOSTILE = [
    "__import__('os').system('touch {marker}')",
    "tile_m.__class__",
    "().__class__.__bases__[0]",
    "open('{marker}', 'w')",
    "lambda: 1",
    "[x for x in (1,)]",
    "(y := 3) > 1",
    "f'{{tile_m}}' == 'x'",
    "tile_m > 1e3",
    "tile_m > " + "9" * 400,
    "tile_m ** 99 > 1",
    "(" * 500 + "tile_m" + ")" * 500 + " > 1",
    "not " * 200 + "two_stage",
    "tile_m > 1 " + "and tile_m > 1 " * 100,
    "-" * 300 + "tile_m > 1",
    "tile_m * tile_n * tile_k * vec_a * vec_b * vec_c * tile_m * tile_n > 1",
    "tile_m[0] > 1",
    "tile_m if tile_n else tile_k",
    "pipeline + 1 > 2",
    "pipeline < compv4",
    "tile_m == compv4",
    "tile_m in tile_n",
    "",
    "tile_m >",
    "x" * 2000,
    "tile_m / 2 > 1",
    "tile_m > 1; import os",
]


@pytest.mark.parametrize("template", HOSTILE)
def test_hostile_filters_are_one_line_errors_and_never_run(tmp_path: Path, template: str) -> None:
    marker = tmp_path / "pwned"
    text = template.replace("{marker}", str(marker))
    with pytest.raises(WhereError) as info:
        parse_where(text)
    message = str(info.value)
    assert "\n" not in message and message.startswith("filter ") and len(message) < 700
    assert not marker.exists()


def test_cli_where_error_points_at_the_spot() -> None:
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "ckspace",
            "enumerate",
            "--arch",
            "gfx950",
            "--variant",
            "forward",
            "--count",
            "--where",
            "tile_m > 1 and tile_q < 3",
        ],
        capture_output=True,
        text=True,
        env=dict(os.environ),
    )
    assert out.returncode == 2 and out.stdout == ""
    (line,) = out.stderr.splitlines()
    assert "tile_q" in line and "column 16" in line


def test_where_errors_are_ckspace_errors() -> None:
    with pytest.raises(CkspaceError):
        Space("gfx950", "forward", 2, "fp16").where("tile_m >")
