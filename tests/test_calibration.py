"""The analytical model's level (its TFLOPS were 4.9x the measured ones at its picks).

Checked on the shipped MI355X measurements against a statement of the ratio written here (the
measured TFLOPS of the best-scored measured kernel, computed problem by problem): the shipped
``analytical_level`` is the median fit, and fitted on four folds it carries to the fifth within the
issue's bounds (median 0.8-1.25, P10 >= 0.6, P90 <= 1.6)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from reference_picks import picks_by_hand

from ckspace.features import performance
from ckspace.features.hardware import hardware_facts
from ckspace.features.matrix import ANALYTICAL_FEATURE, FEATURE_NAMES, ConfigTable, feature_matrix
from ckspace.training import calibration
from ckspace.training.dataset import load_cells
from ckspace.workloads.datasets import DATASETS


@pytest.fixture(scope="module")
def shipped():
    (data,) = load_cells([DATASETS["mi355x-forward-bf16"].path])
    table = ConfigTable.build(data.configs)
    hw = hardware_facts(data.arch)
    j = FEATURE_NAMES.index(ANALYTICAL_FEATURE)
    scores = np.vstack([feature_matrix(p, data.variant, data.dtype, table, hw)[:, j] for p in data.problems])
    return data, scores


def _ratios_by_hand(scores: np.ndarray, tflops: np.ndarray, level: float) -> list[float]:
    return [level * 2.0 ** scores[p, k] / tflops[p, k] for p, k in enumerate(picks_by_hand(scores, tflops))]


def test_ratios_are_the_picks_predicted_over_measured(shipped) -> None:
    data, scores = shipped
    assert calibration.ratios(scores, data.tflops, 0.3) == pytest.approx(_ratios_by_hand(scores, data.tflops, 0.3))


def test_the_shipped_level_is_the_median_fit(shipped) -> None:
    data, scores = shipped
    fitted = calibration.fit_level(scores, data.tflops)
    assert performance.constant("analytical_level") == pytest.approx(fitted, rel=0.01)
    assert float(np.median(_ratios_by_hand(scores, data.tflops, fitted))) == pytest.approx(1.0, abs=0.01)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_level_carries_to_held_out_problems(shipped, seed: int) -> None:
    """The learning issue's bounds on the calibrated model, held out; uncalibrated it is far outside them."""
    data, scores = shipped
    ratios, levels = calibration.held_out_ratios(scores, data.tflops, data.groups, 5, seed)
    held = calibration.figures(ratios)
    assert 0.8 <= held.median <= 1.25 and held.p10 >= 0.6 and held.p90 <= 1.6, held.text()
    assert max(levels) / min(levels) < 1.1  # one constant: the folds agree on it
    raw = calibration.figures(calibration.ratios(scores, data.tflops))
    assert raw.median > 3.0, raw.text()


def test_the_level_changes_no_pick(shipped) -> None:
    """A single factor: the calibrated TFLOPS order the kernels as the score does."""
    data, scores = shipped
    calibrated = performance.calibrated_tflops(scores)
    assert np.array_equal(calibration.picks(calibrated, data.tflops), calibration.picks(scores, data.tflops))
    assert calibrated == pytest.approx(np.exp2(scores) * performance.constant("analytical_level"))


def test_a_pick_is_a_measured_kernel() -> None:
    """An unmeasured kernel (NaN) is never the pick, however high its score."""
    scores = np.array([[9.0, 1.0, 2.0], [0.0, 5.0, 4.0], [-1.0, -5.0, -3.0]])  # log2 TFLOPS: any sign
    tflops = np.array([[np.nan, 10.0, 20.0], [30.0, np.nan, 40.0], [np.nan, 1.0, 2.0]])
    assert calibration.picks(scores, tflops).tolist() == [2, 2, 2]
    assert calibration.ratios(scores, tflops).tolist() == pytest.approx([4.0 / 20.0, 16.0 / 40.0, 0.125 / 2.0])


def test_figures_are_the_median_and_the_tenth_and_ninetieth_percentiles() -> None:
    held = calibration.figures(np.arange(1.0, 12.0))  # 1..11
    assert (held.problems, held.median, held.p10, held.p90) == (11, 6.0, 2.0, 10.0)


def test_each_folds_level_is_fitted_on_the_other_folds_only(shipped) -> None:
    """Stated by hand: fold f's level is the median fit over the problems outside it, and a
    problem's ratio uses its own fold's level; by default five folds of seed 0, as evaluate splits."""
    from ckspace.training.evaluation import fold_of_groups

    data, scores = shipped
    ratios, levels = calibration.held_out_ratios(scores, data.tflops, data.groups)
    fold = fold_of_groups(data.groups, 5, 0)
    for f in range(5):
        outside = fold != f
        assert levels[f] == pytest.approx(calibration.fit_level(scores[outside], data.tflops[outside]))
        inside = np.flatnonzero(fold == f)
        expected = calibration.ratios(scores[inside], data.tflops[inside], levels[f])
        assert ratios[inside] == pytest.approx(expected)
    assert len(set(levels)) > 1  # the folds differ: none is fitted on everything


def test_the_designed_pairs_are_each_spread_problems_contenders() -> None:
    """design_pairs: problems at evenly spaced ranks of the FLOP counts, each with its best-scored
    kernels (ties in candidate order)."""
    scores = np.array([[1.0, 3.0, 2.0], [0.0, 0.0, 5.0], [4.0, 1.0, 1.0], [2.0, 9.0, 8.0], [1.0, 2.0, 3.0]])
    flops = np.array([50.0, 10.0, 40.0, 30.0, 20.0])  # ranks: 1, 4, 3, 2, 0
    assert calibration.design_pairs(scores, flops, problems=3, per_problem=2) == [
        (1, 2),
        (1, 0),
        (3, 1),
        (3, 2),
        (0, 1),
        (0, 2),
    ]
    assert len(calibration.design_pairs(scores, flops, problems=9, per_problem=1)) == 5


def test_the_disagreement_design_takes_each_size_bins_most_split_problem() -> None:
    """disagreement_pairs against a hand count: 4 grid points, 5 problems. Picks over the grid:
    problem 0 kernels 0, 0, 1, 2 (shares 1/2, 1/4, 1/4: the most split), problem 1 always 2 (not
    split), problem 2 0, 1, 0, 1 (1/2, 1/2), problem 3 0, 0, 0, 1 (3/4, 1/4), problem 4 always 1.
    By FLOPs the order is 3, 1, 0, 2, 4. A problem's kernels by votes, then by mean score over the
    grid."""
    grid = np.zeros((4, 5, 3))
    picks = [[0, 2, 0, 0, 1], [0, 2, 1, 0, 1], [1, 2, 0, 0, 1], [2, 2, 1, 1, 1]]  # [point][problem]
    for g, row in enumerate(picks):
        for p, k in enumerate(row):
            grid[g, p, k] = 1.0
    grid[:, 0, 2] += 0.05  # problem 0: kernels 1 and 2 have a vote each, 2 the higher mean (0.30, 0.25)
    grid[:, 1, 0] = 0.5  # problem 1: kernels 0 and 1 have no vote, 0 the higher mean
    flops = np.array([30.0, 20.0, 40.0, 10.0, 50.0])
    # two bins, {3, 1, 0} and {2, 4}: the most split of each (1 has no split, 2 less than 0, 4 none)
    assert calibration.disagreement_pairs(grid, flops, problems=2, per_problem=2) == [(0, 0), (0, 2), (2, 0), (2, 1)]
    every = calibration.disagreement_pairs(grid, flops, problems=5, per_problem=3)
    assert every[:6] == [(3, 0), (3, 1), (3, 2), (1, 2), (1, 0), (1, 1)]
    assert every[6:] == [(0, 0), (0, 2), (0, 1), (2, 0), (2, 1), (2, 2), (4, 1), (4, 0), (4, 2)]
    assert calibration.disagreement_pairs(grid, flops, problems=1, per_problem=1) == [(0, 0)]


def test_the_most_split_problem_is_by_entropy_not_by_how_many_kernels_are_picked() -> None:
    """Over 20 grid points, problem 0 is picked 10 / 10 between two kernels (entropy ln 2 = 0.69) and
    problem 1 18 / 1 / 1 among three (0.39): three kernels picked is less split than two evenly."""
    grid = np.zeros((20, 2, 3))
    for g in range(20):
        grid[g, 0, g % 2] = 1.0
        grid[g, 1, 0 if g < 18 else g - 17] = 1.0
    assert calibration.disagreement_pairs(grid, np.array([1.0, 2.0]), problems=1, per_problem=1) == [(0, 0)]


def test_the_designs_defaults_are_60_pairs_of_distinct_problems() -> None:
    """The designs' defaults are the 60-pair budget: 20 problems x 3 kernels, 30 x 2."""
    rng = np.random.default_rng(0)
    grid, flops = rng.normal(size=(5, 90, 6)), rng.uniform(1.0, 2.0, size=90)
    for pairs, problems in (
        (calibration.design_pairs(grid[0], flops), 20),
        (calibration.disagreement_pairs(grid, flops), 30),
    ):
        assert len(pairs) == 60 and len(set(pairs)) == 60 and len({p for p, _ in pairs}) == problems


@pytest.mark.slow
def test_the_sensitive_design_takes_one_problem_per_size_bin_and_its_contenders() -> None:
    """bench/calibration_designs.py's D-optimal design, against its statement: 20 distinct problems,
    the i-th of the i-th of 20 bins of the FLOP ranks (sizes as even as can be, the larger first), each
    with the start's best kernel first and two others of the start's next five; and the search kept
    within a factor of the start moves no constant out of it (within 1: not at all)."""
    from analytical_fit import fit
    from calibration_designs import POOL, sensitive_pairs

    from ckspace.training.calibration import FITTED, scores

    (data,) = load_cells([DATASETS["mi355x-forward-bf16"].path])
    sub = data.subset(np.arange(0, len(data.problems), 3))  # 77 problems: bins of 4 and 3
    start = {name: performance.constant(name) * 2.0 for name in FITTED}
    pairs = sensitive_pairs(sub, start)
    problems = list(dict.fromkeys(p for p, _ in pairs))
    assert len(pairs) == 60 and len(problems) == 20
    rank = {p: r for r, p in enumerate(np.argsort([q.flops for q in sub.problems], kind="stable"))}
    n, edges = len(sub.problems), [0]
    for i in range(20):
        edges.append(edges[-1] + n // 20 + (1 if i < n % 20 else 0))
    assert edges[-1] == n
    for i, p in enumerate(problems):
        assert edges[i] <= rank[p] < edges[i + 1]
    base = scores(sub, start)
    for p in problems:
        kernels = [k for q, k in pairs if q == p]
        order = list(np.argsort(-base[p], kind="stable"))
        assert kernels[0] == order[0] and len(set(kernels)) == 3
        assert all(order.index(k) < POOL for k in kernels[1:])
    thin = sub.subset(np.array(problems[:5]))
    rows = np.arange(5)
    assert fit(thin, rows, 1, start, "picks", within=1.0) == start
    for off in (0.25, 4.0):  # the search leaves the box upwards from one start, downwards from the other
        origin = {name: performance.constant(name) * off for name in FITTED}
        free, boxed = fit(thin, rows, 1, origin, "mixed"), fit(thin, rows, 1, origin, "mixed", within=1.5)
        assert not all(origin[k] / 1.5 <= v <= origin[k] * 1.5 for k, v in free.items())
        assert all(origin[k] / 1.5 <= v <= origin[k] * 1.5 for k, v in boxed.items()) and boxed != origin


def test_the_centred_error_ignores_each_problems_level() -> None:
    """A model off by a factor per problem has no error; one that misorders two kernels has; a problem
    with one measured pair, and unmeasured pairs, add nothing."""
    tflops = np.array([[10.0, 20.0, np.nan], [3.0, np.nan, np.nan]])
    exact = np.log2(tflops * np.array([[7.0], [0.1]]))
    exact[np.isnan(exact)] = 99.0
    assert calibration.centred_log_error(exact, tflops) == pytest.approx(0.0, abs=1e-12)
    swapped = exact[:, [1, 0, 2]]
    d = math.log(2.0)  # each residual +-ln 2 after centring
    assert calibration.centred_log_error(swapped, tflops) == pytest.approx(d**2)
    assert calibration.centred_log_error(swapped[1:], tflops[1:]) == 0.0  # one measured pair: no order to err in


@pytest.mark.slow
def test_sixty_pairs_recover_the_every_pair_fits_cross_validated_figures() -> None:
    """Calibration alone, no trees, from at most 60 pairs: the three fitted constants of the
    analytical model from a start far from the shipped values (``calibration_designs.OFF``: each off
    by about a factor of 2, but not one a search step or the grid multiplies back onto them), inside
    grouped 5-fold cross-validation on fold seeds 0-19. The 60 pairs of each training set are chosen
    in rounds where the constants still fitting disagree (``sequential_pairs``, on a 17^3 grid of
    constants around the start) and fitted on that grid by the centred log error; the reference is
    the coordinate search (3 sweeps) on every pair of the training set. Their held-out mean and P10,
    averaged over the seeds (repeated cross-validation), are within 0.3 point. Seed by seed they are
    not (12 of 20 seeds): neither is the every-pair fit against itself from another start (16 of
    20), so a seed's miss is the searches' spread, not the pairs' (docs/results.md)."""
    from analytical_fit import fit
    from calibration_designs import PlausibleGrid, far_start, held_out, sequential_fit, sequential_pairs

    from ckspace.training.evaluation import fold_of_groups

    (data,) = load_cells([DATASETS["mi355x-forward-bf16"].path])
    start = far_start()
    grid = PlausibleGrid(data, start, per_octave=4)

    def few(sub, train):
        pairs = sequential_pairs(grid, sub, train)
        assert len(pairs) == len(set(pairs)) <= 60
        return sequential_fit(grid, sub, train)

    differences = []
    for seed in range(20):
        fold = fold_of_groups(data.groups, 5, seed)
        mean_all, p10_all = held_out(data, fold, lambda sub, _: fit(sub, np.arange(len(sub.problems)), 3, start))
        mean_few, p10_few = held_out(data, fold, few)
        print(f"seed {seed}: every pair {mean_all:.2f} / {p10_all:.2f}; 60 pairs {mean_few:.2f} / {p10_few:.2f}")
        differences.append((mean_few - mean_all, p10_few - p10_all))
    mean_difference, p10_difference = np.mean(differences, axis=0)
    assert mean_difference >= -0.3 and p10_difference >= -0.3, (mean_difference, p10_difference)


@pytest.mark.slow
def test_a_grids_objectives_are_each_points_objective(shipped) -> None:
    """The plausible grid scores every point's objective at once (in chunks of points); each is the
    point's own: the picks objective is mean + P10 / 2 of ``summarize``'s figures, the mixed one
    less 50 x the centred error, on measured pairs only (a third of them removed here)."""
    from calibration_designs import far_start

    from ckspace.training.calibration import PlausibleGrid, objective_of
    from ckspace.training.metrics import summarize

    data, _ = shipped
    sub = data.subset(np.arange(0, len(data.problems), 9))  # 26 problems
    grid = PlausibleGrid(sub, far_start(), per_octave=2)  # 9^3 points: more than one chunk
    rows = np.arange(0, len(sub.problems), 2)
    measured = sub.tflops[rows].copy()
    measured[np.random.default_rng(0).random(measured.shape) < 0.33] = np.nan
    for loss in ("picks", "mixed", "centred", "level"):
        together = grid.objectives(rows, measured, loss)
        assert together.shape == (len(grid.points),)
        alone = [objective_of(s[rows], measured, loss) for s in grid.scores]
        assert together.tolist() == pytest.approx(alone)
    for point in (0, grid.centre, len(grid.points) - 1):
        s = summarize(grid.scores[point][rows], measured)
        error = calibration.centred_log_error(grid.scores[point][rows], measured)
        assert grid.objectives(rows, measured, "picks")[point] == pytest.approx(s.mean + 0.5 * s.p10)
        assert grid.objectives(rows, measured, "mixed")[point] == pytest.approx(s.mean + 0.5 * s.p10 - 50.0 * error)
        pairs = ~np.isnan(measured)  # the level loss: one level for every pair, not one per problem
        residual = np.log(measured[pairs]) - math.log(2.0) * grid.scores[point][rows][pairs]
        one_level = float(np.mean((residual - residual.mean()) ** 2))
        assert grid.objectives(rows, measured, "level")[point] == pytest.approx(s.mean + 0.5 * s.p10 - 50.0 * one_level)
    assert grid.best(rows, measured, "picks") == grid.points[int(np.argmax(grid.objectives(rows, measured, "picks")))]


def test_the_paired_interval_is_the_mean_difference_and_brackets_it() -> None:
    """paired_interval: the mean of the differences, inside its bootstrap interval; no spread, no
    width; a wider spread, a wider interval."""
    from calibration_designs import paired_interval

    centre, low, high = paired_interval([0.1, -0.3, 0.2, 0.0, -0.1])
    assert centre == pytest.approx(-0.02) and -0.3 <= low < centre < high <= 0.2
    assert paired_interval([0.4] * 6) == pytest.approx((0.4, 0.4, 0.4))
    narrow, wide = paired_interval([0.1, -0.1] * 5), paired_interval([1.0, -1.0] * 5)
    assert wide[2] - wide[1] > 5 * (narrow[2] - narrow[1])
