"""The kernel-set plan (ckspace plan): CP-SAT against brute force over every subset, both modes."""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import threading
from itertools import combinations
from pathlib import Path

import numpy as np
import pytest
from conftest import fake_ck
from ortools.sat.python import cp_model

from ckspace.core.errors import CkspaceError, InvalidInputError
from ckspace.planning.plan import (
    SCALE,
    PlanInfeasibleError,
    PlanInstance,
    greedy_cover,
    minimum_cover,
    relative_gap,
    solve_plan,
)
from ckspace.planning.plan_model import solve_interruptibly


def random_instance(rng: np.random.Generator, items: int, problems: int) -> PlanInstance:
    """Problems with random runnable subsets (some empty), random orders, values and weights."""
    order, value = [], []
    for _ in range(problems):
        runs = rng.permutation(items)[: rng.integers(0, items + 1)] if rng.random() > 0.1 else np.empty(0, int)
        order.append(runs.astype(np.int64))
        value.append(rng.random(runs.size))
    return PlanInstance(items, tuple(order), tuple(value), rng.integers(1, 5, problems).astype(float))


def integral_value(instance: PlanInstance, chosen: tuple[int, ...], top: int | None = None) -> int:
    """The model's objective of ``chosen``, from the definition: per problem, the value of the
    first chosen item of its order when it is among the first ``top``, else the lowest value past
    them; values scaled by the problem's share of the runnable problems' weight."""
    runnable = [p for p, order in enumerate(instance.order) if len(order)]
    total_weight = sum(instance.weights[p] for p in runnable)
    total = 0
    for p in runnable:
        scaled = [round(float(v) * instance.weights[p] / total_weight * SCALE) for v in instance.value[p]]
        keep = len(scaled) if top is None else min(top, len(scaled))
        first = next((i for i, c in enumerate(instance.order[p]) if c in chosen), None)
        if first is not None:
            total += scaled[first] if first < keep else min(scaled[keep:])
    return total


def brute_force(instance: PlanInstance, budget: int | None, target: int | None, top: int | None):
    """(best objective, size) over every subset: budget mode maximises the value, then minimises
    the size; min-efficiency mode minimises the size, then maximises the value. None if none is valid."""
    best = None
    for size in range(1, instance.items + 1):
        for chosen in combinations(range(instance.items), size):
            if not instance.covers(chosen):
                continue
            value = integral_value(instance, chosen, top)
            if budget is not None and size <= budget:
                key = (value, -size)
            elif target is not None and value >= target:
                key = (-size, value)
            else:
                continue
            if best is None or key > best:
                best = key
    return best


@pytest.mark.parametrize("seed", range(12))
def test_budget_plan_equals_brute_force(seed: int) -> None:
    rng = np.random.default_rng(seed)
    instance = random_instance(rng, int(rng.integers(3, 8)), int(rng.integers(2, 9)))
    top = None if seed % 3 else 2
    for budget in range(1, instance.items + 1):
        expected = brute_force(instance, budget, None, top)
        if expected is None:
            with pytest.raises(PlanInfeasibleError):
                solve_plan(instance, budget=budget, top=top, time_limit=10)
            continue
        result = solve_plan(instance, budget=budget, top=top, time_limit=10)
        assert result.status == "optimal"
        assert instance.covers(result.chosen)
        assert (integral_value(instance, result.chosen, top), -len(result.chosen)) == expected


@pytest.mark.parametrize("seed", range(12))
def test_min_efficiency_plan_equals_brute_force(seed: int) -> None:
    rng = np.random.default_rng(100 + seed)
    instance = random_instance(rng, int(rng.integers(3, 8)), int(rng.integers(2, 9)))
    top = None if seed % 3 else 2
    for efficiency in (0.2, 0.5, 0.7, 0.9):
        target = int(np.ceil(efficiency * SCALE - 1e-6))
        expected = brute_force(instance, None, target, top)
        if expected is None:
            with pytest.raises(PlanInfeasibleError):
                solve_plan(instance, min_efficiency=efficiency, top=top, time_limit=10)
            continue
        result = solve_plan(instance, min_efficiency=efficiency, top=top, time_limit=10)
        assert result.status == "optimal"
        assert instance.covers(result.chosen)
        assert (-len(result.chosen), integral_value(instance, result.chosen, top)) == expected


def test_pick_is_the_first_chosen_item_not_the_best() -> None:
    """A set whose first-ordered item is weak is worth that item, not its best member: the model
    must not credit the better item the selector would never pick."""
    instance = PlanInstance(3, (np.array([0, 1]), np.array([2])), (np.array([0.1, 1.0]), np.array([1.0])), np.ones(2))
    result = solve_plan(instance, budget=2, time_limit=10)
    assert set(result.chosen) == {1, 2} and result.model_value == pytest.approx(1.0)
    assert instance.value_of([0, 1, 2]) == pytest.approx(0.55)


def test_plans_are_deterministic() -> None:
    rng = np.random.default_rng(7)
    instance = random_instance(rng, 40, 60)
    first = solve_plan(instance, budget=5, top=6, time_limit=5, seed=3)
    assert all(solve_plan(instance, budget=5, top=6, time_limit=5, seed=3).chosen == first.chosen for _ in range(2))


WORKLOAD = """idx,direction,N,C,K,G,Di,Hi,Wi,Z,Y,X,stride_d,stride_h,stride_w,pad_d,pad_h,pad_w,dil_d,dil_h,dil_w,runs
0,forward,1,64,128,1,1,56,56,1,3,3,1,1,1,0,1,1,1,1,1,5
1,forward,8,256,256,1,1,14,14,1,1,1,1,1,1,0,0,0,1,1,1,1
2,forward,4,52,156,1,1,64,64,1,1,1,1,1,1,0,0,0,1,1,1,2
3,forward,2,128,256,1,1,1,1,1,3,3,1,1,1,0,0,0,1,1,1,1
4,forward,1,64,128,1,1,56,56,1,3,3,1,1,1,0,1,1,1,1,1,3
5,forward,1,64,64,1,4,8,8,3,3,3,1,1,1,1,1,1,1,1,1,1
"""
"""Problem 3 describes no convolution (a 3x3 filter on a 1x1 input without pad: real lists hold
such rows), problem 4 repeats problem 0, problem 5 is 3D (the registry holds the workload's ndims, so
covering it takes one of the two kernels of a budget of 2, and a budget of 1 covers nothing)."""
PLAN_ARGS = [
    "plan",
    "--arch",
    "gfx950",
    "--variant",
    "forward",
    "--dtype",
    "bf16",
    "--rule-set",
    "full",
    "--where",
    "tile_m * tile_n >= 16384 and pipeline in [compv3, mem]",
]


def run_plan(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    from ckspace.cli import main

    weights = [] if "--weights" in args else ["--weights", "runs"]  # options are given once
    status = main([*PLAN_ARGS, *weights, *args])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


@pytest.mark.slow
def test_plan_cli_picks_what_the_selector_picks_and_emits_exactly_those(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    from ckspace.cli import main
    from ckspace.select.selector import Selector
    from ckspace.space.benchmark_names import config_from_any_name
    from ckspace.workloads.problem import ConvProblem

    workload = tmp_path / "workload.csv"
    workload.write_text(WORKLOAD)
    status, out, _ = run_plan(capsys, "--problems", str(workload), "--budget", "2", "--format", "json")
    assert status == 0
    report = json.loads(out)
    assert report["status"] == "optimal" and report["gap"] == 0
    assert (report["time_limit"], report["pruned_to"]) == (20, 64)  # the defaults --help states
    assert 1 <= len(report["kernels"]) <= 2
    assert report["distinct_problems"] == 4 and len(report["skipped_rows"]) == 1
    assert report["unrunnable"] == []
    assert sum("_3d_" in name for name in report["kernels"]) == 1  # covering the 3D problem takes a 3D kernel
    weights = {p["problem"]: p["weight"] for p in report["problems"]}
    assert sorted(weights.values()) == [1.0, 1.0, 2.0, 8.0]  # the repeated shape's weights are summed
    selector = Selector.load("gfx950", "forward", "bf16")
    configs = [config_from_any_name(name, "gfx950") for name in report["kernels"]]
    for entry in report["problems"]:
        problem = ConvProblem.parse(entry["problem"])
        assert selector.select(problem, report["kernels"], pool=configs).pick == entry["kernel"]
        assert 0 < entry["efficiency"] <= 100
    mean = sum(p["efficiency"] * p["weight"] for p in report["problems"]) / sum(weights.values())
    assert report["efficiency"] == pytest.approx(mean, abs=1e-3)

    status, names, _ = run_plan(capsys, "--problems", str(workload), "--budget", "2")
    assert status == 0 and run_plan(capsys, "--problems", str(workload), "--budget", "2")[1] == names  # deterministic
    plan_file = tmp_path / "plan.txt"
    plan_file.write_text(names)
    assert [line for line in names.splitlines() if not line.startswith("#")] == report["kernels"]
    out_dir = tmp_path / "emitted"
    ck = fake_ck(tmp_path / "ck", explicit_gemm=True)
    assert (
        main(
            [
                "emit",
                "--arch",
                "gfx950",
                "--variant",
                "forward",
                "--ndim",
                "2",
                "3",
                "--dtype",
                "bf16",
                "--kernels",
                str(plan_file),
                "--out",
                str(out_dir),
                "--ck-root",
                str(ck),
            ]
        )
        == 0
    )
    manifest = json.loads((out_dir / "manifest.json").read_text())
    emitted = [k["name"] for k in manifest["kernels"]] + [k["name"] for k in manifest["excluded"]]
    assert sorted(emitted) == report["kernels"]  # exactly those (the fake CK tree cannot build some)


@pytest.mark.slow
def test_plan_cli_min_efficiency_and_bad_input(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    workload = tmp_path / "workload.csv"
    workload.write_text(WORKLOAD)
    status, out, _ = run_plan(capsys, "--problems", str(workload), "--min-efficiency", "90", "--format", "json")
    assert status == 0
    report = json.loads(out)
    assert report["efficiency"] >= 90 and report["status"] == "optimal"
    for args, words in (
        (["--min-efficiency", "150"], "percentage"),
        (["--budget", "0"], "at least 1"),
        (["--budget", "2", "--format", "xml"], "valid: names, json"),
        (["--budget", "2", "--weights", "count"], "no weight column 'count'"),
    ):
        status, out, err = run_plan(capsys, "--problems", str(workload), *args)
        assert status == 2 and out == "" and words in err and len(err.strip().splitlines()) == 1, err
    broken = tmp_path / "broken.csv"
    broken.write_text("N,C,K\n1,2,3\n")
    status, _, err = run_plan(capsys, "--problems", str(broken), "--budget", "2")
    assert status == 2 and "missing columns Wi, X" in err and "Traceback" not in err
    status, _, err = run_plan(capsys, "--problems", str(workload), "--budget", "1")
    assert status == 1 and "no set of 1 kernel(s) runs every problem" in err and "has 2" in err
    status, _, err = run_plan(capsys, "--problems", str(workload), "--min-efficiency", "100", "--top", "1")
    assert status in (0, 1)  # 100 % is reachable only if one set holds every problem's top-ranked kernel
    if status == 1:
        assert "no kernel set reaches 100.00 %" in err


@pytest.mark.slow
def test_evaluate_plans_against_hindsight(capsys: pytest.CaptureFixture[str]) -> None:
    """The hindsight plan is optimal on the measurements per fold, so no plan of the same budget
    can beat it on (a); every budget carries the JSON contract's fields."""
    from ckspace.cli import main

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
                "--plan-budgets",
                "2,4",
            ]
        )
        == 0
    )
    plans = json.loads(capsys.readouterr().out)["plans"]
    assert sorted(plans) == ["2", "4"]
    for result in plans.values():
        hindsight = result["hindsight"]["plan_oracle"]["mean"]
        for figures in [result, result["hindsight"], result["frequent_winners"], result["random"]]:
            assert set(figures["plan_oracle"]) == set(figures["plan_selector"]) == {"mean", "p10"}
            assert figures["plan_oracle"]["mean"] <= hindsight + 1e-3
            assert figures["plan_selector"]["mean"] <= figures["plan_oracle"]["mean"] + 1e-9
    assert plans["4"]["plan_selector"]["mean"] >= plans["2"]["plan_selector"]["mean"] - 1.0


@pytest.mark.parametrize("weights", [[1.0, -1.0], [1.0, float("nan")], [float("inf"), 1.0]])
def test_negative_or_non_finite_weights_are_refused(weights: list[float]) -> None:
    """Each of the two faults alone is refused (a negative finite weight, a NaN, an infinity)."""
    with pytest.raises(InvalidInputError, match="finite and not negative"):
        PlanInstance(2, (np.array([0]), np.array([1])), (np.array([0.5]), np.array([0.5])), np.asarray(weights))


def test_order_value_and_weights_must_match_in_length() -> None:
    with pytest.raises(InvalidInputError, match="differ in length"):
        PlanInstance(2, (np.array([0]),), (np.array([0.5]), np.array([0.5])), np.ones(2))
    with pytest.raises(InvalidInputError, match="differ in length"):
        PlanInstance(2, (np.array([0]), np.array([1])), (np.array([0.5]), np.array([0.5])), np.ones(3))


def test_a_workload_of_no_weight_is_worth_nothing() -> None:
    """Zero weights (or no runnable problem): every set is worth 0, not a negative or NaN value."""
    zero = PlanInstance(2, (np.array([0]), np.array([1])), (np.array([0.5]), np.array([0.9])), np.zeros(2))
    assert zero.value_of([0, 1]) == 0.0 and zero.model_value([0, 1]) == 0
    nothing = PlanInstance(2, (np.empty(0, np.int64),), (np.empty(0),), np.ones(1))
    assert nothing.value_of([0]) == 0.0 and nothing.covers([]) and not nothing.runnable.any()


@pytest.mark.parametrize(
    "kwargs,message",
    [
        ({"budget": 2.5}, "budget must be an integer"),
        ({"budget": 0}, "budget must be an integer"),
        ({"budget": True}, "budget must be an integer"),
        ({"min_efficiency": 0.0}, r"in \(0, 1\]"),
        ({"min_efficiency": 1.5}, r"in \(0, 1\]"),
        ({}, "exactly one"),
        ({"budget": 2, "min_efficiency": 0.5}, "exactly one"),
    ],
)
def test_a_plan_question_is_checked_before_solving(kwargs: dict, message: str) -> None:
    instance = PlanInstance(2, (np.array([0]), np.array([1])), (np.array([0.5]), np.array([0.9])), np.ones(2))
    with pytest.raises(InvalidInputError, match=message):
        solve_plan(instance, **kwargs)


@pytest.mark.parametrize(
    "found,bound,gap",
    [
        (3, 5, 0.4),
        (5, 3, 0.4),
        (7, 7, 0.0),
        (0, 0, 0.0),
        (1, 0, 1.0),
        (0, 1, 1.0),
        (0, 4, 1.0),
        (999_999, 1_000_000, 1e-6),
    ],
)
def test_relative_gap_of_an_unproven_answer(found: int, bound: int, gap: float) -> None:
    """Maximising, the bound is above the answer; minimising, below it: either way the gap is the
    distance over the larger of the two."""
    assert relative_gap(found, bound) == pytest.approx(gap, abs=1e-15)


def test_an_efficiency_one_unit_short_of_the_target_does_not_reach_it() -> None:
    """Item 0 alone (the only one running problem 0) is worth 0.499999: one unit of the scaled
    objective short of 50 %. The smallest set reaching 50 % needs item 1 as well."""
    instance = PlanInstance(
        2, (np.array([0]), np.array([1, 0])), (np.array([0.5]), np.array([1.0, 0.499998])), np.ones(2)
    )
    assert instance.model_value([0]) == SCALE // 2 - 1
    result = solve_plan(instance, min_efficiency=0.5, time_limit=10)
    assert result.chosen == (0, 1) and result.status == "optimal"
    assert solve_plan(instance, min_efficiency=0.499999, time_limit=10).chosen == (0,)


def test_plans_solve_on_one_thread_unless_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    """One worker, seed 0 and 20 deterministic seconds by default (what `ckspace plan --help`
    states): CP-SAT on several threads may return another of equally good sets from run to run,
    and a plan must depend only on its input."""
    seen = []
    real = cp_model.CpSolver.solve

    def solve(self, model, *args, **kwargs):
        assert (
            self.parameters.linearization_level == 2
        )  # coverage clauses in the LP: 300-problem plans proven in seconds
        seen.append((self.parameters.num_workers, self.parameters.random_seed, self.parameters.max_deterministic_time))
        return real(self, model, *args, **kwargs)

    monkeypatch.setattr(cp_model.CpSolver, "solve", solve)
    instance = PlanInstance(2, (np.array([0]), np.array([1, 0])), (np.array([0.5]), np.array([1.0, 0.4])), np.ones(2))
    solve_plan(instance, budget=1)
    solve_plan(instance, min_efficiency=0.5, time_limit=10, workers=2, seed=5)
    minimum_cover(instance)
    assert seen == [(1, 0, 20.0)] * 2 + [(2, 5, 10.0)] * 2 + [(1, 0, 20.0)]


def _two_problems() -> PlanInstance:
    """Problem 0 runs on item 0 only (value 0.5); problem 1 prefers item 1 (1.0) to item 0 (0.4)."""
    return PlanInstance(2, (np.array([0]), np.array([1, 0])), (np.array([0.5]), np.array([1.0, 0.4])), np.ones(2))


def test_picks_and_efficiencies_of_a_set() -> None:
    """-1 and 0.0 stand for a problem the set does not run (as documented), whatever the set."""
    instance = _two_problems()
    assert instance.picks([1]).tolist() == [-1, 0] and instance.efficiencies([1]).tolist() == [0.0, 1.0]
    assert instance.picks([0]).tolist() == [0, 1] and instance.efficiencies([0]).tolist() == [0.5, 0.4]
    assert instance.picks([]).tolist() == [-1, -1] and instance.efficiencies([]).tolist() == [0.0, 0.0]
    assert instance.value_of([1]) == pytest.approx(0.5) and not instance.covers([1])
    one = PlanInstance(1, (np.array([0]),), (np.array([0.25]),), np.ones(1))  # a total weight of exactly 1
    assert one.value_of([0]) == 0.25


def test_the_infeasible_answers_say_how_far_off_they_are() -> None:
    instance = _two_problems()
    with pytest.raises(
        PlanInfeasibleError,
        match=r"^no kernel set reaches 90\.00 % predicted efficiency; every "
        r"candidate together reaches 75\.00 %$",
    ):
        solve_plan(instance, min_efficiency=0.9, time_limit=10)
    with pytest.raises(PlanInfeasibleError, match=r"reaches 90\.00 % predicted efficiency within the kept candidates"):
        solve_plan(instance, min_efficiency=0.9, top=1, time_limit=10)
    three = PlanInstance(3, (np.array([0]), np.array([1]), np.array([2])), (np.ones(1),) * 3, np.ones(3))
    with pytest.raises(PlanInfeasibleError, match=r"no set of 2 kernel\(s\) .* \(the smallest such set has 3\)"):
        solve_plan(three, budget=2, time_limit=10)


def test_a_result_reports_its_time_and_model_value(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level("INFO", logger="ckspace.planning.plan"):
        result = solve_plan(_two_problems(), budget=2, time_limit=10)
    assert result.chosen == (0, 1) and result.model_value == pytest.approx(0.75) and result.gap == 0.0
    assert 0 <= result.seconds < 60 and result.time_limit == 10 and result.pruned_to is None
    assert "plan: 2 of 2 items, optimal, model value 0.7500 in" in caplog.text


def test_instances_are_frozen_and_questions_keyword_only() -> None:
    """An instance is shared by the solves of one plan: it cannot change between them; budget and
    efficiency are easy to confuse, so they are named."""
    instance = _two_problems()
    with pytest.raises(dataclasses.FrozenInstanceError):
        instance.items = 3  # type: ignore[misc]
    with pytest.raises(TypeError):
        solve_plan(instance, 2)  # type: ignore[misc]


def test_minimum_cover_found_and_proven() -> None:
    """The set minimum_cover answers runs every runnable problem; its lower bound is the size when
    proven. On 300 problems of 4 random items each, 0.05 deterministic seconds (one thread, seed 0)
    find a cover without proving it smallest: the budget error then gives the range."""
    three = PlanInstance(
        3, (np.array([0]), np.array([1]), np.array([2, 0])), (np.ones(1), np.ones(1), np.ones(2)), np.ones(3)
    )
    assert minimum_cover(three) == ((0, 1), 2)
    rng = np.random.default_rng(1)
    order = tuple(rng.choice(120, 4, replace=False).astype(np.int64) for _ in range(300))
    hard = PlanInstance(120, order, tuple(np.ones(4) for _ in order), np.ones(300))
    cover, lower = minimum_cover(hard, time_limit=0.05)
    assert hard.covers(cover) and lower < len(cover)
    with pytest.raises(PlanInfeasibleError, match=rf"the smallest such set has {lower} to {len(cover)}, not proven"):
        solve_plan(hard, budget=lower - 1, time_limit=0.05)


def test_a_problem_no_item_runs_costs_the_plan_nothing() -> None:
    """A problem no candidate runs is left out of the value (reported apart by the CLI): a plan
    reaches exactly the efficiency of the problems it can run, in the model as in the report."""
    instance = PlanInstance(1, (np.array([0]), np.empty(0, np.int64)), (np.array([0.5]), np.empty(0)), np.ones(2))
    assert instance.model_value([0]) == SCALE // 2 and instance.value_of([0]) == 0.5
    result = solve_plan(instance, min_efficiency=0.5, time_limit=10)
    assert result.chosen == (0,) and result.model_value == 0.5
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.chosen = ()  # type: ignore[misc]


@pytest.mark.parametrize("seed", range(20))
def test_the_greedy_cover_runs_every_runnable_problem(seed: int) -> None:
    """Each step takes the item running the most problems not yet run (the lower on a tie), and
    the set runs every problem some item runs; checked against the definition."""
    instance = random_instance(np.random.default_rng(seed), 6, 12)
    cover = greedy_cover(instance)
    assert len(set(cover)) == len(cover)
    assert all(set(o.tolist()) & set(cover) for o in instance.order if o.size)
    uncovered = [set(o.tolist()) for o in instance.order if o.size]
    for item in cover:  # each the best next choice
        counts = {c: sum(c in u for u in uncovered) for c in range(instance.items)}
        assert item == min(counts, key=lambda c: (-counts[c], c))
        uncovered = [u for u in uncovered if item not in u]


def test_a_search_that_finds_nothing_in_time_answers_with_the_greedy_cover(monkeypatch: pytest.MonkeyPatch) -> None:
    """When CP-SAT finds no set within the time limit (here: made to answer UNKNOWN), a budget plan
    is the greedy cover when it fits the budget, reported feasible with the gap to the value of every
    item together (a bound no set exceeds); otherwise the error says to raise the time limit."""
    import ckspace.planning.plan_model as plan_model

    monkeypatch.setattr(plan_model, "solve_interruptibly", lambda solver, model: cp_model.UNKNOWN)
    instance = random_instance(np.random.default_rng(3), 6, 12)
    cover = greedy_cover(instance)
    result = solve_plan(instance, budget=len(cover))
    assert result.chosen == tuple(sorted(cover)) and result.status == "feasible"
    bound = instance.model_value(np.arange(instance.items))
    assert result.gap == pytest.approx(relative_gap(instance.model_value(cover), bound))
    if len(cover) > 1:
        with pytest.raises(CkspaceError, match="raise --time-limit"):
            solve_plan(instance, budget=len(cover) - 1)


class _Terminated(Exception):
    """What a SIGTERM handler raises in the test below (ckspace's raises its own)."""


class _SearchUntilStopped:
    """A stand-in CP-SAT solver whose search runs until ``stop_search`` (or ten minutes, a failure):
    the events it records, not a clock, say whether a signal stopped the search or waited for it."""

    def __init__(self) -> None:
        self.parameters = cp_model.CpSolver().parameters
        self.started, self.stopped, self.returned = threading.Event(), threading.Event(), threading.Event()

    def solve(self, model: object) -> int:
        self.started.set()
        self.stopped.wait(600)
        self.returned.set()
        return cp_model.UNKNOWN

    def stop_search(self) -> None:
        self.stopped.set()


@pytest.mark.parametrize(
    "signum, handler, raised",
    [
        (signal.SIGINT, signal.default_int_handler, KeyboardInterrupt),
        (signal.SIGTERM, lambda *_: (_ for _ in ()).throw(_Terminated()), _Terminated),
    ],
)
def test_a_signal_stops_the_search_not_awaits_it(signum, handler, raised) -> None:
    """A signal during ``solve_interruptibly`` runs the caller's handler in the main thread while the
    search goes on in its own; whatever the handler raises stops the search at once and propagates.
    The handler is installed here, whatever the test run inherited (a background job starts with
    SIGINT ignored)."""
    solver = _SearchUntilStopped()
    sender = threading.Thread(target=lambda: solver.started.wait(600) and os.kill(os.getpid(), signum))
    previous = signal.signal(signum, handler)
    try:
        sender.start()
        with pytest.raises(raised):
            solve_interruptibly(solver, None)
    finally:
        signal.signal(signum, previous)
        sender.join()
    assert solver.stopped.is_set() and solver.returned.wait(60)
    assert solver.parameters.catch_sigint_signal is False  # CP-SAT's own SIGINT handling stays off


def test_a_signal_while_the_search_thread_starts_stops_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """A signal whose handler runs inside ``Thread.start()``, before the search thread exists (here:
    sent by a wrapped ``start`` before it starts anything): unfixed, the handler's exception reached
    the guard with no thread to stop or join ("cannot join thread before it is started", seen under
    load). Held back until the thread has started and handled inside the guard, it stops the
    search."""
    real_start = threading.Thread.start

    def start(self: threading.Thread) -> None:
        os.kill(os.getpid(), signal.SIGINT)  # its handler runs at the next instruction: before the start
        real_start(self)

    monkeypatch.setattr(threading.Thread, "start", start)
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    solver = _SearchUntilStopped()
    try:
        with pytest.raises(KeyboardInterrupt):
            solve_interruptibly(solver, None)
    finally:
        signal.signal(signal.SIGINT, previous)
        monkeypatch.undo()
    assert solver.started.is_set() and solver.stopped.is_set() and solver.returned.wait(600)
