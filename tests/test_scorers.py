"""The scorer interface (:mod:`ckspace.select.scorers`): each engine answers the four questions the
selector asks, the engines agree, ``engine`` picks the right one, and a scorer written here (a model
the package does not have) plugs into :class:`~ckspace.select.selector.Selector` with nothing else
changed: the selector's domain, extrapolation and TFLOPS rules apply to it as to the shipped ones."""

from __future__ import annotations

import math

import numpy as np
import pytest
from conftest import c_compiler

from ckspace.core.config import GemmConfig
from ckspace.core.vocab import Dtype, Engine, Pipeline, ScoreSource, Variant
from ckspace.features import performance
from ckspace.features.hardware import hardware_facts
from ckspace.features.matrix import ConfigTable, feature_matrix
from ckspace.select.scorers import (
    ANALYTICAL_COLUMN,
    AnalyticalScorer,
    CompiledScorer,
    FastPredictor,
    LightGBMScorer,
    Scorer,
    model_scorer,
)
from ckspace.select.selector import Selector, SelectorError
from ckspace.select.store import load_model, shipped_model_dir
from ckspace.space.benchmark_names import config_from_any_name
from ckspace.workloads.problem import ConvProblem

HW = hardware_facts("gfx950")
CELL = (Variant.FORWARD, Dtype.BF16, HW)
PROBLEM = ConvProblem.parse("N=4,C=64,K=128,Hi=56,Wi=56,Y=3,X=3,stride=1,pad=1")
DIRECTORY = shipped_model_dir("gfx950", "forward", "bf16")


@pytest.fixture(scope="module")
def model():
    return load_model(DIRECTORY)


@pytest.fixture(scope="module")
def table(model) -> ConfigTable:
    _, _, card = model
    return ConfigTable.build([config_from_any_name(name, "gfx950") for name in card.kernels])


def test_the_tree_engines_score_as_lightgbm_predicts(model, table) -> None:
    c_compiler()
    ranker, regressor, card = model
    python = feature_matrix(PROBLEM, *CELL[:2], table, HW)
    compiled = model_scorer("compiled", *CELL, DIRECTORY, card, ranker, regressor)
    lightgbm = model_scorer("lightgbm", *CELL, DIRECTORY, card, ranker, regressor)
    assert isinstance(compiled, CompiledScorer) and isinstance(lightgbm, LightGBMScorer)
    for scorer, engine in ((compiled, Engine.COMPILED), (lightgbm, Engine.LIGHTGBM)):
        matrix = scorer.feature_matrix(PROBLEM, table)
        assert scorer.engine is engine and scorer.source is ScoreSource.MODEL
        assert scorer.score_per_log2_tflops == card.domain.score_per_log2_tflops != 1.0
        assert np.array_equal(matrix, python)
        assert np.array_equal(scorer.scores(matrix), ranker.predict(matrix))
        assert np.array_equal(scorer.log_tflops(matrix), regressor.predict(matrix))


def _low_word_set(values: np.ndarray) -> np.ndarray:
    """Each value with the low 32 bits of its double all set: the neighbour a double's last
    rounding lands on (0.95 * 0.75 * 0.9375 is 0.66796875 less one ulp, low word 0xFFFFFFFF)."""
    return (values.astype(np.float64).view(np.uint64) | np.uint64(0xFFFFFFFF)).view(np.float64)


def test_the_compiled_trees_read_every_double_as_lightgbm_does(model, table) -> None:
    """TL2cgen's input entry is a union whose ``missing`` flag is the double's low word, so a value
    with that word all ones took the missing branch; a drawn problem once got 149 TFLOPS from the C
    and 164 from LightGBM on one kernel that way. Here every feature of the rows takes such a value
    on either side of the real rows', and the C must score them as LightGBM does."""
    c_compiler()
    ranker, regressor, card = model
    compiled = model_scorer("compiled", *CELL, DIRECTORY, card, ranker, regressor)
    rows = feature_matrix(PROBLEM, *CELL[:2], table, HW)
    for matrix in (_low_word_set(rows), _low_word_set(rows * 0.97), _low_word_set(rows * 1.03)):
        assert (matrix.view(np.uint64) & np.uint64(0xFFFFFFFF) == np.uint64(0xFFFFFFFF)).all()
        assert np.array_equal(compiled.scores(matrix), ranker.predict(matrix))
        assert np.array_equal(compiled.log_tflops(matrix), regressor.predict(matrix))


def test_the_analytical_scorer_scores_its_feature_and_has_no_regressor(table) -> None:
    scorer = AnalyticalScorer(*CELL)
    matrix = scorer.feature_matrix(PROBLEM, table)
    assert np.array_equal(matrix, feature_matrix(PROBLEM, *CELL[:2], table, HW))
    scores = scorer.scores(matrix)
    assert np.array_equal(scores, matrix[:, ANALYTICAL_COLUMN]) and len(set(scores.tolist())) > 1
    scores[0] += 1.0  # the scores are the selector's to change: not a view of the matrix
    assert scores[0] != matrix[0, ANALYTICAL_COLUMN]
    assert scorer.score_per_log2_tflops == 1.0 and scorer.log_tflops(matrix) is None
    assert (scorer.engine, scorer.source) == (Engine.ANALYTICAL, ScoreSource.ANALYTICAL)


def test_the_engine_is_chosen_as_load_says(model, monkeypatch: pytest.MonkeyPatch) -> None:
    c_compiler()
    ranker, regressor, card = model
    assert isinstance(model_scorer("auto", *CELL, DIRECTORY, card, ranker, regressor), CompiledScorer)
    monkeypatch.setenv("CC", "/nonexistent/cc")
    assert isinstance(model_scorer("auto", *CELL, DIRECTORY, card, ranker, regressor), LightGBMScorer)
    with pytest.raises(SelectorError, match=r"engine 'compiled' needs a C compiler \(\$CC"):
        model_scorer("compiled", *CELL, DIRECTORY, card, ranker, regressor)
    assert Selector.load("gfx950", "forward", "bf16").engine == "lightgbm"


@pytest.mark.slow  # compiles the trees into a temporary directory: seconds
def test_without_a_cache_to_keep_it_only_an_explicit_compiled_compiles(
    model, tmp_path, monkeypatch: pytest.MonkeyPatch
) -> None:
    c_compiler()
    ranker, regressor, card = model
    (tmp_path / "a_file").write_text("a file, not a directory\n")
    monkeypatch.setenv("CKSPACE_CACHE_DIR", str(tmp_path / "a_file" / "cache"))
    assert isinstance(model_scorer("auto", *CELL, DIRECTORY, card, ranker, regressor), LightGBMScorer)
    assert isinstance(model_scorer("compiled", *CELL, DIRECTORY, card, ranker, regressor), CompiledScorer)


def test_lightgbm_is_called_on_what_it_can_read_only(model, table) -> None:
    """The C API reads the rows as C-contiguous doubles of the booster's width: anything else is
    refused, not misread."""
    ranker, _, _ = model
    predict = FastPredictor(ranker)
    matrix = feature_matrix(PROBLEM, *CELL[:2], table, HW)
    assert np.array_equal(predict(matrix), ranker.predict(matrix))
    for wrong in (matrix.astype(np.float32), np.asfortranarray(matrix), np.ascontiguousarray(matrix[:, :-1])):
        with pytest.raises(ValueError, match=f"expected a C-contiguous float64 matrix with {matrix.shape[1]} columns"):
            predict(wrong)
    refused = FastPredictor(ranker, "many")  # type: ignore[arg-type]  # LightGBM refuses it, whatever the rows
    for rows in (matrix, matrix[:0]):
        with pytest.raises(RuntimeError, match="Parameter num_threads should be of type int"):
            refused(rows)


def test_a_scorer_must_score() -> None:
    class Unfinished(Scorer):
        engine = Engine.ANALYTICAL
        source = ScoreSource.ANALYTICAL

    with pytest.raises(TypeError, match=r"abstract method '?scores"):
        Unfinished(*CELL, 1.0)


class Scaled(Scorer):
    """A model the package does not ship: the analytical model in other units (``3 A + 7``), with
    no regressor, trained (as far as the selector knows) on the shipped model's domain."""

    engine = Engine.ANALYTICAL
    source = ScoreSource.MODEL

    def __init__(self) -> None:
        super().__init__(*CELL, 3.0)

    def scores(self, matrix: np.ndarray) -> np.ndarray:
        return 3.0 * matrix[:, ANALYTICAL_COLUMN] + 7.0


def test_a_new_model_is_one_class(model) -> None:
    """Its scores rank, a kernel outside the domain is scored through its sibling in the scorer's
    units (so ``3 A + 7`` again), the TFLOPS shown without a regressor are the analytical model's,
    and the rows say they come from a model."""
    _, _, card = model
    selector = Selector("gfx950", *CELL, Scaled(), card)
    analytical = Selector("gfx950", *CELL)
    inside = [config_from_any_name(name, "gfx950") for name in card.kernels]
    outside = [c.model_copy(update={"vec_a": 2, "pipeline": Pipeline.COMPV6}) for c in inside[:6]]
    candidates: list[GemmConfig] = inside + [c for c in outside if c not in inside]
    assert selector.engine is Engine.ANALYTICAL and selector.source is ScoreSource.MODEL
    assert selector.compiled is None and selector.ranker is None
    mine = selector.select(PROBLEM, candidates, k=len(candidates))
    plain = analytical.select(PROBLEM, candidates, k=len(candidates))
    assert mine.source == "model" and plain.source == "analytical" and len(mine.top) == len(plain.top) > 30
    matrix = feature_matrix(PROBLEM, *CELL[:2], ConfigTable.build([r.config for r in mine.top]), HW)
    analytical_log2 = matrix[:, ANALYTICAL_COLUMN]
    assert [r.score for r in mine.top] == pytest.approx(list(3.0 * analytical_log2 + 7.0), abs=1e-9)
    assert [r.score for r in mine.top] == pytest.approx([3.0 * r.score + 7.0 for r in plain.top], abs=1e-9)
    extrapolated = [r for r in mine.top if r.source != "model"]
    assert extrapolated and all(r.source.startswith("model, extrapolated: ") for r in extrapolated)
    calibrated = performance.calibrated_tflops(analytical_log2)
    assert [r.predicted_tflops for r in mine.top] == pytest.approx(list(np.minimum.accumulate(calibrated)))
    assert mine.top[0].predicted_tflops == pytest.approx(plain.top[0].predicted_tflops)
    assert math.isclose(mine.top[0].score, 3.0 * plain.top[0].score + 7.0, abs_tol=1e-9)


def test_the_selector_refuses_what_a_scorer_cannot_answer(model, table) -> None:
    _, _, card = model
    with pytest.raises(SelectorError, match="a trained model's scorer needs the model's card"):
        Selector("gfx950", *CELL, Scaled())
    matrix = feature_matrix(PROBLEM, *CELL[:2], table, HW)
    scaled = Selector("gfx950", *CELL, Scaled(), card)
    assert np.array_equal(scaled.scores(matrix), 3.0 * matrix[:, ANALYTICAL_COLUMN] + 7.0)
    with pytest.raises(SelectorError, match="the analytical model for gfx950 forward bf16 has no TFLOPS regressor"):
        scaled.log_tflops(matrix)
    analytical = Selector("gfx950", *CELL)
    for ask in (analytical.scores, analytical.log_tflops):
        with pytest.raises(SelectorError, match="no model for gfx950 forward bf16: nothing to score with"):
            ask(matrix)
