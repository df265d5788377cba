"""The dispatcher's ranker as QuickScorer tables scores every row as TL2cgen's C and LightGBM do,
to the bit.

Both C forms are compiled from the shipped gfx950 forward bf16 ranker into one library and fed the
same rows as LightGBM: drawn values, values exactly at split thresholds (``<=`` goes left), NaN
(missing: the split's default branch), infinities, and doubles whose first four bytes are the int
-1, which TL2cgen's own ``union Entry`` would have read as missing (they compare as any value).
"""

from __future__ import annotations

import ctypes
import struct

import lightgbm as lgb
import numpy as np
import pytest
from conftest import c_compiler

from ckspace.features.matrix import CONFIG_FEATURES, FEATURE_NAMES, PROBLEM_FEATURES
from ckspace.select.compiled import compile_library, model_sources
from ckspace.select.forest import Forest, Split, forest_c, goes_left
from ckspace.select.store import RANKER_FILE, load_model, model_texts, shipped_model_dir

SHARED = range(len(PROBLEM_FEATURES))
CONFIG = range(len(PROBLEM_FEATURES), len(PROBLEM_FEATURES) + len(CONFIG_FEATURES))
LOW_WORD_SET = struct.unpack("=d", struct.pack("=i", -1) + struct.pack("=i", 0x3FF00000))[0]
"""A double (about 1.0) whose first four bytes are the int -1: TL2cgen's union read it as missing."""


@pytest.fixture(scope="module")
def ranker_text() -> str:
    directory = shipped_model_dir("gfx950", "forward", "bf16")
    return model_texts(directory, load_model(directory)[2])[RANKER_FILE]


def _rows(forest: Forest, seed: int, n: int) -> np.ndarray:
    """``n`` rows sharing their problem features: each value drawn near, at or across a threshold of
    its feature, or one of NaN, the infinities and LOW_WORD_SET."""
    rng = np.random.default_rng(seed)
    thresholds: dict[int, list[float]] = {}
    for split in forest.splits:
        thresholds.setdefault(split.feature, []).append(split.threshold)
    rows = np.empty((n, forest.features))
    for f in range(forest.features):
        at = np.asarray(thresholds.get(f, [0.0]))[rng.integers(0, len(thresholds.get(f, [0.0])), n)]
        column = np.where(rng.random(n) < 0.3, at, at + rng.normal(0.0, 1.0 + np.abs(at) / 10, n))
        odd = rng.random(n)
        column = np.where(odd < 0.02, np.nan, np.where(odd < 0.03, np.inf, np.where(odd < 0.04, -np.inf, column)))
        rows[:, f] = np.where((odd > 0.04) & (odd < 0.06), LOW_WORD_SET, column)
    rows[:, SHARED.start : SHARED.stop] = rows[0, SHARED.start : SHARED.stop]
    return rows


def _library(text: str, forest: Forest, configs: np.ndarray) -> ctypes.CDLL:
    sources = {
        "quick.c": forest_c("quick", forest, SHARED, CONFIG, configs.tolist()),
        **model_sources(text, "tl2cgen", len(FEATURE_NAMES)),
    }
    return ctypes.CDLL(str(compile_library(sources, ["quick.c", "tl2cgen.c"], c_compiler())))


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.slow
def test_quickscorer_scores_are_tl2cgens(ranker_text: str, seed: int) -> None:
    forest = Forest.from_model_text(ranker_text)
    rows = _rows(forest, seed, 61)  # not a multiple of the row block
    configs = rows[:, CONFIG.start : CONFIG.stop].copy()
    lib = _library(ranker_text, forest, configs)
    expected, got = np.empty(len(rows)), np.full(len(rows), -1.0)
    pointer, size = ctypes.c_void_p, ctypes.c_long
    lib.tl2cgen_batch.argtypes = [pointer, size, size, pointer]
    lib.quick_scores.argtypes = [pointer, pointer, size, pointer]
    lib.tl2cgen_batch(rows.ctypes.data, len(rows), forest.features, expected.ctypes.data)
    order = np.arange(len(rows), dtype=np.intc)
    lib.quick_scores(rows.ctypes.data, order.ctypes.data, len(rows), got.ctypes.data)
    assert expected.tobytes() == got.tobytes()
    assert np.array_equal(got, lgb.Booster(model_str=ranker_text).predict(rows))


def test_goes_left_takes_the_default_branch_for_nan_alone() -> None:
    left, right = Split(0, 0.5, True, 0, 0), Split(0, 0.5, False, 0, 0)
    assert goes_left(left, 0.5) and not goes_left(left, np.nextafter(0.5, 1.0))
    assert goes_left(left, np.nan) and not goes_left(right, np.nan)
    assert not goes_left(left, LOW_WORD_SET) and goes_left(Split(0, 1.5, False, 0, 0), LOW_WORD_SET)


def test_a_tree_too_wide_for_a_mask_word_is_refused(ranker_text: str) -> None:
    forest = Forest.from_model_text(ranker_text)
    assert forest.word_bits() == 16  # 15 leaves: ckspace's boosters
    node = {"node_type": "numerical_test_node", "comparison_op": "<=", "threshold": 0.0, "default_left": True}
    nodes = [
        {"node_id": i, "split_feature_id": 0, "left_child": 2 * i + 1, "right_child": 2 * i + 2, **node}
        for i in range(64)
    ]
    nodes += [{"node_id": i, "leaf_value": 0.0} for i in range(64, 129)]
    dump = {
        "num_target": 1,
        "num_class": [1],
        "postprocessor": "identity",
        "average_tree_output": False,
        "num_feature": 1,
        "base_scores": [0.0],
        "trees": [{"nodes": nodes}],
    }
    with pytest.raises(Exception, match="65 leaves"):
        Forest.from_treelite_json(dump)
