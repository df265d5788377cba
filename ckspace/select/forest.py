"""A booster's trees as QuickScorer tables in C: the ranker of the generated dispatcher.

``ckspace_select`` ranks every kernel that runs a problem, so the ranker scores a few dozen to a few
hundred rows per call. TL2cgen's C (:mod:`ckspace.select.compiled`) walks each tree as nested
``if``s: about one mispredicted branch per tree and row, which made the tree walk most of a select
call. QuickScorer (Lucchese et al., SIGIR 2015) reaches the same leaf without walking:

* each tree's leaves are numbered left to right, and each split carries a mask of the leaves outside
  its left subtree;
* a row keeps, per tree, a word of live leaves; every split the row goes *right* at clears its mask
  from that word, and the tree's exit leaf is then the lowest live bit (the exit leaf is never
  cleared; a leaf left of it is cleared by the split where their paths part);
* the splits of each feature sit sorted by threshold, so a row visits only the splits it goes right
  at, one predictable loop per feature;
* rows are scored in blocks of :data:`ROW_BLOCK` side by side (V-QuickScorer, Lucchese et al.,
  SIGIR 2016): a split is read once for the block, a compare of the block's values against its
  threshold clears its mask from the rows that go right, and the loop ends at the first threshold
  no row of the block exceeds. The C is plain loops the compiler vectorises (``bench/selection.py``:
  ``ckspace_select`` among 30 kernels from C went from 22-25 to 16-17 µs p50 on this project's
  2-core machine; docs/results.md).

A model whose first trees split on one row feature alone (the learning loop's anchored models:
hundreds of trees that state the analytical model as a staircase of its feature) would make that
loop visit every one of their splits per row (tens of thousands). Such a run of trees is one step
function of the feature, so it is tabled here instead (:class:`Stairs`): the sum of its trees'
leaves, in tree order from 0.0, on each interval between its thresholds and for a NaN; a row finds
its interval by binary search and continues the sum from there, to the same bit. The compiled
selector's TL2cgen C starts from the same table (:func:`stairs_c`): as nested ``if``s such a run
is megabytes of C to compile.

Most splits need not be visited per row at all. The problem features are the same in every row of
a call, so their splits are applied once per call; the config features are the same in every call
for a kernel, so their splits are applied here, when the dispatcher is generated, into one word per
tree and kernel (:func:`forest_c`'s ``config_rows``). Per row only the interaction features' splits
are left.

The leaves are the same as TL2cgen's, taken from the same Treelite model, and so is the test at a
split as :mod:`ckspace.select.compiled` feeds TL2cgen: a NaN (LightGBM's missing value) takes the
split's default branch, and any other value goes left when it is ``<=`` the threshold. Each row's
score adds the leaves in tree order to 0.0, then the base score, as TL2cgen does, so the scores are
TL2cgen's to the bit, and LightGBM's (tests compare them).
"""

from __future__ import annotations

import json
import math
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from ckspace.core.errors import CkspaceError
from ckspace.environment.files import banner
from ckspace.features.c_source import c_double

MAX_LEAVES = 64
"""Leaves per tree a mask word holds; ckspace's boosters grow 15 (``num_leaves``), the anchored
models' prior trees 63."""
FLOAT32_TINY = 1.1754943508222875e-38
"""The smallest normal float32: Treelite reads split gains into float32 and refuses a subnormal one."""
FLOAT32_MAX = 3.4028234663852886e38
"""The largest float32."""
ROW_BLOCK = 8
"""Rows scored together, side by side: a tree's live words of the block are one 16-byte vector when a
word is 16 bits (one compare of the block's values against a threshold clears them all), and their
leaf sums run interleaved (each row's sum is one chain of additions in tree order)."""


@dataclass(frozen=True)
class Split:
    """One split of a tree: go left when ``row[feature] <= threshold`` (a missing value: when
    ``default_left``); going right clears ``mask`` from the tree's live leaves."""

    feature: int
    threshold: float
    default_left: bool
    tree: int
    mask: int


@dataclass(frozen=True)
class Forest:
    """A regression forest's leaves (per tree, left to right), its splits and its base score."""

    leaves: tuple[tuple[float, ...], ...]
    splits: tuple[Split, ...]
    features: int
    base_score: float

    @classmethod
    def from_model_text(cls, model_text: str) -> Forest:
        """The forest of a LightGBM model file's text (checked by :mod:`ckspace.select.store`), read
        by Treelite as TL2cgen reads it."""
        model = treelite_model(model_text)
        return cls.from_treelite_json(json.loads(model.dump_as_json(pretty_print=False)))

    @classmethod
    def from_treelite_json(cls, dump: dict) -> Forest:
        """The forest of Treelite's JSON dump of a single-output model with numerical splits."""
        if dump["num_target"] != 1 or list(dump["num_class"]) != [1] or dump["postprocessor"] != "identity":
            raise CkspaceError("the model must be one raw-score output (no classes, no transformation)")
        if dump["average_tree_output"]:
            raise CkspaceError("the model must sum its trees, not average them")
        leaves, splits = [], []
        for t, tree in enumerate(dump["trees"]):
            tree_leaves, tree_splits = _tree(tree["nodes"], t)
            leaves.append(tree_leaves)
            splits += tree_splits
        return cls(tuple(leaves), tuple(splits), int(dump["num_feature"]), float(dump["base_scores"][0]))

    def live_words(self, values: Mapping[int, float]) -> list[int]:
        """Per tree, its leaves left live by the splits on the features of ``values`` (feature
        index -> value), as the C clears them."""
        live = [(1 << len(tree)) - 1 for tree in self.leaves]
        for split in self.splits:
            if split.feature in values and not goes_left(split, values[split.feature]):
                live[split.tree] &= split.mask
        return live

    def word_bits(self) -> int:
        """The narrowest unsigned C type's bits that hold every tree's leaves: smaller tables. A
        forest with a tree wider than :data:`MAX_LEAVES` is refused here, not when it is read: only
        the QuickScorer tables need its masks in a word (the compiled selector reads any forest)."""
        for t, tree in enumerate(self.leaves):
            if len(tree) > MAX_LEAVES:
                raise CkspaceError(
                    f"tree {t} has {len(tree)} leaves; the dispatcher's ranker takes at most {MAX_LEAVES}"
                )
        most = max((len(tree) for tree in self.leaves), default=1)
        return next(bits for bits in (8, 16, 32, 64) if most <= bits)


@dataclass(frozen=True)
class Stairs:
    """The forest's first :attr:`trees` trees when every split of theirs is on :attr:`feature`: one
    step function of it. ``sums[k]`` is their leaves' sum (in tree order, from 0.0) for a value
    ``thresholds[k-1] < x <= thresholds[k]`` (``sums[-1]``: above every threshold), ``nan_sum``
    for a NaN."""

    feature: int
    trees: int
    thresholds: tuple[float, ...]
    sums: tuple[float, ...]
    nan_sum: float

    @classmethod
    def of(cls, forest: Forest, row_features: set[int]) -> Stairs | None:
        """The leading trees of ``forest`` that split on one of ``row_features`` alone (and whose
        leaves fit a mask word), tabled; None when fewer than two do (nothing to save)."""
        import numpy as np

        by_tree: dict[int, set[int]] = {}
        for split in forest.splits:
            by_tree.setdefault(split.tree, set()).add(split.feature)
        first = by_tree.get(0, set())
        if len(first) != 1 or not first <= row_features:
            return None
        feature = next(iter(first))
        trees = 0
        while (
            trees < len(forest.leaves)
            and by_tree.get(trees, set()) <= {feature}
            and len(forest.leaves[trees]) <= MAX_LEAVES
        ):
            trees += 1
        if trees < 2:
            return None
        splits: dict[int, list[Split]] = {}
        for split in forest.splits:
            if split.tree < trees:
                splits.setdefault(split.tree, []).append(split)
        thresholds = sorted({s.threshold for run in splits.values() for s in run})
        # a value per interval: each threshold itself (x <= t holds for t at or above it), then above all
        values = np.array([*thresholds, np.inf])
        total = np.zeros(values.size + 1)  # and last, a NaN's sum
        for t in range(trees):
            # a tree's exit leaf depends only on where x falls among its own thresholds: found for
            # one value per own interval (and NaN), then looked up by every interval of the run
            run = splits.get(t, [])
            own = np.array(sorted({s.threshold for s in run}))
            probes = np.array([*own, np.inf, np.nan])
            right = ~(probes[None, :] <= np.array([s.threshold for s in run])[:, None])  # per split and probe
            right[:, -1] = [not s.default_left for s in run]  # the NaN takes the default branch
            full = np.uint64((1 << len(forest.leaves[t])) - 1)
            masks = np.array([s.mask for s in run], dtype=np.uint64)[:, None]
            live = np.bitwise_and.reduce(np.where(right, masks, full), axis=0, initial=full)
            lowest = live & (~live + np.uint64(1))  # the exit leaf: the lowest live bit
            exits = np.log2(lowest.astype(np.float64)).astype(np.int64)
            own_interval = np.append(np.searchsorted(own, values), own.size + 1)  # first own threshold >= x
            total = total + np.asarray(forest.leaves[t])[exits[own_interval]]  # one addition per tree, in order
        return cls(feature, trees, tuple(thresholds), tuple(total[:-1].tolist()), float(total[-1]))


NO_STAIRS = Stairs(feature=0, trees=0, thresholds=(), sums=(0.0,), nan_sum=0.0)
"""No leading trees tabled: the sum of none, 0.0, for every value."""


def stairs_c(prefix: str, stairs: Stairs) -> str:
    """C of ``stairs``: its tables and

        static double <prefix>_stairs(double x)

    the sum of its trees' leaves (in tree order, from 0.0) for the value ``x`` of its feature, the
    sum on x's interval found by binary search. Both compiled forms of a model start a row's score
    from it: the dispatcher's ranker (:func:`forest_c`) and the TL2cgen C
    (:func:`ckspace.select.compiled.model_sources`)."""
    thresholds = ", ".join(c_double(v) for v in stairs.thresholds) or "0"
    sums = ", ".join(c_double(v) for v in stairs.sums)
    return f"""/* the first {stairs.trees} trees' sum on each interval of their one feature's thresholds */
static const double {prefix}_STAIR_THRESHOLD[{max(len(stairs.thresholds), 1)}] = {{ {thresholds} }};
static const double {prefix}_STAIR_SUM[{len(stairs.sums)}] = {{ {sums} }};

/* The first {stairs.trees} trees' leaves summed in tree order from 0.0, for the value x of their one
   feature: a NaN's sum (it takes each split's default branch), else the sum on x's interval, found
   by binary search (the first threshold at or above x: x <= t goes left). */
static double {prefix}_stairs(double x) {{
  if (isnan(x)) return {c_double(stairs.nan_sum)};
  int low = 0, high = {len(stairs.thresholds)};
  while (low < high) {{
    const int mid = (low + high) / 2;
    if (x <= {prefix}_STAIR_THRESHOLD[mid]) high = mid; else low = mid + 1;
  }}
  return {prefix}_STAIR_SUM[low];
}}
"""


def treelite_model(model_text: str):
    """Treelite's model of a LightGBM model file's text (checked by :mod:`ckspace.select.store`:
    Treelite's parser trusts its input), as TL2cgen and :class:`Forest` read it. Treelite 4 reads a
    split's gain into a float32 and refuses the whole model when one does not fit ("Range error
    while converting string to double"), and LightGBM writes a split of no gain as a float32
    subnormal (``split_gain=5.87747e-39``); a gain takes no part in a prediction, so such a gain is
    read as 0 (:func:`readable_gains`)."""
    import treelite

    with tempfile.TemporaryDirectory(prefix="ckspace-treelite-") as tmp:
        path = Path(tmp) / "model.txt"
        path.write_text(readable_gains(model_text))
        try:
            return treelite.frontend.load_lightgbm_model(str(path))
        except treelite.TreeliteError as exc:
            first = (str(exc).strip().splitlines() or [""])[-1]
            raise CkspaceError(f"Treelite refuses the model: {first}") from None


def readable_gains(model_text: str) -> str:
    """``model_text`` with every split gain a float32 cannot hold (subnormal, or beyond its largest)
    written 0 (see :func:`treelite_model`); every other line, thresholds and leaves included, as it
    was."""

    def gain(token: str) -> str:
        size = abs(float(token))
        return "0" if 0.0 < size < FLOAT32_TINY or FLOAT32_MAX < size < math.inf else token

    return "".join(
        "split_gain=" + " ".join(gain(token) for token in line[len("split_gain=") :].split()) + "\n"
        if line.startswith("split_gain=")
        else line
        for line in model_text.splitlines(keepends=True)
    )


def goes_left(split: Split, value: float) -> bool:
    """The test at a split, as the compiled trees make it: a NaN is missing and takes the default
    branch; any other value goes left when ``<=`` the threshold."""
    if math.isnan(value):
        return split.default_left
    return value <= split.threshold


def _tree(nodes: list[dict], t: int) -> tuple[tuple[float, ...], list[Split]]:
    """Tree ``t``'s leaf values left to right and its splits with their masks."""
    by_id = {node["node_id"]: node for node in nodes}
    leaves: list[float] = []
    splits: list[Split] = []

    def visit(node_id: int) -> range:  # the leaf numbers under the node
        node = by_id[node_id]
        if "leaf_value" in node:
            leaves.append(float(node["leaf_value"]))
            return range(len(leaves) - 1, len(leaves))
        if node["node_type"] != "numerical_test_node" or node["comparison_op"] != "<=":
            raise CkspaceError(f"tree {t}: only numerical '<=' splits are supported, not {node['node_type']}")
        left = visit(node["left_child"])
        right = visit(node["right_child"])
        cleared = sum(1 << leaf for leaf in left)
        test = (node["split_feature_id"], float(node["threshold"]), bool(node["default_left"]))
        splits.append(Split(*test, t, ~cleared))
        return range(left.start, right.stop)

    visit(0)
    full = (1 << len(leaves)) - 1
    return tuple(leaves), [Split(s.feature, s.threshold, s.default_left, s.tree, s.mask & full) for s in splits]


def forest_c(prefix: str, forest: Forest, shared: range, config: range, config_rows: Sequence[Sequence[float]]) -> str:
    """A C translation unit exporting

        void <prefix>_scores(const double* rows, const int* configs, long n, double* out)

    the raw scores of ``n`` rows of ``forest.features`` doubles whose ``shared`` features are the
    same in every row and whose ``config`` features are ``config_rows[configs[r]]`` (those splits are
    applied here, once)."""
    if shared.stop > config.start or config.stop > forest.features:
        raise ValueError("the shared features come before the config features, both inside the row")
    interaction = {s.feature for s in forest.splits if s.feature not in shared and s.feature not in config}
    stairs = Stairs.of(forest, interaction) or NO_STAIRS
    row_splits = sorted(
        (s for s in forest.splits if s.tree >= stairs.trees and s.feature not in shared and s.feature not in config),
        key=lambda s: (s.feature, s.threshold, s.tree),
    )
    shared_splits = sorted((s for s in forest.splits if s.feature in shared), key=lambda s: (s.threshold, s.tree))
    configs = [forest.live_words({f: row[f - config.start] for f in config}) for row in config_rows]
    bits = forest.word_bits()
    word = f"uint{bits}_t"
    begin = [0] * (forest.features + 1)
    for s in row_splits:
        begin[s.feature + 1] += 1
    for f in range(forest.features):
        begin[f + 1] += begin[f]
    row_features = sorted({s.feature for s in row_splits})
    leaf_begin = [sum(len(t) for t in forest.leaves[:i]) for i in range(len(forest.leaves))]
    constants = {
        "WORD": word,
        "TREES": len(forest.leaves),
        "N_FEATURES": forest.features,
        "N_SHARED_SPLITS": len(shared_splits),
        "N_ROW_FEATURES": len(row_features),
        "BASE_SCORE": c_double(forest.base_score),
        "ROW_BLOCK": ROW_BLOCK,
        "STAIR_TREES": stairs.trees,
        "STAIR_FEATURE": stairs.feature,
    }

    def table(ctype: str, name: str, values: Sequence[str]) -> str:
        return f"static const {ctype} {prefix}_{name}[{max(len(values), 1)}] = {{ {', '.join(values) or '0'} }};\n"

    return (
        banner("c", "ckspace emit --with-selector")
        + "\n#include <math.h>\n#include <stdint.h>\n\n"
        + "".join(f"#define {name} {value}\n" for name, value in constants.items())
        + table("double", "LEAF", [c_double(v) for tree in forest.leaves for v in tree])
        + table("int", "LEAF_BEGIN", [str(b) for b in leaf_begin])
        + "/* the splits on the problem features, applied once per call */\n"
        + table("int", "SHARED_FEATURE", [str(s.feature) for s in shared_splits])
        + _split_tables(prefix, "SHARED_", shared_splits, bits)
        + "/* the splits on the interaction features, per feature by threshold, applied per row */\n"
        + table("int", "SPLIT_BEGIN", [str(b) for b in begin])
        + table("int", "ROW_FEATURES", [str(f) for f in row_features])
        + _split_tables(prefix, "", row_splits, bits)
        + stairs_c(prefix, stairs)
        + "/* per config row, each tree's leaves its config features' splits leave live */\n"
        + f"static const {word} {prefix}_CONFIG_LIVE[{max(len(configs), 1)}][{len(forest.leaves)}] = {{\n"
        + "".join(f"  {{ {', '.join(_hex(w, bits) for w in live)} }},\n" for live in configs or [[0]])
        + "};\n"
        + _FUNCTIONS.replace("PREFIX", prefix)
    )


def _split_tables(prefix: str, kind: str, splits: Sequence[Split], bits: int) -> str:
    """The C tables of ``splits``: threshold, tree, default branch and mask, in their order."""
    rows = (
        ("double", "THRESHOLD", [c_double(s.threshold) for s in splits]),
        ("int", "TREE", [str(s.tree) for s in splits]),
        ("unsigned char", "DEFAULT_LEFT", [str(int(s.default_left)) for s in splits]),
        (f"uint{bits}_t", "MASK", [_hex(s.mask, bits) for s in splits]),
    )
    return "".join(
        f"static const {ctype} {prefix}_{kind}{name}[{max(len(values), 1)}] = {{ {', '.join(values) or '0'} }};\n"
        for ctype, name, values in rows
    )


def _hex(word: int, bits: int) -> str:
    return f"UINT{bits}_C({word:#x})" if bits == 64 else f"{word:#x}"


_FUNCTIONS = """
/* Whether x is missing: a NaN, as the compiled trees' entries flag it. */
static int PREFIX_missing(double x) { return isnan(x); }

/* Clear from each row's live words what the splits on feature f clear for its value x[r] (the
   rows of a block side by side, so one pass over the splits serves them all): the splits a row goes
   right at are the first ones by threshold; a row whose value is missing (NaN) goes right at the
   splits whose default branch is the right. */
static void PREFIX_apply(int f, const double* value, long m, WORD live[][ROW_BLOCK]) {
  const int begin = PREFIX_SPLIT_BEGIN[f], end = PREFIX_SPLIT_BEGIN[f + 1];
  double x[ROW_BLOCK], top = -INFINITY;
  for (long r = 0; r < ROW_BLOCK; ++r) {
    x[r] = r < m && !PREFIX_missing(value[r]) ? value[r] : -INFINITY;
    if (x[r] > top) top = x[r];
    if (r < m && PREFIX_missing(value[r]))
      for (int s = begin; s < end; ++s) if (!PREFIX_DEFAULT_LEFT[s]) live[PREFIX_TREE[s]][r] &= PREFIX_MASK[s];
  }
  for (int s = begin; s < end && PREFIX_THRESHOLD[s] < top; ++s) {
    const double t = PREFIX_THRESHOLD[s];
    const WORD mask = PREFIX_MASK[s];
    WORD* w = live[PREFIX_TREE[s]];
    for (int r = 0; r < ROW_BLOCK; ++r) w[r] &= x[r] > t ? mask : (WORD)~(WORD)0;
  }
}

/* Raw scores of n rows of N_FEATURES features (row-major) that share their problem features and
   take their config features from CONFIG_LIVE[configs[r]]: the leaf each row exits each tree at,
   added in tree order to 0.0, then the base score (TL2cgen's sum). */
void PREFIX_scores(const double* rows, const int* configs, long n, double* out) {
  if (n <= 0) return;
  WORD shared[TREES], live[TREES][ROW_BLOCK];
  for (int t = 0; t < TREES; ++t) shared[t] = (WORD)~(WORD)0;
  for (int s = 0; s < N_SHARED_SPLITS; ++s) {
    const double x = rows[PREFIX_SHARED_FEATURE[s]];
    const int left = PREFIX_missing(x) ? PREFIX_SHARED_DEFAULT_LEFT[s] : x <= PREFIX_SHARED_THRESHOLD[s];
    if (!left) shared[PREFIX_SHARED_TREE[s]] &= PREFIX_SHARED_MASK[s];
  }
  for (long first = 0; first < n; first += ROW_BLOCK) {
    const long m = n - first < ROW_BLOCK ? n - first : ROW_BLOCK;
    double sum[ROW_BLOCK];
    for (long r = 0; r < ROW_BLOCK; ++r) {
      if (r >= m) {  /* an empty lane: its one live leaf is the first, its sum unused */
        for (int t = STAIR_TREES; t < TREES; ++t) live[t][r] = 1;
        sum[r] = 0.0;
        continue;
      }
      const WORD* config = PREFIX_CONFIG_LIVE[configs[first + r]];
      for (int t = STAIR_TREES; t < TREES; ++t) live[t][r] = shared[t] & config[t];
      sum[r] = STAIR_TREES ? PREFIX_stairs(rows[(first + r) * N_FEATURES + STAIR_FEATURE]) : 0.0;
    }
    for (int i = 0; i < N_ROW_FEATURES; ++i) {
      const int f = PREFIX_ROW_FEATURES[i];
      double value[ROW_BLOCK];
      for (long r = 0; r < m; ++r) value[r] = rows[(first + r) * N_FEATURES + f];
      PREFIX_apply(f, value, m, live);
    }
    for (int t = STAIR_TREES; t < TREES; ++t) {
      const double* leaf = PREFIX_LEAF + PREFIX_LEAF_BEGIN[t];
      for (int r = 0; r < ROW_BLOCK; ++r) sum[r] += leaf[__builtin_ctzll(live[t][r])];
    }
    for (long r = 0; r < m; ++r) out[first + r] = sum[r] + BASE_SCORE;
  }
}
"""
