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
import subprocess

import lightgbm as lgb
import numpy as np
import pytest
from conftest import c_compiler

from ckspace.core.errors import CkspaceError
from ckspace.features.matrix import ANALYTICAL_FEATURE, CONFIG_FEATURES, FEATURE_NAMES, PROBLEM_FEATURES
from ckspace.select.compiled import _tl2cgen_sources, _with_batch, compile_library, model_sources
from ckspace.select.forest import Forest, Split, Stairs, forest_c, goes_left, readable_gains, treelite_model
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


def _assert_scores_as_tl2cgen_and_lightgbm(text: str, forest: Forest, seed: int) -> None:
    """The QuickScorer C of ``forest`` (the model ``text``) scores :func:`_rows` of ``seed`` as
    TL2cgen's C does, to the bit, and as LightGBM predicts."""
    rows = _rows(forest, seed, 61)  # not a multiple of the row block
    configs = rows[:, CONFIG.start : CONFIG.stop].copy()
    lib = _library(text, forest, configs)
    expected, got = np.empty(len(rows)), np.full(len(rows), -1.0)
    pointer, size = ctypes.c_void_p, ctypes.c_long
    lib.tl2cgen_batch.argtypes = [pointer, size, size, pointer]
    lib.quick_scores.argtypes = [pointer, pointer, size, pointer]
    lib.tl2cgen_batch(rows.ctypes.data, len(rows), forest.features, expected.ctypes.data)
    order = np.arange(len(rows), dtype=np.intc)
    lib.quick_scores(rows.ctypes.data, order.ctypes.data, len(rows), got.ctypes.data)
    assert expected.tobytes() == got.tobytes()
    assert np.array_equal(got, lgb.Booster(model_str=text).predict(rows))


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.slow
def test_quickscorer_scores_are_tl2cgens(ranker_text: str, seed: int) -> None:
    _assert_scores_as_tl2cgen_and_lightgbm(ranker_text, Forest.from_model_text(ranker_text), seed)


def test_goes_left_takes_the_default_branch_for_nan_alone() -> None:
    left, right = Split(0, 0.5, True, 0, 0), Split(0, 0.5, False, 0, 0)
    assert goes_left(left, 0.5) and not goes_left(left, np.nextafter(0.5, 1.0))
    assert goes_left(left, np.nan) and not goes_left(right, np.nan)
    assert not goes_left(left, LOW_WORD_SET) and goes_left(Split(0, 1.5, False, 0, 0), LOW_WORD_SET)


def test_a_tree_too_wide_for_a_mask_word_is_refused_by_the_tables_alone(ranker_text: str) -> None:
    forest = Forest.from_model_text(ranker_text)
    assert forest.word_bits() == 16  # 15 leaves: ckspace's boosters
    wide = Forest.from_treelite_json(
        _dump([_balanced(64)] * 2, features=1)
    )  # read (the compiled selector takes it), neither tabled nor masked
    assert Stairs.of(wide, {0}) is None
    with pytest.raises(Exception, match="65 leaves"):
        wide.word_bits()


def _staircase_then_corrections(seed: int, corrections: int = 15) -> str:
    """A model shaped as the learning loop's anchored ones, small: 40 trees on the analytical feature
    alone (a staircase of a line, as its prior), then ``corrections`` trees on every feature."""
    rng = np.random.default_rng(seed)
    column = FEATURE_NAMES.index(ANALYTICAL_FEATURE)
    grid = np.zeros((2000, len(FEATURE_NAMES)))
    grid[:, column] = np.linspace(4.0, 10.0, 2000)
    label = 0.7 * grid[:, column] - 1.0
    grid[::20, column] = np.nan  # missing values learnt: each split sends a NaN its own way
    label[::20] = 3.0
    base = {"objective": "regression", "verbose": -1, "seed": seed, "num_threads": 1, "min_data_in_leaf": 1}
    prior = lgb.train(
        {**base, "num_leaves": 31, "max_bin": 2000, "interaction_constraints": [[column]]},
        lgb.Dataset(grid, label=label, feature_name=list(FEATURE_NAMES)),
        num_boost_round=40,
    )
    if not corrections:
        return prior.model_to_string()
    rows = rng.normal(0.0, 2.0, (400, len(FEATURE_NAMES)))
    rows[:, column] = rng.uniform(4.0, 10.0, 400)
    label = 0.7 * rows[:, column] - 1.0 + 0.3 * np.sin(rows[:, 0]) + 0.2 * rows[:, CONFIG.start]
    corrected = lgb.train(
        {**base, "num_leaves": 7, "learning_rate": 0.1},
        lgb.Dataset(rows, label=label, feature_name=list(FEATURE_NAMES)),
        num_boost_round=corrections,
        init_model=prior,
    )
    return corrected.model_to_string()


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.slow
def test_a_staircase_of_leading_trees_is_tabled_and_scores_to_the_bit(seed: int) -> None:
    """The leading trees that split on one interaction feature alone are one step function of it:
    the C tables their sums per interval and searches it, and scores every row as TL2cgen and
    LightGBM do, values at every threshold, NaN, infinities and low-word-set doubles included."""
    text = _staircase_then_corrections(seed)
    forest = Forest.from_model_text(text)
    interaction = set(range(CONFIG.stop, forest.features))
    stairs = Stairs.of(forest, interaction)
    assert stairs is not None and stairs.feature == FEATURE_NAMES.index(ANALYTICAL_FEATURE)
    assert stairs.trees == 40 and len(stairs.sums) == len(stairs.thresholds) + 1
    for x in (stairs.thresholds[0], stairs.thresholds[len(stairs.thresholds) // 2], 1e9, np.nan):
        split_sum = 0.0
        for t in range(stairs.trees):  # the independent statement: each tree walked, summed in order
            live = (1 << len(forest.leaves[t])) - 1
            for split in (s for s in forest.splits if s.tree == t):
                if not goes_left(split, x):
                    live &= split.mask
            split_sum += forest.leaves[t][(live & -live).bit_length() - 1]
        k = int(np.searchsorted(stairs.thresholds, x)) if not np.isnan(x) else None
        assert split_sum == (stairs.nan_sum if k is None else stairs.sums[k])
    _assert_scores_as_tl2cgen_and_lightgbm(text, forest, seed)


def test_a_forest_without_a_leading_staircase_tables_none(ranker_text: str) -> None:
    forest = Forest.from_model_text(ranker_text)
    assert Stairs.of(forest, set(range(CONFIG.stop, forest.features))) is None


@pytest.mark.parametrize("corrections", [15, 0])
@pytest.mark.slow
def test_the_compiled_selector_tables_a_leading_staircase_and_gives_tl2cgen_the_rest(corrections: int) -> None:
    """:func:`model_sources` of an anchored-shaped model (staircase and corrections, or the
    staircase alone) tables the staircase, hands TL2cgen only the trees after it (none: no TL2cgen
    at all) and scores every row as TL2cgen's C over every tree does, to the bit, and as LightGBM
    predicts: the analytical feature at each threshold and just above it, NaN and the infinities."""
    text = _staircase_then_corrections(0, corrections)
    forest = Forest.from_model_text(text)
    stairs = Stairs.of(forest, set(range(forest.features)))
    assert stairs is not None and stairs.trees == 40 and len(forest.leaves) == 40 + corrections
    sources = model_sources(text, "tabled", forest.features)
    if corrections:  # TL2cgen's predict adds one leaf per line, then its base score
        rest = sum(len(tree) for tree in forest.leaves[40:])
        assert sources["tabled/main.c"].count("result[0] += ") == rest + 1
    else:
        assert set(sources) == {"tabled.c"}
    whole = _with_batch(_tl2cgen_sources(text, "whole"), "whole", forest.features, "0.0", "every tree by TL2cgen")
    lib = ctypes.CDLL(str(compile_library({**sources, **whole}, ["tabled.c", "whole.c"], c_compiler())))
    rows = _rows(forest, 0, 61)
    edges = np.repeat(rows[:1], 2 * len(stairs.thresholds) + 3, axis=0)
    thresholds = np.asarray(stairs.thresholds)
    edges[:, stairs.feature] = [*thresholds, *np.nextafter(thresholds, np.inf), np.nan, np.inf, -np.inf]
    rows = np.vstack([rows, edges])
    expected, got = np.empty(len(rows)), np.full(len(rows), -1.0)
    for name, out in (("whole", expected), ("tabled", got)):
        batch = getattr(lib, f"{name}_batch")
        batch.argtypes = [ctypes.c_void_p, ctypes.c_long, ctypes.c_long, ctypes.c_void_p]
        batch(rows.ctypes.data, len(rows), forest.features, out.ctypes.data)
    assert expected.tobytes() == got.tobytes()
    assert np.array_equal(got, lgb.Booster(model_str=text).predict(rows))


def test_a_subnormal_split_gain_is_read_as_zero_and_changes_no_score(ranker_text: str) -> None:
    """LightGBM writes a split of no gain as a float32 subnormal, which Treelite's loader refuses for
    the whole model: the forest and the compiled sources read it as 0, every threshold and leaf as
    written, so the scores are the unchanged model's."""
    lines = ranker_text.splitlines(keepends=True)
    at = next(i for i, line in enumerate(lines) if line.startswith("split_gain="))
    gains = lines[at][len("split_gain=") :].split()
    lines[at] = "split_gain=" + " ".join(["5.87747e-39", *gains[1:]]) + "\n"
    subnormal = "".join(lines)
    readable = readable_gains(subnormal).splitlines(keepends=True)
    assert readable[at] == "split_gain=" + " ".join(["0", *gains[1:]]) + "\n"
    assert readable[:at] + readable[at + 1 :] == lines[:at] + lines[at + 1 :]
    assert readable_gains(ranker_text) == ranker_text
    assert Forest.from_model_text(subnormal) == Forest.from_model_text(ranker_text)
    assert model_sources(subnormal, "p", len(FEATURE_NAMES)) == model_sources(ranker_text, "p", len(FEATURE_NAMES))


def _dump(trees: list[list[dict]], features: int = 2, **fields) -> dict:
    """Treelite's JSON dump of a forest of ``trees`` (node lists), ``fields`` overriding its header."""
    header = {"num_target": 1, "num_class": [1], "postprocessor": "identity", "average_tree_output": False}
    return {**header, "num_feature": features, "base_scores": [0.0], "trees": [{"nodes": n} for n in trees], **fields}


def _balanced(inner: int) -> list[dict]:
    """The nodes of a tree of ``inner`` splits on feature 0 in breadth-first order and ``inner`` + 1 leaves."""
    test = {"node_type": "numerical_test_node", "comparison_op": "<=", "threshold": 0.0, "default_left": True}
    splits = [
        {"node_id": i, "split_feature_id": 0, "left_child": 2 * i + 1, "right_child": 2 * i + 2} for i in range(inner)
    ]
    return [{**n, **test} for n in splits] + [{"node_id": i, "leaf_value": 0.0} for i in range(inner, 2 * inner + 1)]


def _stump(feature: int, threshold: float, left: float, right: float, node_type: str = "numerical_test_node") -> list:
    test = {"node_type": node_type, "comparison_op": "<=", "threshold": threshold, "default_left": True}
    return [
        {"node_id": 0, "split_feature_id": feature, "left_child": 1, "right_child": 2, **test},
        {"node_id": 1, "leaf_value": left},
        {"node_id": 2, "leaf_value": right},
    ]


def test_a_staircase_needs_two_leading_trees_on_one_row_feature() -> None:
    """Stairs.of's bounds, by hand: two leading stumps on feature 0 are tabled (their thresholds, the
    sums of their leaves on each interval and for NaN, which goes left); one is not (nothing to save);
    nor are trees on a feature the rows do not vary."""
    two = Forest.from_treelite_json(_dump([_stump(0, 1.0, 1.0, 2.0), _stump(0, 3.0, 10.0, 20.0), _stump(1, 0.0, 0, 5)]))
    stairs = Stairs.of(two, {0, 1})
    assert (stairs.feature, stairs.trees, stairs.thresholds) == (0, 2, (1.0, 3.0))
    assert stairs.sums == (11.0, 12.0, 22.0) and stairs.nan_sum == 11.0
    assert Stairs.of(two, {0}) == stairs  # the rows vary feature 0 alone
    assert Stairs.of(two, {1}) is None  # feature 0 is not a row feature
    three = Forest.from_treelite_json(_dump([_stump(0, 1.0, 1, 2)] * 3 + [_stump(1, 0.0, 0, 5)]))
    assert Stairs.of(three, {0, 1}).trees == 3
    wide_last = Forest.from_treelite_json(_dump([_stump(0, 1.0, 1, 2)] * 2 + [_balanced(64)]))
    assert Stairs.of(wide_last, {0}).trees == 2  # a tree too wide for a word ends the run
    wide_first = Forest.from_treelite_json(_dump([_balanced(64)] + [_stump(0, 1.0, 1, 2)] * 2))
    assert Stairs.of(wide_first, {0}) is None  # nor may it start one
    widest = Forest.from_treelite_json(_dump([_balanced(63)] * 2))  # 64 leaves: a whole word
    assert Stairs.of(widest, {0}).trees == 2
    assert all(0 <= s.mask < 2**64 for s in widest.splits)
    assert all(0 <= w < 2**64 for w in widest.live_words({0: 1.0}))
    assert widest.live_words({}) == [2**64 - 1] * 2  # no split applied: every leaf live
    one = Forest.from_treelite_json(_dump([_stump(0, 1.0, 1.0, 2.0), _stump(1, 3.0, 10.0, 20.0)]))
    assert Stairs.of(one, {0, 1}) is None


def test_the_readers_refuse_what_the_tables_cannot_state() -> None:
    """A second output, a categorical split, a config range past the row, and a model Treelite cannot
    parse are each refused with the reason; a tree of exactly 64 leaves fits a word."""
    for header in ({"num_target": 2}, {"num_class": [2]}, {"postprocessor": "sigmoid"}):
        with pytest.raises(CkspaceError, match="one raw-score output"):
            Forest.from_treelite_json(_dump([_stump(0, 1.0, 1.0, 2.0)], **header))
    with pytest.raises(CkspaceError, match="only numerical '<=' splits"):
        Forest.from_treelite_json(_dump([_stump(0, 1.0, 1.0, 2.0, "categorical_test_node")]))
    forest = Forest.from_treelite_json(_dump([_stump(0, 1.0, 1.0, 2.0)]))
    with pytest.raises(ValueError, match="inside the row"):
        forest_c("p", forest, range(1), range(1, 3), [[0.0, 0.0]])
    with pytest.raises(ValueError, match="inside the row"):
        forest_c("p", forest, range(2), range(1, 2), [[0.0]])
    assert "p_scores" in forest_c("p", forest, range(1), range(1, 2), [[0.0]])  # config up to the row's end
    assert forest.word_bits() == 8
    with pytest.raises(CkspaceError, match=r"Treelite refuses the model: \S"):
        treelite_model("tree\nnot a model\n")
    assert Forest.from_treelite_json(_dump([_balanced(63)])).word_bits() == 64


def test_only_gains_a_float32_cannot_hold_are_read_as_zero() -> None:
    """The float32 range's own ends and infinity are kept; a subnormal and a value beyond the largest
    float32, of either sign, are written 0; other lines are untouched."""
    ends = "1.1754943508222875e-38 3.4028234663852886e+38"
    text = f"split_gain={ends} 5.87747e-39 1e39 -1e39 inf 0 0.0 2.5\nthreshold=1e39\n"
    assert readable_gains(text) == f"split_gain={ends} 0 0 0 inf 0 0.0 2.5\nthreshold=1e39\n"


def test_a_forest_with_empty_tables_is_iso_c(tmp_path) -> None:
    """No shared split, no config feature, no config row: every table still has an element, so
    the unit compiles as ISO C with every warning an error (a zero-length array is not C)."""
    flags = ["-std=c11", "-pedantic-errors", "-Wall", "-Werror", "-c", "-o", str(tmp_path / "forest.o")]
    for trees in (3, 1):  # with a staircase of three trees, and with none (an empty staircase table)
        forest = Forest.from_treelite_json(_dump([_stump(1, 1.0, 1.0, 2.0)] * trees))
        source = tmp_path / "forest.c"
        source.write_text(forest_c("p", forest, range(0), range(0), []))
        result = subprocess.run([c_compiler(), *flags, str(source)], capture_output=True, text=True, check=False)
        assert result.returncode == 0, result.stderr


def test_a_block_of_rows_goes_right_just_above_a_threshold_and_adds_the_base_score(tmp_path) -> None:
    """The rows of a block are cleared side by side, but each by its own value: stated here by hand
    for stumps on a row feature (thresholds 1 and -1, NaN goes left; 2, NaN goes right) after one on
    the shared feature (so no staircase), with a base score. A block whose greatest value is the next
    double above a threshold still visits its split; a NaN row is not cleared as any number would
    be; a block of values at the threshold, NaN and -inf; 11 rows: a whole block and a part one."""
    nan_right = [{**_stump(1, 2.0, 0.0, 100.0)[0], "default_left": False}, *_stump(1, 2.0, 0.0, 100.0)[1:]]
    trees = [_stump(0, 0.5, 0.0, 0.0), _stump(1, 1.0, 1.0, 2.0), nan_right, _stump(1, -1.0, 0.0, 1000.0)]
    forest = Forest.from_treelite_json(_dump(trees, base_scores=[0.25]))
    above = float(np.nextafter(1.0, 2.0))
    values = [1.0, above, np.nan, -np.inf, 0.5, 1.0, 1.0, 1.0, 1.0, np.nan, -np.inf]
    rows = np.array([[0.0, v] for v in values])
    source = tmp_path / "forest.c"
    source.write_text(forest_c("p", forest, range(1), range(1, 1), [[]]))  # one kernel, no config feature
    lib = ctypes.CDLL(str(compile_library({"forest.c": source.read_text()}, ["forest.c"], c_compiler())))
    lib.p_scores.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_long, ctypes.c_void_p]
    got, configs = np.full(len(rows), -1.0), np.zeros(len(rows), dtype=np.intc)
    lib.p_scores(rows.ctypes.data, configs.ctypes.data, len(rows), got.ctypes.data)
    expected = [
        0.25 + (2.0 if v == above else 1.0) + (100.0 if np.isnan(v) else 0.0) + (1000.0 if v > -1.0 else 0.0)
        for v in values
    ]
    assert got.tolist() == expected
