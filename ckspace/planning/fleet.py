"""One workload planned for a fleet of archs under one total kernel budget.

Each arch's plan instance is its own (its target's candidates, scored by its own model or the
analytical one: :func:`~ckspace.planning.workload.predicted_instance`). With a budget per arch the
archs are planned apart (:func:`~ckspace.planning.plan.solve_plan` on each), and each arch's plan
is its one-arch plan. With a total budget the archs compete for the kernels, so they are planned
together: :func:`joint_instance` lays the archs' instances side by side as one instance, whose
items are every arch's candidates (a kernel two archs hold is two items: it is compiled for each),
whose problems are every arch's copy of the workload, and whose weights make each arch's copy
weigh the same. The joint value is then the mean over the archs of each arch's weighted mean
predicted efficiency, and one solve gives the kernels to the archs where they raise that mean most
(:func:`solve_total`). Efficiencies are each arch's own (a pick over that arch's best), so an arch
with faster hardware weighs no more than a slower one: each arch's machines run the whole workload.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ckspace.planning.plan import DEFAULT_TIME_LIMIT, SCALE, PlanInstance, PlanResult, solve_plan


@dataclass(frozen=True)
class JointInstance:
    """The archs' instances as one (see the module docstring); ``starts[a]`` is the first item of
    arch ``a``'s instance inside ``joint`` (its problems follow the previous arch's, in order)."""

    joint: PlanInstance
    parts: tuple[PlanInstance, ...]
    starts: tuple[int, ...]

    def split(self, chosen: Sequence[int]) -> tuple[tuple[int, ...], ...]:
        """The joint ``chosen`` items as each arch's own item numbers."""
        ends = (*self.starts[1:], self.joint.items)
        return tuple(
            tuple(sorted(c - start for c in chosen if start <= c < end))
            for start, end in zip(self.starts, ends, strict=True)
        )


def joint_instance(parts: Sequence[PlanInstance]) -> JointInstance:
    """The instances of ``parts`` side by side, each arch's runnable problems' weights scaled to sum
    to 1 (an arch that runs none of them weighs nothing): the joint value of a set is the mean over
    the archs that run something of their values."""
    starts, order, value, weights = [], [], [], []
    start = 0
    for part in parts:
        starts.append(start)
        order += [o + start for o in part.order]
        value += list(part.value)
        total = float(part.weights[part.runnable].sum())
        weights.append(np.where(part.runnable, part.weights / total, 0.0) if total > 0 else np.zeros_like(part.weights))
        start += part.items
    joint = PlanInstance(start, tuple(order), tuple(value), np.concatenate(weights))
    return JointInstance(joint, tuple(parts), tuple(starts))


def solve_total(
    parts: Sequence[PlanInstance],
    budget: int,
    *,
    top: int | None = None,
    time_limit: float = DEFAULT_TIME_LIMIT,
    workers: int = 1,
    seed: int = 0,
) -> tuple[PlanResult, tuple[PlanResult, ...]]:
    """At most ``budget`` items over every arch, with the highest mean of the archs' values (each
    arch's runnable problems covered), then the fewest items of that value: the joint result and
    each arch's share of it (its chosen items, its own model value; the joint's status and gap,
    which is what was proven)."""
    laid = joint_instance(parts)
    joint = solve_plan(laid.joint, budget=budget, top=top, time_limit=time_limit, workers=workers, seed=seed)
    shares = tuple(
        dataclasses.replace(joint, chosen=chosen, model_value=float(part.model_value(chosen, top)) / SCALE)
        for part, chosen in zip(parts, laid.split(joint.chosen), strict=True)
    )
    return joint, shares
