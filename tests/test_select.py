"""Kernel selection: benchmark-name mapping, the shipped model, save/load, feasibility, CLI."""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import reference_problem as ref
import reference_rules as rr
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from strategies import boundary_problems
from test_problem import problems

from ckspace.cli import main
from ckspace.core.config import GemmConfig
from ckspace.core.errors import CkspaceError, KernelNameError, NoKernelError
from ckspace.select.selector import Selector, SelectorError
from ckspace.select.store import FEATURES_FILE, RANKER_FILE, load_model, shipped_model_dir
from ckspace.space.benchmark_names import config_from_any_name, config_from_benchmark_name
from ckspace.space.space import Space
from ckspace.workloads.datasets import DATASETS
from ckspace.workloads.problem import ConvProblem

DATA = DATASETS["mi355x-forward-bf16"].path
PROBLEM = "N=4,C=64,K=128,Hi=56,Wi=56,Y=3,X=3,stride=1,pad=1"


@pytest.fixture(scope="module")
def selector() -> Selector:
    """Rules only: the measured registry and the restated fallbacks below are rule-space facts (a
    family may fall back to any variant the validity rules allow, whatever CK is installed)."""
    return Selector.load("gfx950", "forward", "bf16", ck=None)


@pytest.fixture(scope="module")
def full_registry() -> list[GemmConfig]:
    return [c for c in Space("gfx950", "forward", 2, "bf16", "full", ck=None) if c.kind == "gemm"]


def own_names(names) -> list[str]:
    """The configs' own ckspace names of kernel names (selection prints those, never benchmark names)."""
    return [config_from_any_name(n, "gfx950").name for n in names]


def test_benchmark_names_map_through_the_default_tables() -> None:
    c = config_from_benchmark_name("grouped_conv_forward_bf16_2d_128x64x128_compv4", "gfx950")
    assert (c.wave_m, c.wave_n, c.wave_k, c.warp_tile_m, c.warp_tile_n, c.warp_tile_k) == (8, 2, 1, 16, 16, 32)
    assert c.double_smem_buffer and (c.vec_a, c.vec_b, c.vec_c) == (4, 8, 8)
    assert c.name == "grouped_conv_fwd_bf16_nhwgc_2d_compv4_cshuffle_intrawave_128x64x128_8x2x1_16x16x32_dsb"
    with pytest.raises(KernelNameError, match="not in the default rule set's tile table"):
        config_from_benchmark_name("grouped_conv_forward_bf16_2d_48x64x64_compv3", "gfx950")


def test_shipped_model_loads_verified_and_selects(selector: Selector) -> None:
    assert selector.source == "model" and len(selector.default_candidates) == 30
    card = selector.card
    assert card.problems == 231 and card.rows == 6930 and card.objective in ("lambdarank", "regression")
    result = selector.select(PROBLEM, selector.default_candidates, k=5)
    assert result.pick == result.top[0].name and len(result.top) == 5 and result.feasible == 30
    assert result.pick in own_names(selector.default_candidates)
    assert all(r.predicted_tflops > 0 for r in result.top)
    assert selector.select(ConvProblem.parse(PROBLEM), list(selector.default_candidates), k=5) == result


def test_direct_prediction_equals_lightgbm_predict(selector: Selector) -> None:
    from ckspace.features.matrix import feature_matrix

    prepared = selector.prepare(selector.default_candidates)
    matrix = feature_matrix(ConvProblem.parse(PROBLEM), selector.variant, selector.dtype, prepared.table, selector.hw)
    assert selector.engine == "compiled"
    assert np.array_equal(selector.scores(matrix), selector.ranker.predict(matrix))
    assert np.array_equal(selector.log_tflops(matrix), selector.regressor.predict(matrix))
    lightgbm = Selector.load("gfx950", "forward", "bf16", engine="lightgbm")
    assert lightgbm.engine == "lightgbm" and np.array_equal(lightgbm.scores(matrix), selector.ranker.predict(matrix))


def test_damaged_or_mismatched_models_are_refused(tmp_path: Path) -> None:
    copy = tmp_path / "m"
    shutil.copytree(shipped_model_dir("gfx950", "forward", "bf16"), copy)
    load_model(copy)
    (copy / RANKER_FILE).write_text((copy / RANKER_FILE).read_text() + "\n")
    with pytest.raises(CkspaceError, match="does not match the sha256"):
        load_model(copy)
    shutil.copytree(shipped_model_dir("gfx950", "forward", "bf16"), copy, dirs_exist_ok=True)
    card = json.loads((copy / "card.json").read_text())
    spec = json.loads((copy / FEATURES_FILE).read_text())
    spec["version"] += 1
    (copy / FEATURES_FILE).write_text(json.dumps(spec))
    import hashlib

    card["files"][FEATURES_FILE] = hashlib.sha256((copy / FEATURES_FILE).read_bytes()).hexdigest()
    (copy / "card.json").write_text(json.dumps(card))
    with pytest.raises(CkspaceError, match="feature spec version"):
        load_model(copy)
    with pytest.raises(CkspaceError, match="is for gfx950 forward bf16"):
        Selector.load("gfx950", "bwd_data", "bf16", model_dir=shipped_model_dir("gfx950", "forward", "bf16"))


def test_fallback_without_a_model_is_analytical(full_registry) -> None:
    gfx942 = [c for c in Space("gfx942", "forward", 2, "bf16", "full") if c.kind == "gemm"]
    fallback = Selector.load("gfx942", "forward", "bf16")
    result = fallback.select(PROBLEM, gfx942, k=3)
    assert fallback.source == result.source == "analytical" and len(result.top) == 3


def validity_violations(cfg: dict) -> set[str]:
    return rr.violations_is_valid_for_arch(cfg, "gfx950") | rr.violations_is_config_valid(cfg, "gfx950")


def expected_runs(cfg: dict, p: dict) -> dict | None:
    """The kernel a family runs ``p`` with, restated: itself if CK accepts the problem, else the
    widest narrower-vector variant (largest product of widths, then vec_a, vec_b, vec_c) that CK
    accepts and that breaks no validity rule the family's kernel keeps; None if there is none."""
    if ref.supports(cfg, p):
        return cfg
    widths = [1, 2, 4, 8, 16]
    own = (cfg["vec_a"], cfg["vec_b"], cfg["vec_c"])
    triples = [
        (a, b, c)
        for a in widths
        for b in widths
        for c in widths
        if a <= own[0] and b <= own[1] and c <= own[2] and (a, b, c) != own
    ]
    triples.sort(key=lambda t: (t[0] * t[1] * t[2], t), reverse=True)
    allowed = validity_violations(cfg)
    for a, b, c in triples:
        variant = {**cfg, "vec_a": a, "vec_b": b, "vec_c": c}
        if ref.supports(variant, p) and validity_violations(variant) <= allowed:
            return variant
    return None


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture]
)
@given(problem=st.one_of(problems(), boundary_problems(2)))
@pytest.mark.slow
def test_selection_runs_each_family_itself_or_its_widest_runnable_variant(
    selector: Selector, full_registry, problem: ConvProblem
) -> None:
    p = problem.model_dump()
    for registry in (list(selector.default_candidates), full_registry):
        configs = [c if isinstance(c, GemmConfig) else config_from_benchmark_name(c, "gfx950") for c in registry]
        names = [c.name for c in configs]  # selection names every candidate by its config's own name
        runs = {name: expected_runs(c.model_dump(mode="json"), p) for name, c in zip(names, configs, strict=True)}
        runnable = {name: cfg for name, cfg in runs.items() if cfg is not None}
        if not runnable:
            with pytest.raises(NoKernelError, match="can run") as caught:
                selector.select(problem, registry)
            assert set(caught.value.blocking) == set(names)
            continue
        own = {name: c.model_dump(mode="json") for name, c in zip(names, configs, strict=True)}
        direct = [own[name] for name in runnable if ref.supports(own[name], p)]
        # a family whose variant is itself a directly runnable candidate is ranked once, as that candidate
        ranked = {name for name, cfg in runnable.items() if ref.supports(own[name], p) or cfg not in direct}
        result = selector.select(problem, registry, k=len(registry))
        assert result.feasible == len(ranked) and len(result.top) == len(ranked)
        for ranked in result.top:
            family = ranked.family or ranked.name
            want = runnable[family]
            got = (
                GemmConfig.from_name(ranked.name, "gfx950", tagged=False)
                if ranked.family
                else configs[names.index(family)]
            )
            assert (got.vec_a, got.vec_b, got.vec_c) == (want["vec_a"], want["vec_b"], want["vec_c"])
            assert (ranked.family is None) == ref.supports(configs[names.index(family)].model_dump(mode="json"), p)


def _vectors(config: GemmConfig, a: int, b: int, c: int) -> GemmConfig:
    return config.model_copy(update={"vec_a": a, "vec_b": b, "vec_c": c})


FOUR_CHANNELS = ConvProblem.parse("N=1,C=4,K=64,Hi=8,Wi=8,Y=3,X=3,pad=1")
"""Cg = 4: a forward kernel whose vec_b is 8 fails only on vector alignment; vec_b = 4 runs it."""


def test_runnable_keeps_a_fallback_that_is_no_candidate_beside_direct_candidates(selector: Selector) -> None:
    """Candidates 0 and 1 run the problem as they are; candidate 2 runs it through its vec_b = 4
    variant, which no candidate is: that variant is kept (only a variant that is itself a direct
    candidate is ranked as that candidate instead)."""
    base = [
        config_from_benchmark_name(f"grouped_conv_forward_bf16_2d_{t}", "gfx950")
        for t in ("128x128x64_compv3", "128x128x64_compv4", "128x64x128_compv4")
    ]
    candidates = [_vectors(base[0], 4, 4, 8), _vectors(base[1], 4, 4, 8), _vectors(base[2], 4, 8, 8)]
    prepared = selector.prepare(candidates)
    direct, fallbacks = selector.runnable(FOUR_CHANNELS, prepared)
    assert direct.tolist() == [0, 1] and fallbacks[:, 0].tolist() == [2]
    names = prepared.variants()[3]
    assert names[fallbacks[0, 1]] == _vectors(base[2], 4, 4, 8).name
    assert selector.feasible(FOUR_CHANNELS, prepared).tolist() == [True, True, False]


def test_a_pool_of_one_variant_still_serves_its_family(selector: Selector) -> None:
    """A built library holding only the narrow variant of a candidate: the family's one allowed
    variant is its fallback."""
    wide = config_from_benchmark_name("grouped_conv_forward_bf16_2d_128x128x64_compv3", "gfx950")
    narrow = _vectors(wide, 4, 4, 8)
    prepared = selector.prepare([_vectors(wide, 4, 8, 8)], pool=[narrow])
    direct, fallbacks = selector.runnable(FOUR_CHANNELS, prepared)
    assert direct.size == 0 and fallbacks.tolist() == [[0, 0]] and prepared.variants()[3] == [narrow.name]
    for pool in (
        [_vectors(wide, 4, 8, 8)],  # the family's only allowed member is the failing kernel itself
        [config_from_benchmark_name("grouped_conv_forward_bf16_2d_16x64x64_compv3", "gfx950")],
    ):  # none
        direct, fallbacks = selector.runnable(FOUR_CHANNELS, selector.prepare([_vectors(wide, 4, 8, 8)], pool=pool))
        assert direct.size == 0 and fallbacks.shape == (0, 2)


def test_runnable_answers_pairs_even_when_no_fallback_is_needed(selector: Selector) -> None:
    prepared = selector.prepare(list(selector.default_candidates))
    direct, fallbacks = selector.runnable(ConvProblem.parse(PROBLEM), prepared)
    assert direct.size == len(selector.default_candidates) and fallbacks.shape == (0, 2)


@pytest.mark.parametrize(
    "update,kind",
    [
        ({"variant": "bwd_data"}, "bwd_data bf16"),
        ({"dtype": "fp16"}, "forward fp16"),
        ({"arch": "gfx942"}, "gfx942 forward bf16"),
    ],
)
def test_candidates_of_another_cell_are_refused(selector: Selector, update: dict, kind: str) -> None:
    """A candidate differing from the selector's cell in any one of variant, dtype and arch."""
    config = config_from_benchmark_name("grouped_conv_forward_bf16_2d_128x128x64_compv3", "gfx950")
    other = GemmConfig.model_validate({**config.model_dump(), **update})
    with pytest.raises(SelectorError, match=f"is a {'gfx950 ' if 'arch' not in update else ''}{kind} kernel"):
        selector.prepare([config, other])


DEPTHWISE = "grouped_conv_fwd_depthwise_bf16_ngchw_2d_8x8_f3_s1x1_p1x1_nb8_sub2x2_vec2_2"


def test_depthwise_candidates_are_skipped_wherever_they_stand(
    selector: Selector, caplog: pytest.LogCaptureFixture
) -> None:
    """`enumerate --list` prints depthwise kernels among the GEMM ones: a depthwise name in the
    middle of a candidate list is skipped (and said so), the GEMM kernels after it are kept."""
    gemm = ["grouped_conv_forward_bf16_2d_128x128x64_compv3", "grouped_conv_forward_bf16_2d_16x64x64_compv3"]
    with caplog.at_level("INFO", logger="ckspace.select.selector"):
        prepared = selector.prepare([gemm[0], DEPTHWISE, gemm[1]])
    assert prepared.names == tuple(own_names(gemm)) and "1 depthwise candidates skipped" in caplog.text
    caplog.clear()
    with caplog.at_level("INFO", logger="ckspace.select.selector"):
        selector.prepare(gemm)
    assert "depthwise" not in caplog.text
    with pytest.raises(SelectorError, match="the 1 candidates are all depthwise kernels"):
        selector.prepare([DEPTHWISE])


def test_select_cli_json(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    names = tmp_path / "registry.txt"
    names.write_text(
        "# two kernels\ngrouped_conv_forward_bf16_2d_16x64x64_compv3\n"
        "grouped_conv_fwd_bf16_nhwgc_2d_compv3_cshuffle_intrawave_128x128x64_4x4x1_32x32x16\n"
    )
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
                PROBLEM,
                "--candidates",
                str(names),
                "--top",
                "2",
                "--format",
                "json",
            ]
        )
        == 0
    )
    answer = json.loads(capsys.readouterr().out)
    registry = own_names(names.read_text().splitlines()[1:])
    assert answer["pick"] in registry and len(answer["top"]) == 2
    assert set(answer["top"][0]) == {"name", "family", "score", "predicted_tflops", "source", "config"}
    assert answer["top"][0]["source"].startswith("model") and answer["pick_source"] == answer["top"][0]["source"]
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
                "N=1,C=52,K=64,Hi=8,Wi=8,Y=1,X=1",
                "--candidates",
                str(names),
                "--format",
                "json",
            ]
        )
        == 0
    )
    fallback = json.loads(capsys.readouterr().out)
    assert fallback["family"] in registry and "_vec4_4_8" in fallback["pick"]
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
                "N=1,C=52,K=64,Hi=8,Wi=8,Y=1,X=1,k_batch=2",
                "--candidates",
                str(names),
            ]
        )
        == 1
    )
    assert "none of the 2 candidates" in capsys.readouterr().err


@pytest.mark.slow
def test_train_save_load_predicts_identically(tmp_path: Path) -> None:
    from ckspace.features.hardware import hardware_facts
    from ckspace.features.matrix import FEATURE_VERSION, ConfigTable, feature_matrix
    from ckspace.select.store import ModelCard, save_model
    from ckspace.select.support import training_domain
    from ckspace.training.boosters import design, fit
    from ckspace.training.dataset import load_measurements

    data = load_measurements([DATA], "gfx950", "forward", "bf16")
    small = data.subset(np.arange(0, 231, 6))
    rows = design(small)
    ranker, regressor = fit(rows, "lambdarank", num_rounds=20), fit(rows, "regression", num_rounds=20)
    card = ModelCard(
        arch="gfx950",
        variant="forward",
        dtype="bf16",
        objective="lambdarank",
        objective_choice="test",
        feature_version=FEATURE_VERSION,
        data={},
        rows=len(rows.log_tflops),
        problems=len(small.problems),
        distinct_shapes=len(set(small.groups)),
        cleaning="",
        kernels=list(small.kernel_names),
        cross_validation={},
        training_command="",
        library_versions={},
        files={},
        domain=training_domain(small.configs, small.problems, ranker, rows.features, rows.log_tflops, rows.problem),
    )
    save_model(tmp_path / "model", ranker, regressor, card)
    loaded_ranker, loaded_regressor, _ = load_model(tmp_path / "model")
    table = ConfigTable.build(small.configs)
    matrix = feature_matrix(data.problems[1], data.variant, data.dtype, table, hardware_facts("gfx950"))
    assert np.array_equal(ranker.predict(matrix), loaded_ranker.predict(matrix))
    assert np.array_equal(regressor.predict(matrix), loaded_regressor.predict(matrix))
    selector = Selector.load("gfx950", "forward", "bf16", model_dir=tmp_path / "model")
    assert selector.select(PROBLEM, small.kernel_names).pick in own_names(small.kernel_names)


@pytest.mark.slow
def test_evaluate_cli_json_and_plot(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    plot = tmp_path / "cv.png"
    assert (
        main(
            [
                "evaluate",
                "--data",
                "mi355x-forward-bf16",
                "--folds",
                "3",
                "--seed",
                "1",
                "--format",
                "json",
                "--plot",
                str(plot),
            ]
        )
        == 0
    )
    result = json.loads(capsys.readouterr().out)
    assert {"mean", "median", "p10", "min", "top1", "top5"} <= set(result)
    assert result["selectors"]["single_best_kernel"]["mean"] < result["mean"]
    assert result["cleaning"]["rows_kept"] == 6930 and plot.stat().st_size > 10_000


def _shapes(path: Path) -> list[ConvProblem]:
    keys = (
        "N",
        "G",
        "C",
        "K",
        "Di",
        "Hi",
        "Wi",
        "Z",
        "Y",
        "X",
        "stride_d",
        "stride_h",
        "stride_w",
        "pad_d",
        "pad_h",
        "pad_w",
        "dil_d",
        "dil_h",
        "dil_w",
    )
    with path.open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    out = []
    for row in rows:
        values = {k: int(row[k]) for k in keys if row.get(k) not in (None, "")}
        ndim = 3 if values.get("Di", 1) > 1 or values.get("Z", 1) > 1 else 2
        if ndim == 2:
            values = {k: v for k, v in values.items() if not k.endswith("_d") and k not in ("Di", "Z")}
        try:
            out.append(ConvProblem.from_values({**values, "ndim": ndim}))
        except CkspaceError:  # the list holds a few shapes whose output is empty
            continue
    return out


@pytest.mark.slow
def test_listed_numbers_agree_with_the_order(selector: Selector, full_registry) -> None:
    """On the real forward problems, no listed kernel shows a higher predicted TFLOPS than the one
    above it, and the scores fall down the list."""
    checked = 0
    for problem in _shapes(DATASETS["miopen-forward-300"].path):
        for registry in (list(selector.default_candidates), full_registry):
            try:
                result = selector.select(problem, registry, k=10)
            except NoKernelError:
                continue
            tflops = [r.predicted_tflops for r in result.top]
            scores = [r.score for r in result.top]
            assert tflops == sorted(tflops, reverse=True) and scores == sorted(scores, reverse=True)
            checked += 1
    assert checked >= 300


def test_every_real_problem_is_answered_by_the_measured_kernels(selector: Selector) -> None:
    """All 230 distinct shapes of the measurements get a kernel from the 30 measured families (63
    of them only through a narrower-vector variant), and the pick's family was measured on it."""
    keys = ("N", "C", "K", "G", "Hi", "Wi", "Y", "X", "stride_h", "stride_w", "pad_h", "pad_w")
    with DATA.open(newline="") as handle:
        measured: dict[tuple, dict[str, float]] = {}
        for row in csv.DictReader(handle):
            measured.setdefault(tuple(int(row[k]) for k in keys), {})[row["kernel"]] = float(row["tflops"])
    prepared = selector.prepare(selector.default_candidates)
    through_fallback = 0
    for shape, kernels in measured.items():
        problem = ConvProblem.from_values(dict(zip(keys, shape, strict=True)))
        result = selector.select(problem, selector.default_candidates)
        assert (result.family or result.pick) in own_names(kernels)
        through_fallback += not selector.feasible(problem, prepared).any()
    assert len(measured) == 230 and through_fallback == 63
