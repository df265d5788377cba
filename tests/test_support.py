"""A model's support: its training domain, extrapolated kernels and their siblings, honest output.

The statements checked here are :mod:`ckspace.select.support`'s: a kernel is outside the domain
exactly when a categorical field holds a value no training kernel had or a size lies beyond the
trained range; its sibling moves each such field to the nearest seen value; its score is the
sibling's plus the analytical log2 ratio in the model's score units; and every ranked row, the
select and plan reports, and ``info`` say which rows are extrapolated and why.
"""

from __future__ import annotations

import json
import math
from types import SimpleNamespace

import numpy as np
import pytest

from ckspace.cli import main
from ckspace.core.config import GemmConfig
from ckspace.core.vocab import Dtype, Pipeline, Scheduler, Specialization, Variant
from ckspace.features.matrix import ANALYTICAL_FEATURE, FEATURE_NAMES, ConfigTable
from ckspace.select.selector import Selector
from ckspace.select.support import CATEGORICAL_FIELDS, NUMERIC_FIELDS, ModelDomain, score_scale, training_domain
from ckspace.workloads.problem import ConvProblem

ANALYTICAL = FEATURE_NAMES.index(ANALYTICAL_FEATURE)
BASE = {
    "arch": "gfx950",
    "variant": Variant.FORWARD,
    "ndim": 2,
    "dtype": Dtype.BF16,
    "tile_m": 64,
    "tile_n": 64,
    "tile_k": 64,
    "wave_m": 2,
    "wave_n": 2,
    "wave_k": 1,
    "warp_tile_m": 16,
    "warp_tile_n": 16,
    "warp_tile_k": 32,
    "vec_a": 4,
    "vec_b": 8,
    "vec_c": 8,
    "pipeline": Pipeline.COMPV3,
    "scheduler": Scheduler.INTRAWAVE,
}


def config(**changes) -> GemmConfig:
    return GemmConfig(**{**BASE, **changes})


def domain() -> ModelDomain:
    seen = [
        config(),
        config(tile_m=128, wave_m=4, pipeline=Pipeline.COMPV5),
        config(tile_n=128, warp_tile_m=32, warp_tile_n=32, warp_tile_k=16, pipeline=Pipeline.COMPV5),
    ]
    problems = [
        ConvProblem.parse("N=1,C=64,K=64,Hi=14,Wi=14,Y=3,X=3"),
        ConvProblem.parse("N=8,C=256,K=512,Hi=56,Wi=56,Y=1,X=1"),
    ]
    return ModelDomain.of(seen, problems, 2.5)


def test_the_domain_is_what_was_seen() -> None:
    d = domain()
    assert d.categorical["pipeline"] == ["compv3", "compv5"] and d.common["pipeline"] == "compv5"
    assert d.categorical["vec_a"] == [4] and d.numeric["tile_m"] == (64, 128) and d.numeric["tile_n"] == (64, 128)
    assert d.problems["N"] == (1, 8) and d.problems["Cg"] == (64, 256)
    assert "tagged" not in CATEGORICAL_FIELDS and "layout" not in CATEGORICAL_FIELDS
    assert set(CATEGORICAL_FIELDS) & set(NUMERIC_FIELDS) == set()
    assert d.outside(config()) is None and d.outside(config(tile_m=96)) is None  # inside the range


@pytest.mark.parametrize(
    ("changes", "reason", "sibling"),
    [
        ({"vec_a": 1}, "vec_a 1 unseen (trained on 4)", {"vec_a": 4}),
        ({"vec_a": 8}, "vec_a 8 unseen (trained on 4)", {"vec_a": 4}),
        ({"pipeline": Pipeline.MEM}, "pipeline mem unseen (trained on compv3/compv5)", {"pipeline": Pipeline.COMPV5}),
        (
            {"scheduler": Scheduler.INTERWAVE},
            "scheduler interwave unseen (trained on intrawave)",
            {"scheduler": Scheduler.INTRAWAVE},
        ),
        (
            {"specialization": Specialization.FILTER1X1_PAD0},
            "specialization filter1x1_pad0 unseen (trained on default)",
            {"specialization": Specialization.DEFAULT},
        ),
        ({"tile_m": 256, "wave_m": 4}, "tile_m 256 outside the trained 64..128", {"tile_m": 128}),
        ({"tile_k": 32}, "tile_k 32 outside the trained 64..64", {"tile_k": 64}),
        ({"warp_tile_k": 64}, "warp_tile_k 64 unseen (trained on 16/32)", {"warp_tile_k": 32}),
        ({"warp_tile_k": 8}, "warp_tile_k 8 unseen (trained on 16/32)", {"warp_tile_k": 16}),
    ],
)
def test_outside_the_domain_and_the_sibling(changes, reason, sibling) -> None:
    d = domain()
    kernel = config(**changes)
    assert d.outside(kernel) == reason
    near = d.sibling(kernel)
    assert d.outside(near) is None
    assert near == kernel.model_copy(update=sibling)


def test_a_tie_between_two_seen_values_takes_the_larger() -> None:
    d = domain().model_copy(update={"categorical": {**domain().categorical, "vec_b": [4, 16]}})
    assert d.sibling(config(vec_b=8)).vec_b == 16


def test_several_fields_outside_are_all_named_and_all_moved() -> None:
    d = domain()
    kernel = config(vec_a=1, vec_c=4, pipeline=Pipeline.COMPV6)
    assert d.outside(kernel) == (
        "vec_a 1 unseen (trained on 4); vec_c 4 unseen (trained on 8); "
        "pipeline compv6 unseen (trained on compv3/compv5)"
    )
    assert d.sibling(kernel) == config(pipeline=Pipeline.COMPV5)


def test_a_problem_beyond_the_trained_sizes_is_named() -> None:
    d = domain()
    assert (
        d.problem_outside(SimpleNamespace(N=4, G=1, Cg=64, Kg=64, input_volume=196, filter_volume=9, output_volume=144))
        is None
    )
    assert (
        d.problem_outside(
            SimpleNamespace(N=32, G=2, Cg=64, Kg=64, input_volume=196, filter_volume=9, output_volume=144)
        )
        == "N 32 outside the trained 1..8; G 2 outside the trained 1..1"
    )


def test_score_scale_is_the_median_slope_within_problems() -> None:
    log2 = np.array([1.0, 2.0, 3.0, 1.0, 2.0, 3.0, 5.0, 6.0, 7.0])
    scores = np.array([0.0, 2.5, 5.0, 10.0, 13.0, 16.0, 1.0, 5.0, 9.0])  # slopes 2.5, 3, 4
    groups = np.array([0, 0, 0, 1, 1, 1, 2, 2, 2])
    assert score_scale(scores, log2, groups) == pytest.approx(3.0)
    assert score_scale(scores[:3], log2[:3], groups[:3]) == pytest.approx(2.5)
    assert score_scale(scores + 7.0, log2, groups) == pytest.approx(3.0)  # an offset is no slope
    assert score_scale(-scores, log2, groups) == 1e-3  # never below a small positive scale
    assert score_scale(scores[:2], log2[:2], groups[:2]) == 1e-3  # too few kernels to measure
    # a problem of two kernels says nothing (here it would say 100); three are enough, wherever
    # the small one comes in the order
    small = (np.array([0.0, 100.0]), np.array([1.0, 2.0]), np.array([-1, -1]))
    both = [np.concatenate([a, b]) for a, b in zip(small, (scores[:3], log2[:3], groups[:3]), strict=True)]
    assert score_scale(*both) == pytest.approx(2.5)
    flat = (np.array([1.0, 2.0, 3.0]), np.array([4.0, 4.0, 4.0]), np.array([7, 7, 7]))  # one TFLOPS: no slope
    assert score_scale(
        *[np.concatenate([a, b]) for a, b in zip(flat, (scores[:3], log2[:3], groups[:3]), strict=True)]
    ) == pytest.approx(2.5)


def test_the_training_domain_measures_the_scale_in_log2_tflops() -> None:
    """The measured TFLOPS come as natural logs; the scale is per doubling."""

    class Ranker:
        def predict(self, features: np.ndarray, num_threads: int) -> np.ndarray:
            return 3.0 * features[:, 0]  # three score units per doubling

    log2 = np.array([1.0, 2.0, 4.0, 0.5, 1.5, 3.0])
    rows = np.column_stack([log2, np.zeros(6)])
    seen = [config(), config(tile_m=128, wave_m=4)]
    problems = [ConvProblem.parse("N=1,C=64,K=64,Hi=14,Wi=14,Y=3,X=3")]
    d = training_domain(seen, problems, Ranker(), rows, log2 * math.log(2), np.array([0, 0, 0, 1, 1, 1]))
    assert d.score_per_log2_tflops == pytest.approx(3.0)


def test_the_domain_is_frozen_and_keeps_flags_as_flags() -> None:
    d = domain()
    assert d.categorical["pad_m"] == [True] and isinstance(d.categorical["pad_m"][0], bool)
    assert '"pad_m":[true]' in d.model_dump_json() and '"vec_a":[4]' in d.model_dump_json()
    with pytest.raises(ValueError):
        d.score_per_log2_tflops = 1.0  # type: ignore[misc]


def test_the_trained_sizes_include_their_ends() -> None:
    d = domain()
    ends = {name: low for name, (low, high) in d.problems.items()}
    assert d.problem_outside(SimpleNamespace(**ends)) is None
    assert d.problem_outside(SimpleNamespace(**{name: high for name, (low, high) in d.problems.items()})) is None
    assert d.outside(config(tile_m=128, wave_m=4)) is None and d.outside(config(tile_m=64)) is None


@pytest.fixture(scope="module")
def shipped() -> Selector:
    return Selector.load("gfx950", "forward", "bf16", engine="lightgbm", ck=None)


def test_an_extrapolated_score_is_the_siblings_moved_by_the_analytical_ratio(shipped: Selector) -> None:
    """Computed here from the parts: the model's score of the sibling, the analytical model's log2
    TFLOPS of both, the card's scale; and the TFLOPS estimate likewise from the regressor."""
    inside = [GemmConfig.model_validate(c) for c in _shipped_configs(shipped)]
    kernel = inside[0].model_copy(update={"vec_a": 2, "pipeline": Pipeline.COMPV6})
    problem = ConvProblem.parse("N=4,C=128,K=128,Hi=28,Wi=28,Y=3,X=3,pad=1")
    assert shipped.domain is not None and shipped.outside(kernel) is not None
    sibling = shipped.domain.sibling(kernel)
    rows = shipped.feature_matrix(problem, ConfigTable.build([kernel, sibling]))
    expected = shipped.scores(rows[1:])[0] + shipped.domain.score_per_log2_tflops * (
        rows[0, ANALYTICAL] - rows[1, ANALYTICAL]
    )
    tflops = math.exp(shipped.log_tflops(rows[1:])[0] + math.log(2.0) * (rows[0, ANALYTICAL] - rows[1, ANALYTICAL]))
    selection = shipped.select(problem, [kernel, inside[1]], k=2)
    row = next(r for r in selection.top if r.config == kernel)
    assert row.score == expected and row.source.startswith("model, extrapolated: vec_a 2 unseen")
    assert row.predicted_tflops == pytest.approx(tflops, rel=1e-12) or selection.top[0].config == inside[1]
    other = next(r for r in selection.top if r.config == inside[1])
    assert other.source == "model"


def _shipped_configs(selector: Selector) -> list[dict]:
    from ckspace.space.benchmark_names import config_from_any_name

    return [config_from_any_name(n, "gfx950").model_dump() for n in selector.default_candidates]


@pytest.mark.slow
def test_select_and_plan_say_which_rows_are_extrapolated(tmp_path, capsys) -> None:
    problem = "N=4,C=128,K=128,Hi=28,Wi=28,Y=3,X=3,pad=1"
    assert (
        main(
            [
                "select",
                "--arch",
                "gfx950",
                "--variant",
                "forward",
                "--dtype",
                "bf16",
                "--problem",
                problem,
                "--rule-set",
                "full",
                "--top",
                "3",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "TFLOPS are estimates" in out and "[model, extrapolated]" in out and "      extrapolated: " in out
    assert (
        main(
            [
                "select",
                "--arch",
                "gfx942",
                "--variant",
                "forward",
                "--dtype",
                "bf16",
                "--problem",
                problem,
                "--rule-set",
                "full",
                "--top",
                "2",
                "--format",
                "json",
            ]
        )
        == 0
    )
    captured = capsys.readouterr()
    answer = json.loads(captured.out)
    assert answer["source"] == "analytical" and {r["source"] for r in answer["top"]} == {"analytical"}
    assert captured.err.count("no model for gfx942 forward bf16") == 1  # one warning, not two
    problems = tmp_path / "problems.csv"
    problems.write_text(
        "N,C,K,G,Hi,Wi,Y,X,stride_h,stride_w,pad_h,pad_w\n4,128,128,1,28,28,3,3,1,1,1,1\n"
        "1,64,256,1,56,56,1,1,1,1,0,0\n8,3,64,1,224,224,7,7,2,2,3,3\n"
    )
    assert (
        main(
            [
                "plan",
                "--arch",
                "gfx950",
                "--variant",
                "forward",
                "--dtype",
                "bf16",
                "--rule-set",
                "full",
                "--budget",
                "2",
                "--problems",
                str(problems),
                "--format",
                "json",
            ]
        )
        == 0
    )
    report = json.loads(capsys.readouterr().out)
    assert set(report["extrapolated"]) <= set(report["kernels"]) and report["extrapolated"]
    assert all(why for why in report["extrapolated"].values())
    assert (
        main(
            [
                "plan",
                "--arch",
                "gfx950",
                "--variant",
                "forward",
                "--dtype",
                "bf16",
                "--rule-set",
                "full",
                "--budget",
                "2",
                "--problems",
                str(problems),
            ]
        )
        == 0
    )
    assert f"{len(report['extrapolated'])} of the 2 chosen kernels are extrapolated" in capsys.readouterr().out


@pytest.mark.slow
def test_info_lists_the_shipped_models_with_their_domains(capsys) -> None:
    assert main(["info", "--format", "json"]) == 0
    models = json.loads(capsys.readouterr().out)["models"]
    model = models["gfx950 forward bf16"]
    assert model["kernels"] == 30 and model["domain"]["categorical"]["pipeline"] == ["compv3", "compv4", "compv5"]
    assert main(["info"]) == 0
    text = capsys.readouterr().out
    assert "gfx950 forward bf16: lambdarank on 231 problems x 30 kernels" in text
    assert "pipeline compv3/compv4/compv5" in text and "problems: N 1..8" in text
