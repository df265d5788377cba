"""Choosing a kernel set for a workload with CP-SAT: the model behind ``ckspace plan``.

A *plan instance* holds, per problem of the workload, the items (candidate kernels) that can run
it, in the order the selector would prefer them (best first), and each one's *efficiency*: the
value the workload gets when that item is the selector's pick. Choosing a set S of items then
means, per problem, that the pick is the first item of its order inside S, and the workload's value
is the weighted mean of the picks' efficiencies. Two questions are asked of it:

* ``budget=K``: the set of at most K items with the highest value, such that every problem that
  any item can run is run by some item of S (coverage); among the sets of that value, a smallest.
* ``min_efficiency=E``: the smallest set reaching value E (with coverage); among those, the one of
  highest value.

The CP-SAT model has a literal x[c] per item and, per problem, a chain of prefix literals (see
:class:`~ckspace.planning.plan_model.PlanModel`, apart because it is how CP-SAT is told, not what
is asked) whose telescoping sum is exactly the value of the first chosen item of the order: the
selector's value, not an optimistic "best item in the set". Each coverage clause is stated once,
however many problems share it.

Large workloads stay tractable by *pruning*: the model keeps only each problem's first ``top``
items of its order. The pick is still exact when S meets them (nothing pruned comes before them);
a problem whose kept items all miss S counts its *floor* (the lowest value past them: coverage
guarantees a pick there), so the model's value is a lower bound, and
:meth:`PlanInstance.value_of` reports the true value of the chosen set afterwards.
The solver runs with a fixed seed and a deterministic time limit, so a plan depends only on its
input, and the status says whether it is proven optimal or how far from the bound it may be.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import TypedDict

import numpy as np

from ckspace.core.errors import InvalidInputError, NoKernelError
from ckspace.planning.plan_model import PlanModel

log = logging.getLogger(__name__)

SCALE = 1_000_000
"""The objective is integral: each problem's share of the weight times an efficiency, times SCALE."""
DEFAULT_TIME_LIMIT = 20.0
"""CP-SAT deterministic time units per solve (about seconds on this machine, but reproducible)."""
DEFAULT_TOP = 64
"""Kept candidates per problem: on 294 MIOpen problems x 623 kernels, 64 loses < 0.5 % of value to
pruning against no pruning and proves optimality in seconds (no pruning takes minutes)."""


def shown_tflops(ranked_tflops: np.ndarray) -> np.ndarray:
    """Predicted TFLOPS in the ranker's order as the selector's list shows them: each capped at the
    one ranked above it (:class:`~ckspace.select.selector.Ranked`). Plans value picks by these, over
    the first (the registry's best): the ranker judges kernels better than the regressor (97.8 %
    against 95.5 % mean in grouped CV), so a plan must never drop a kernel the ranker prefers for one
    only the regressor likes. On the real data this lifts the selector-inside-plan efficiency from
    93.9 to 96.9 % at 4 kernels and from 96.9 to 97.8 % at 8 (``ckspace evaluate --plan-budgets``)."""
    return np.minimum.accumulate(ranked_tflops)


class PlanInfeasibleError(NoKernelError):
    """A valid question with a negative answer: no set within the budget covers every runnable
    problem, or no set reaches the asked efficiency. The CLI exits 1, as for a problem no kernel
    can run (hence the base class; no candidate is blocked by a rule, so ``blocking`` is empty)."""

    def __init__(self, message: str) -> None:
        super().__init__(message, {})


@dataclass(frozen=True)
class PlanInstance:
    """Per problem: ``order[p]`` the items that can run it, best first, and ``value[p]`` their
    efficiencies (fractions) in the same order; ``weights[p]`` how much the problem counts."""

    items: int
    order: tuple[np.ndarray, ...]
    value: tuple[np.ndarray, ...]
    weights: np.ndarray

    def __post_init__(self) -> None:
        if len(self.order) != len(self.value) or len(self.order) != len(self.weights):
            raise InvalidInputError("plan instance: order, value and weights differ in length")
        if np.any(self.weights < 0) or not np.all(np.isfinite(self.weights)):
            raise InvalidInputError("plan weights must be finite and not negative")

    @property
    def runnable(self) -> np.ndarray:
        """Mask of the problems some item can run."""
        return np.asarray([o.size > 0 for o in self.order], dtype=bool)

    def model_terms(self, top: int | None = None) -> tuple[list[np.ndarray], list[np.ndarray], list[int]]:
        """What the solver optimises, integral: per problem its kept order (the first ``top``
        items, or all), their values and the problem's *floor*, each times the problem's share of
        the runnable problems' weight times :data:`SCALE`. The floor is the lowest value past the
        kept items (0 when none is pruned): with coverage, a set that misses the kept items still
        picks one of those, so the model never overstates a set's value."""
        total = float(self.weights[self.runnable].sum())
        share = self.weights / total if total > 0 else np.zeros_like(self.weights)
        orders, values, floors = [], [], []
        for p, (order, value) in enumerate(zip(self.order, self.value, strict=True)):
            keep = order.size if top is None else min(top, order.size)
            scaled = value * share[p] * SCALE
            orders.append(order[:keep])
            values.append(np.rint(scaled[:keep]).astype(np.int64))
            floors.append(int(np.rint(scaled[keep:].min())) if keep < order.size else 0)
        return orders, values, floors

    def model_value(self, chosen: np.ndarray | list[int], top: int | None = None) -> int:
        """The solver's objective for ``chosen`` (see :meth:`model_terms`), from its definition."""
        mask = np.zeros(self.items, dtype=bool)
        mask[np.asarray(chosen, dtype=np.int64)] = True
        total = 0
        for order, values, floor in zip(*self.model_terms(top), strict=True):
            hit = np.flatnonzero(mask[order])
            total += int(values[hit[0]]) if hit.size else floor
        return total

    def picks(self, chosen: np.ndarray | list[int]) -> np.ndarray:
        """Per problem, the position in its order of the selector's pick inside ``chosen`` (-1: none)."""
        mask = np.zeros(self.items, dtype=bool)
        mask[np.asarray(chosen, dtype=np.int64)] = True
        out = np.full(len(self.order), -1, dtype=np.int64)
        for p, order in enumerate(self.order):
            hit = np.flatnonzero(mask[order])
            if hit.size:
                out[p] = hit[0]
        return out

    def efficiencies(self, chosen: np.ndarray | list[int]) -> np.ndarray:
        """Per problem, the efficiency of the pick inside ``chosen`` (0 when it runs nothing)."""
        return np.asarray([self.value[p][i] if i >= 0 else 0.0 for p, i in enumerate(self.picks(chosen))])

    def value_of(self, chosen: np.ndarray | list[int]) -> float:
        """The weighted mean efficiency of ``chosen`` over the runnable problems (fraction)."""
        runnable = self.runnable
        weights = self.weights[runnable]
        if weights.sum() <= 0:
            return 0.0
        return float(np.dot(self.efficiencies(chosen)[runnable], weights) / weights.sum())

    def covers(self, chosen: np.ndarray | list[int]) -> bool:
        """Whether ``chosen`` runs every problem some item can run."""
        return bool(np.all(self.picks(chosen)[self.runnable] >= 0))


@dataclass(frozen=True)
class PlanResult:
    """A chosen set and how sure the solver is of it."""

    chosen: tuple[int, ...]
    status: str  # "optimal" or "feasible": of the objective that decides (the value, or the size)
    model_value: float  # the model's objective (a lower bound of the true value when pruned), fraction
    gap: float  # relative gap of that objective to the solver's bound (0 when optimal)
    seconds: float
    time_limit: float
    pruned_to: int | None


def solve_plan(
    instance: PlanInstance,
    *,
    budget: int | None = None,
    min_efficiency: float | None = None,
    top: int | None = None,
    time_limit: float = DEFAULT_TIME_LIMIT,
    workers: int = 1,
    seed: int = 0,
) -> PlanResult:
    """The plan for ``instance``: exactly one of ``budget`` (at most that many items) and
    ``min_efficiency`` (a fraction in (0, 1]). ``top`` prunes each problem's order (see the module
    docstring); coverage always holds over every item that can run a problem."""
    _check_question(budget, min_efficiency, time_limit, seed)
    started = time.perf_counter()
    solving: _Solving = {"time_limit": time_limit, "workers": workers, "seed": seed}
    build = PlanModel(instance, top)
    if budget is not None:
        chosen, status, gap = _best_within(build, instance, budget, top, solving)
    else:
        assert min_efficiency is not None
        chosen, status, gap = _smallest_reaching(build, instance, min_efficiency, top, solving)
    return _result(instance, chosen, status, gap, top, time_limit, started)


class _Solving(TypedDict):
    """How each solve of one plan runs: :meth:`PlanModel.solve`'s and :func:`minimum_cover`'s."""

    time_limit: float
    workers: int
    seed: int


def _check_question(budget: int | None, min_efficiency: float | None, time_limit: float, seed: int) -> None:
    """Refuse a question the solver cannot be asked, before any model is built."""
    if (budget is None) == (min_efficiency is None):
        raise InvalidInputError("give exactly one of a budget and a minimum efficiency")
    if budget is not None and (
        isinstance(budget, bool) or not isinstance(budget, int) or not 1 <= budget <= BUDGET_MAX
    ):
        raise InvalidInputError(f"the budget must be an integer from 1 to {BUDGET_MAX:,}, not {budget!r}")
    if isinstance(seed, bool) or not isinstance(seed, int) or not SEED_RANGE[0] <= seed <= SEED_RANGE[1]:
        raise InvalidInputError(
            f"the seed must be an integer from {SEED_RANGE[0]:,} to {SEED_RANGE[1]:,}, not {seed!r}"
        )
    if not 0 < time_limit <= TIME_LIMIT_MAX:
        raise InvalidInputError(
            f"the time limit must be more than 0 and at most {TIME_LIMIT_MAX:g} "
            f"deterministic seconds, not {time_limit!r}"
        )
    if min_efficiency is not None and not 0.0 < min_efficiency <= 1.0:
        raise InvalidInputError(f"the minimum efficiency must be in (0, 1], not {min_efficiency!r}")


def _best_within(
    build: PlanModel, instance: PlanInstance, budget: int, top: int | None, solving: _Solving
) -> tuple[tuple[int, ...], str, float]:
    """``budget=K``: the highest value of at most K items, then (when proven) the smallest set of
    that value; the chosen set, its status and gap. Starts from the greedy cover when it fits."""
    build.model.add(build.size <= budget)
    start = _greedy_start(build, instance, budget, top)
    first = build.solve(build.objective, maximize=True, start=start, **solving)
    if first is None:
        cover, lower = minimum_cover(instance, **solving)
        smallest = f"{len(cover)}" if lower == len(cover) else f"{lower} to {len(cover)}, not proven in the time limit"
        raise PlanInfeasibleError(
            f"no set of {budget} kernel(s) runs every problem some candidate can run "
            f"(the smallest such set has {smallest})"
        )
    status, value, bound = first
    gap = relative_gap(value, bound)
    if status == "optimal":  # then the smallest set of that value (starting from this one)
        build.model.add(build.objective >= value)
        build.solve(build.size, maximize=False, **solving)
    return build.chosen(), status, gap


def _greedy_start(
    build: PlanModel, instance: PlanInstance, budget: int, top: int | None
) -> tuple[tuple[int, ...], int, int] | None:
    """The greedy cover, hinted to ``build``, with its model value and a bound (that of every item),
    when it fits the budget: a feasible start, so a hard instance still answers within the time
    limit. None when it does not fit."""
    cover = greedy_cover(instance)
    if len(cover) > budget:
        return None
    build.hint(set(cover))
    return (
        tuple(sorted(cover)),
        instance.model_value(cover, top),
        instance.model_value(np.arange(instance.items), top),
    )  # every item: a bound


def _smallest_reaching(
    build: PlanModel, instance: PlanInstance, min_efficiency: float, top: int | None, solving: _Solving
) -> tuple[tuple[int, ...], str, float]:
    """``min_efficiency=E``: the fewest items reaching E, then (when proven) the best value at that
    size; the chosen set, its status and gap."""
    target = int(np.ceil(min_efficiency * SCALE - 1e-6))
    build.model.add(build.objective >= target)
    first = build.solve(build.size, maximize=False, **solving)
    if first is None:
        best = instance.value_of(np.arange(instance.items))
        raise PlanInfeasibleError(
            f"no kernel set reaches {100 * min_efficiency:.2f} % predicted efficiency"
            f"{' within the kept candidates' if top is not None else ''}; every "
            f"candidate together reaches {100 * best:.2f} %"
        )
    status, size, bound = first
    gap = relative_gap(size, bound)
    if status == "optimal":  # then the best value at that size (starting from this set)
        build.model.add(build.size <= size)
        build.solve(build.objective, maximize=True, **solving)
    return build.chosen(), status, gap


def _result(
    instance: PlanInstance,
    chosen: tuple[int, ...],
    status: str,
    gap: float,
    top: int | None,
    time_limit: float,
    started: float,
) -> PlanResult:
    """The :class:`PlanResult` of ``chosen``, logged."""
    model_value = float(instance.model_value(chosen, top))
    seconds = time.perf_counter() - started
    log.info(
        "plan: %d of %d items, %s, model value %.4f in %.2f s",
        len(chosen),
        instance.items,
        status,
        model_value / SCALE,
        seconds,
    )
    return PlanResult(
        chosen=chosen,
        status=status,
        model_value=model_value / SCALE,
        gap=gap,
        seconds=seconds,
        time_limit=time_limit,
        pruned_to=top,
    )


SEED_RANGE = (-(2**31), 2**31 - 1)
"""CP-SAT's ``random_seed`` is a 32-bit integer."""
BUDGET_MAX = 2**31 - 1
"""The largest budget asked of the solver (a larger one means the same: every candidate is allowed)."""
TIME_LIMIT_MAX = 1e9
"""The largest deterministic time limit (about 30 years: a larger one is no limit at all)."""


def relative_gap(found: int, bound: int) -> float:
    """How far the solver's answer may be from the best one: the distance of its objective to the
    proven bound, as a share of the larger of the two (either sense of optimisation; 0 when they
    meet, as they do for a proven optimum; never a division by zero)."""
    return abs(bound - found) / max(abs(bound), abs(found), 1)


def greedy_cover(instance: PlanInstance) -> list[int]:
    """A set that runs every problem some item can run, built greedily: the item that runs the
    most problems not yet run, until none is left (ties to the lower item). Not the smallest, but
    found at once; :func:`solve_plan` gives it to CP-SAT as a first feasible answer."""
    uncovered = [set(o.tolist()) for o in instance.order if o.size]
    chosen: list[int] = []
    while uncovered:
        counts: dict[int, int] = {}
        for items in uncovered:
            for c in items:
                counts[c] = counts.get(c, 0) + 1
        best = min(counts, key=lambda c: (-counts[c], c))
        chosen.append(best)
        uncovered = [items for items in uncovered if best not in items]
    return chosen


def minimum_cover(
    instance: PlanInstance, time_limit: float = DEFAULT_TIME_LIMIT, workers: int = 1, seed: int = 0
) -> tuple[tuple[int, ...], int]:
    """The smallest set found that runs every problem some item can run, and the proven lower bound
    on the size of such a set (its size, when the solver proves it within the time limit)."""
    build = PlanModel(instance, 0)
    answer = build.solve(build.size, maximize=False, time_limit=time_limit, workers=workers, seed=seed)
    assert answer is not None, "every item together runs every runnable problem"
    return build.chosen(), answer[2]
