"""The kernel-set plan (ckspace plan): CP-SAT against brute force over every subset, both modes."""

from __future__ import annotations

from itertools import combinations

import numpy as np
import pytest

from ckspace.select.plan import SCALE, PlanInfeasibleError, PlanInstance, solve_plan


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
    instance = PlanInstance(3, (np.array([0, 1]), np.array([2])), (np.array([0.1, 1.0]), np.array([1.0])),
                            np.ones(2))
    result = solve_plan(instance, budget=2, time_limit=10)
    assert set(result.chosen) == {1, 2} and result.model_value == pytest.approx(1.0)
    assert instance.value_of([0, 1, 2]) == pytest.approx(0.55)


def test_plans_are_deterministic() -> None:
    rng = np.random.default_rng(7)
    instance = random_instance(rng, 40, 60)
    first = solve_plan(instance, budget=5, top=6, time_limit=5, seed=3)
    assert all(solve_plan(instance, budget=5, top=6, time_limit=5, seed=3).chosen == first.chosen for _ in range(2))
