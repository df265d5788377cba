"""The CP-SAT model of a plan instance and the interruptible solve behind it.

:class:`PlanModel` states the coverage clauses and the prefix chains whose telescoping sum is the
selector's pick (the module docstring of :mod:`~ckspace.planning.plan` says why), and solves it
for one objective after another; :func:`solve_interruptibly` keeps Ctrl-C and SIGTERM the
caller's during a solve. Kept apart from :mod:`~ckspace.planning.plan`, which asks the questions
(a budget, a minimum efficiency) and answers them with this model: the model is how CP-SAT is
told, not what is asked of it. It sees an instance through :class:`Instance` alone, so it needs
nothing of the module that defines one.
"""

from __future__ import annotations

import logging
import signal
import threading
from typing import Protocol

import numpy as np
from ortools.sat.python import cp_model

from ckspace.core.errors import CkspaceError
from ckspace.environment.signals import STOPPING, signals_deferred

log = logging.getLogger(__name__)


class Instance(Protocol):
    """What the model reads of a :class:`~ckspace.planning.plan.PlanInstance`."""

    @property
    def items(self) -> int: ...

    @property
    def order(self) -> tuple[np.ndarray, ...]: ...

    def model_terms(self, top: int | None = None) -> tuple[list[np.ndarray], list[np.ndarray], list[int]]: ...


def solve_interruptibly(solver: cp_model.CpSolver, model: cp_model.CpModel) -> int:
    """``solver.solve(model)``, with Ctrl-C and SIGTERM left to the caller's handlers: CP-SAT's own
    SIGINT handling is off (``catch_sigint_signal``: it turned Ctrl-C into an early "time limit"
    answer, and could deadlock in its handler), the search runs on a thread that blocks those
    signals, and the calling (main) thread waits for it interruptibly. Whatever the handler raises
    there (KeyboardInterrupt, ckspace's SIGTERM exception) stops the search at once and propagates
    once the search has returned (:func:`_stop`). A signal while the thread starts is held back
    until it has (``Thread.start()`` cut short may leave a thread that neither stop nor wait can
    be asked of), then handled inside the guard."""
    solver.parameters.catch_sigint_signal = False
    outcome: list = []
    done = threading.Event()

    def search() -> None:
        try:  # the solver's own threads inherit this mask: every signal goes to the waiting thread
            signal.pthread_sigmask(signal.SIG_BLOCK, set(STOPPING))
            outcome.append(solver.solve(model))
        except BaseException as exc:
            outcome.append(exc)
        finally:
            done.set()

    if threading.current_thread() is not threading.main_thread():  # no signal reaches it: solve here
        return solver.solve(model)
    worker = threading.Thread(target=search, name="ckspace-cp-sat", daemon=True)
    try:
        with signals_deferred():
            worker.start()
        while not done.wait(0.2):  # bounded: a signal caught by another thread is handled within it
            pass  # an Event, not Thread.join: safe to interrupt (see _stop)
        worker.join()
    except BaseException:
        with signals_deferred():  # a second Ctrl-C must not cut the wait for the search short
            _stop(solver, worker, done)
        raise
    if isinstance(outcome[0], BaseException):
        raise outcome[0]
    return outcome[0]


def _stop(solver: cp_model.CpSolver, worker: threading.Thread, done: threading.Event) -> None:
    """Stop the search and wait until the solver has returned: a process that exits while CP-SAT's
    C++ thread is live dies with "terminate called without an active exception" (exit -6, seen on
    every Ctrl-C of ``plan`` in its solve). The stop is asked again until it is heard, because CP-SAT
    ignores one that comes before its search has begun. The wait is on ``done``, not on the
    thread: in Python 3.11 a ``Thread.join`` cut short by a signal's exception marks the thread
    stopped while it still runs, and every later join returns at once."""
    if worker.ident is None:  # the signal came before the thread was started: no search to stop
        return
    solver.stop_search()
    while not done.wait(0.1):
        solver.stop_search()
    worker.join()


class PlanModel:
    """The CP-SAT model of a (possibly pruned) instance, kept so a second objective can follow.

    Per problem with kept order c_1..c_T, z_i = x[c_1] or ... or x[c_i] (three clauses each, a
    chain), and the pick's value telescopes: q_floor + sum_i z_i * (q_i - q_(i+1)) with
    q_(T+1) = q_floor, where q_floor is the problem's floor
    (:meth:`~ckspace.planning.plan.PlanInstance.model_terms`; coverage guarantees a pick). The
    clauses are exact whatever the signs, and their linear relaxation is the tight one of facility
    location."""

    def __init__(self, instance: Instance, top: int | None) -> None:
        self.model = cp_model.CpModel()
        self.x = [self.model.new_bool_var(f"x{c}") for c in range(instance.items)]
        self.size = sum(self.x)
        clauses = sorted({tuple(sorted(o.tolist())) for o in instance.order if o.size})
        for clause in clauses:
            self.model.add_bool_or([self.x[c] for c in clause])
        terms = []
        constant = 0
        self.chains: list[list[tuple[int, object]]] = []  # per problem: (item, its prefix literal or None)
        for p, (order, q, floor) in enumerate(zip(*instance.model_terms(top), strict=True)):
            constant += floor
            previous = None
            chain: list[tuple[int, object]] = []
            self.chains.append(chain)
            for i, c in enumerate(order.tolist()):
                step = int(q[i]) - (int(q[i + 1]) if i + 1 < order.size else floor)
                z = self.x[c] if previous is None else self.model.new_bool_var(f"z{p}_{i}")
                chain.append((c, None if previous is None else z))
                if previous is not None:
                    self.model.add_implication(previous, z)
                    self.model.add_implication(self.x[c], z)
                    self.model.add_bool_or([z.negated(), previous, self.x[c]])
                if step:
                    terms.append(step * z)
                previous = z
        self.objective = sum(terms) + constant if terms else constant
        self.solver: cp_model.CpSolver | None = None
        self.start: tuple[int, ...] | None = None  # the answer when the search found none

    def hint(self, chosen: set[int]) -> None:
        """Hint the set ``chosen`` to the solver, every literal of it: the items and each problem's
        prefix literals (a partial hint, the items alone, is ignored by a one-worker search)."""
        self.model.clear_hints()
        for c, var in enumerate(self.x):
            self.model.add_hint(var, c in chosen)
        for chain in self.chains:
            reached = False
            for c, z in chain:
                reached = reached or c in chosen
                if z is not None:  # the first item's prefix is its own literal
                    self.model.add_hint(z, reached)

    def solve(
        self,
        objective,
        *,
        maximize: bool,
        time_limit: float,
        workers: int,
        seed: int,
        start: tuple[tuple[int, ...], int, int] | None = None,
    ) -> tuple[str, int, int] | None:
        """(status, objective value, best bound), or None when infeasible. ``start``: a feasible
        set, its objective value and a bound on the objective, the answer (``feasible``) when the
        search finds no set within the time limit (the solver's own bound is then not reported)."""
        if maximize:
            self.model.maximize(objective)
        else:
            self.model.minimize(objective)
        if self.solver is not None:  # start from the previous answer
            self._hint_previous_answer()
        solver = _configured_solver(time_limit, workers, seed)
        log.info(
            "plan: solving (%d items, %s the objective, %g deterministic s at most)",
            len(self.x),
            "maximising" if maximize else "minimising",
            time_limit,
        )
        status = solve_interruptibly(solver, self.model)
        if status == cp_model.INFEASIBLE:
            return None
        if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
            return self._fall_back_to_start(start, time_limit)
        self.solver = solver
        return (
            "optimal" if status == cp_model.OPTIMAL else "feasible",
            round(solver.objective_value),
            round(solver.best_objective_bound),
        )

    def _hint_previous_answer(self) -> None:
        """A second solve (the best value, then the smallest set of it, or the other way) starts from the
        first one's answer: the search then begins at a good set instead of rediscovering it."""
        self.model.clear_hints()
        for var in self.x:
            self.model.add_hint(var, self.solver.value(var))

    def _fall_back_to_start(self, start: tuple[tuple[int, ...], int, int] | None, time_limit: float) -> tuple:
        """No set within the time limit: the caller's feasible start (the greedy cover) is still an
        answer, reported as feasible; without one the user is told how to give the search room."""
        if start is None:
            raise CkspaceError(
                f"the plan solver found no kernel set within its time limit ({time_limit:g} "
                "deterministic seconds): raise --time-limit or prune harder (--top)"
            )
        log.info("plan: no set found within the time limit; answering with the greedy cover")
        self.solver, self.start = None, start[0]
        return "feasible", start[1], start[2]

    def chosen(self) -> tuple[int, ...]:
        if self.solver is None and self.start is not None:
            return self.start
        assert self.solver is not None
        return tuple(c for c, var in enumerate(self.x) if self.solver.value(var))


def _configured_solver(time_limit: float, workers: int, seed: int) -> cp_model.CpSolver:
    """A CP-SAT solver bounded by deterministic time and seeded, so a plan is the same on every
    run and machine; the LP linearization proves 300-problem plans in seconds."""
    solver = cp_model.CpSolver()
    solver.parameters.num_workers = workers
    solver.parameters.random_seed = seed
    solver.parameters.max_deterministic_time = time_limit
    solver.parameters.linearization_level = 2  # the clauses in the LP: proves 300-problem plans in seconds
    return solver
