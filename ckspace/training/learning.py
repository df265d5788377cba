"""The learning loop: measure few kernels on many problems, learn, measure where picks are unsure.

Building a kernel costs ~20 s of CPU; timing a pair on a built kernel costs milliseconds of GPU. So
the loop builds few kernels and times many problems on them, round by round:

0. Calibration (:attr:`LearnSettings.calibrate`): the 60 pairs of the sequential design fit the
   analytical model's three constants to this GPU (:mod:`ckspace.training.calibration`); every
   feature is priced with them from then on, and the model card carries them.
1. Round 1 covers the workload: the kernels the analytical model ranks in the top 3 of the most
   problems not yet covered (greedily), on problems spread evenly over the workload's FLOP counts.
2. Each later round fits what is measured (:mod:`ckspace.training.acquisition`: the analytical
   model at its calibrated level, each problem moved by its measured pairs; a LightGBM regressor
   only if :attr:`LearnSettings.fit_problems` is set and that many problems have two or more
   kernels measured), estimates each problem's regret and each pair's value, and chooses the next
   batch by value per second of the :class:`~ckspace.training.measurer.Measurer`'s costs.
3. It stops when a budget (kernels built, pairs timed) is spent, when the estimated mean regret is
   below a target, or when no pair is worth timing; then it trains the model on every measurement,
   anchored on the analytical model (:func:`~ckspace.training.anchored.train_anchored`: a model
   directory as ``ckspace train`` writes one, which is the analytical model where the data are thin).

The record is the measurement CSV, bench's schema (:mod:`ckspace.workloads.measurement`): a pair the
measurer could not measure is a ``failed`` row whose detail says why, so it is never asked again.
Before a round is measured its batch is written whole (``round.json``): a run stopped by its budget
or interrupted inside a round resumes by finishing that batch, and every estimate depends only on
the record and the seed, so a resumed run measures no pair twice and, with the same seed, ends with
the same record and model as one that was never stopped. The planned batch does not depend on the
budgets, except that no kernel is planned once the kernel budget is spent.
"""

from __future__ import annotations

import csv
import io
import logging
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from pydantic import BaseModel

from ckspace import __version__
from ckspace.core.config import GemmConfig
from ckspace.core.errors import CkspaceError
from ckspace.environment.files import write_atomic
from ckspace.environment.inputs import read_input_text, read_json_model
from ckspace.environment.progress import NOTICE
from ckspace.features import performance
from ckspace.features.hardware import hardware_facts
from ckspace.features.matrix import ANALYTICAL_FEATURE, FEATURE_NAMES
from ckspace.training.acquisition import (
    Costs,
    Estimate,
    analytical_mu,
    centred_sigma,
    choose_pairs,
    contender_pairs,
    lookahead,
    regressor_mu,
    shifted,
)
from ckspace.training.anchored import train_anchored
from ckspace.training.boosters import problem_features, thread_count
from ckspace.training.calibration import (
    FITTED,
    SHIPPED_FROM,
    PlausibleGrid,
    design_problems,
    fit_constants,
    grid_size,
    sequential_pairs,
)
from ckspace.training.dataset import CleaningReport, Measurements, load_measurements
from ckspace.training.measurer import Measurer, Record
from ckspace.workloads.measurement import COLUMNS, config_cells, config_from_row, problem_cells
from ckspace.workloads.problem import ConvProblem

log = logging.getLogger(__name__)

LOST_AFTER = 1
"""A problem whose first this many pairs all failed (and none ran) is not asked again and counts in
no estimate: the measurer cannot run it (a replay has no recording of it, a GPU lacks the memory).
One: each further ask of such a problem is a pair of the budget spent on nothing, and a problem
whose first pair ran is never lost, whatever fails later."""
CALIBRATION_PER_OCTAVE = 2
"""Grid points per octave of each constant in :meth:`Loop.calibrate`: 9^3 points, which on the MI355X
data recover the every-pair fit's held-out figures from 60 pairs (+0.09 mean, +0.06 P10 over fold
seeds 0-19, ``bench/calibration_designs.py --design sequential --per-octave 2 --sweeps 0``) as well
as 17^3 do (+0.01 / -0.09) at a sixth of the memory (points x problems x kernels doubles)."""
RECORD_FILE = "measurements.csv"
ROUND_FILE = "round.json"


class LearnSettings(BaseModel):
    """How the loop sizes its rounds (the defaults are what ``ckspace learn`` uses)."""

    initial_kernels: int = 4
    initial_problems: int = 12
    round_pairs: int = 32
    round_kernels: int = 2
    fit_problems: int | None = None
    """Problems with two or more kernels measured before a LightGBM regressor replaces the analytical
    model as the estimate; None: never. A regressor fitted from scratch on a few hundred pairs
    misjudges the top of a problem's ranking (``train``'s model on 10 % of the MI355X pairs picks at
    94 % of the best, the analytical model at 97 %), so the pairs it calls uncertain are not the
    ones that decide picks; the analytical model, moved per problem by its measurements, sends the
    budget to each problem's close contenders, which the anchored model's corrections then learn."""
    samples: int = 64
    """Draws per pair of the regret estimate."""
    calibrate: bool | None = None
    """Measure first the :data:`~ckspace.training.calibration.DESIGN_PAIRS` pairs that fit the
    analytical model's constants to this GPU (:mod:`ckspace.training.calibration`), and price
    every feature with them from then on (the model card carries them). False: the :attr:`start`
    constants. None: calibrate unless the start's constants are already this GPU's: the cell's arch
    is the one the shipped constants were fitted on (:data:`~ckspace.training.calibration.SHIPPED_FROM`,
    where 60 pairs measure them worse than the 6,930 they came from, docs/results.md), or
    :attr:`start` gives constants (a model of another cell that measured them on this GPU)."""
    start: dict[str, float] = {}
    """The constants the loop starts from, by name, over the shipped ones (the calibration's grid is
    centred on them; without calibration the features are priced with them): a GPU's constants
    known from elsewhere, or, in a study, constants far off that play a GPU unlike the MI355X."""
    contenders: int | None = 3
    """Each later round measures the contenders of the problems whose picks are least sure: their
    this many best-estimated kernels (:func:`~ckspace.training.acquisition.contender_pairs`), building
    what they need within the kernel budget. None: the pairs of most expected regret reduction per
    second, which builds few kernels (:func:`~ckspace.training.acquisition.choose_pairs`)."""


class Budget(BaseModel):
    """When the loop stops: kernels built, pairs timed, or an estimated mean regret (fraction)."""

    kernels: int
    pairs: int
    target_regret: float | None = None


class RoundPlan(BaseModel):
    """One round's batch, written before it is measured: (problem index, kernel name) in order."""

    round: int
    pairs: list[tuple[int, str]]


class LearnReport(BaseModel):
    rounds: int
    kernels_built: int
    pairs_timed: int
    pairs_not_measured: int
    measurement_seconds: float
    estimate_source: str
    estimated_mean_regret: float | None
    stopped_by: str
    calibrated: bool
    """Whether the analytical model's constants were measured on this GPU (else the start's)."""
    calibration_pairs: int
    """The pairs the calibration designed (the record's first rows; 0 without calibration)."""
    constants: dict[str, float]
    """The fitted constants the model's features are priced with."""
    model: str
    objective: str


@dataclass
class State:
    """Every pair asked so far: ``values`` TFLOPS (NaN: not measured), ``tried`` asked at all;
    ``runs`` the pairs that can run at all (:meth:`~ckspace.training.measurer.Measurer.runs`):
    the others are never asked."""

    problems: tuple[ConvProblem, ...]
    weights: np.ndarray
    configs: tuple[GemmConfig, ...]
    values: np.ndarray
    tried: np.ndarray
    runs: np.ndarray
    built: list[int] = field(default_factory=list)

    @classmethod
    def empty(
        cls,
        problems: tuple[ConvProblem, ...],
        weights: np.ndarray,
        configs: tuple[GemmConfig, ...],
        runs: np.ndarray | None = None,
    ) -> State:
        shape = (len(problems), len(configs))
        runs = np.ones(shape, dtype=bool) if runs is None else runs
        return cls(problems, weights, configs, np.full(shape, np.nan), np.zeros(shape, dtype=bool), runs)

    @property
    def askable(self) -> np.ndarray:
        """The pairs not asked yet that can run."""
        return ~self.tried & self.runs

    def note(self, p: int, k: int, tflops: float | None) -> None:
        if k not in self.built:
            self.built.append(k)
        self.tried[p, k] = True
        if tflops is not None:
            self.values[p, k] = tflops

    @property
    def pairs(self) -> int:
        return int(self.tried.sum())

    def seconds(self, costs: Costs) -> float:
        return len(self.built) * costs.build + self.pairs * costs.pair


def measurement_row(p: int, problem: ConvProblem, config: GemmConfig, tflops: float | None, m: Measurer) -> dict:
    """The record's row of one pair, in bench's schema: ``ok`` with its TFLOPS and the latency they
    imply, or ``failed`` with why there is no measurement."""
    latency = problem.flops / (tflops * 1e12) * 1e3 if tflops is not None else None
    row = dict.fromkeys(COLUMNS, "")
    row.update(
        kernel=config.name,
        problem_idx=str(p),
        **problem_cells(problem),
        **config_cells(config),
        latency_ms="" if latency is None else repr(latency),
        tflops="" if tflops is None else repr(tflops),
        status="ok" if tflops is not None else "failed",
        device_name=m.device_name,
        detail="" if tflops is not None else m.not_measured,
        ckspace_version=__version__,
    )
    return row


def read_record(path: Path, state: State) -> None:
    """The pairs of an existing record into ``state``, in its row order. Rows of ``ok`` status are
    measurements; any other status is a pair asked and not measured. The rows' problems were checked
    by whoever opened the record; a kernel the measurer cannot build is a record of another run."""
    column = {c.kernel_key(): k for k, c in enumerate(state.configs)}
    for line, row in enumerate(csv.DictReader(io.StringIO(read_input_text(path, "record"), newline="")), start=2):
        k = column.get(config_from_row(row).kernel_key())
        if k is None:
            raise CkspaceError(
                f"{path} line {line}: kernel {row['kernel']} is not one the measurer can build; "
                "this record is of another run, give another --out"
            )
        note = float(row["tflops"]) if row["status"] == "ok" else None
        state.note(int(row["problem_idx"]), k, note)


def initial_plan(log2_model: np.ndarray, state: State, settings: LearnSettings) -> list[tuple[int, int]]:
    """Round 1 (see the module doc): each chosen kernel on each chosen problem it can run."""
    top3 = np.argsort(-np.where(state.runs, log2_model, -np.inf), axis=1, kind="stable")[:, :3]
    covered = np.zeros(len(state.problems), dtype=bool)
    kernels: list[int] = []
    for _ in range(min(settings.initial_kernels, len(state.configs))):
        gain = [
            -1.0 if k in kernels else float(state.weights[~covered & (top3 == k).any(axis=1)].sum())
            for k in range(len(state.configs))
        ]
        k = int(np.argmax(gain))
        kernels.append(k)
        covered |= (top3 == k).any(axis=1)
    by_flops = np.argsort([p.flops for p in state.problems], kind="stable")
    spread = np.linspace(0, len(by_flops) - 1, min(settings.initial_problems, len(by_flops)))
    problems = list(dict.fromkeys(by_flops[np.round(spread).astype(int)].tolist()))
    return [(p, k) for k in kernels for p in problems if state.runs[p, k]]


@dataclass
class Loop:
    """One run of the loop over a workload (see the module doc)."""

    measurer: Measurer
    record: Record
    state: State
    budget: Budget
    settings: LearnSettings
    seed: int
    threads: int
    per_problem: list[np.ndarray]
    round_path: Path

    @property
    def costs(self) -> Costs:
        return Costs(self.measurer.build_seconds, self.measurer.pair_seconds)

    def data(self) -> Measurements:
        """The state as the matrix the fitting functions take (every workload problem)."""
        s = self.state
        measured = int(np.count_nonzero(~np.isnan(s.values)))
        report = CleaningReport(
            files={str(self.record.path): ""},
            rows_read=s.pairs,
            rows_kept=measured,
            dropped={"not_measured": s.pairs - measured},
            problems=len(s.problems),
            groups=len({p.text() for p in s.problems}),
            kernels=len(s.configs),
            problems_dropped=0,
        )
        cell = s.configs[0]
        groups = tuple(p.text() for p in s.problems)
        names = tuple(c.name for c in s.configs)
        return Measurements(cell.arch, cell.variant, cell.dtype, s.problems, groups, names, s.configs, s.values, report)

    def estimate(self) -> Estimate:
        """This state's estimate (:mod:`ckspace.training.acquisition`), seeded by the seed and the
        pairs asked so far: a resumed run estimates exactly what an unbroken one did."""
        s = self.state
        data = self.data()
        fitted = np.count_nonzero((~np.isnan(s.values)).sum(axis=1) >= 2)
        measured_groups = {g for g, v in zip(data.groups, s.values, strict=True) if not np.all(np.isnan(v))}
        enough = self.settings.fit_problems is not None and fitted >= self.settings.fit_problems
        if enough and len(measured_groups) >= 2:
            mu, residual = regressor_mu(data, self.per_problem, self.seed, self.threads)
            source, level = "lightgbm", 1.0
        else:
            mu, level = analytical_mu(self.log2_model(), s.values)
            residual, source = np.log(s.values) - mu, "analytical"
        sigma = centred_sigma(residual)
        mu = shifted(mu, s.values)
        failed = s.tried & np.isnan(s.values)
        lost = (failed.sum(axis=1) >= LOST_AFTER) & ~(s.tried & ~failed).any(axis=1)
        failed[lost] = True
        failed |= ~s.runs  # neither picked nor timed, and no sign that a problem cannot run
        rng = np.random.default_rng([self.seed, s.pairs])
        regret, value = lookahead(mu, sigma, s.values, failed, rng, self.settings.samples)
        weights = np.where(lost, 0.0, s.weights)
        weights = weights / weights.sum() if weights.any() else weights
        return Estimate(source, level, sigma, mu, regret, value * weights[:, None], weights)

    def calibrate(self, start: dict[str, float]) -> tuple[dict[str, float], int]:
        """The analytical model's constants measured on this GPU: the pairs of the sequential design
        (:func:`~ckspace.training.calibration.sequential_pairs`, among the pairs that can run, on
        at most the kernel budget's kernels), measured through :meth:`execute` within the budgets,
        then the grid's best fit to them. The design's answers come from the state, which holds the
        record: a resumed run chooses the same pairs, measures none of them twice and fits the same
        constants. Returns the constants and the number of pairs designed."""
        s = self.state
        began = time.monotonic()
        chosen = design_problems(s.problems, len(s.configs), grid_size(CALIBRATION_PER_OCTAVE))
        log.log(
            NOTICE,
            "calibration: scoring %d problems x %d kernels under %d values of the constants",
            len(chosen),
            len(s.configs),
            grid_size(CALIBRATION_PER_OCTAVE),
        )
        grid = PlausibleGrid(self.data().subset(chosen), start, CALIBRATION_PER_OCTAVE, runs=s.runs[chosen])
        rows = np.arange(len(chosen))

        def measure(pairs: list[tuple[int, int]]) -> np.ndarray:
            self.execute(RoundPlan(round=0, pairs=[(int(chosen[p]), s.configs[k].name) for p, k in pairs]))
            measured = np.unique([p for p, _ in pairs])
            out = np.full((len(measured), len(s.configs)), np.nan)
            where = {p: i for i, p in enumerate(measured)}
            for p, k in pairs:
                out[where[p], k] = s.values[chosen[p], k]
            return out

        flops = [s.problems[p].flops for p in chosen]
        pairs = sequential_pairs(grid, rows, flops, measure, max_kernels=self.budget.kernels)
        constants = fit_constants(grid, rows, pairs, measure(pairs))
        fitted = ", ".join(f"{name} {value:.4g} (start {start[name]:.4g})" for name, value in constants.items())
        log.log(
            NOTICE,
            "calibration: %d pairs (%d measured) fit %s; %d grid points in %.0f s",
            len(pairs),
            int(sum(not np.isnan(s.values[chosen[p], k]) for p, k in pairs)),
            fitted,
            len(grid.points),
            time.monotonic() - began,
        )
        return constants, len(pairs)

    def log2_model(self) -> np.ndarray:
        column = FEATURE_NAMES.index(ANALYTICAL_FEATURE)
        return np.vstack([m[:, column] for m in self.per_problem])

    def plan(self, number: int, estimate: Estimate | None) -> RoundPlan:
        """The batch of round ``number``: the covering round without an estimate, else the least
        sure problems' contenders (:func:`~ckspace.training.acquisition.contender_pairs`, the
        default) or the most value per second (:func:`~ckspace.training.acquisition.choose_pairs`)."""
        s = self.state
        if estimate is None:
            pairs = initial_plan(self.log2_model(), s, self.settings)
        elif self.settings.contenders is not None:
            allowed = np.zeros(len(s.configs), dtype=bool)
            allowed[s.built] = True
            if len(s.built) < self.budget.kernels:
                allowed[:] = True
            regret = estimate.regret * estimate.weights
            pairs = contender_pairs(
                estimate.mu, regret, s.askable, allowed, self.settings.round_pairs, self.settings.contenders
            )
        else:
            new = min(self.settings.round_kernels, max(0, self.budget.kernels - len(s.built)))
            pairs = choose_pairs(estimate.value, s.built, s.askable, new, self.settings.round_pairs, self.costs)
        return RoundPlan(round=number, pairs=[(p, s.configs[k].name) for p, k in pairs])

    def execute(self, plan: RoundPlan) -> None:
        """Measure the plan's pairs not asked yet, a kernel's consecutive pairs in one call, within
        the budgets; each answer is appended to the record as it comes."""
        s = self.state
        index = {c.name: k for k, c in enumerate(s.configs)}
        todo = [(p, index[name]) for p, name in plan.pairs if not s.tried[p, index[name]]]
        while todo and s.pairs < self.budget.pairs:
            k = todo[0][1]
            run = [p for p, kk in _leading(todo, k)]
            todo = todo[len(run) :]
            if k not in s.built:
                if len(s.built) >= self.budget.kernels:
                    continue
                self.measurer.build([s.configs[k]])
            run = run[: self.budget.pairs - s.pairs]
            answers = self.measurer.measure([(s.problems[p], s.configs[k]) for p in run])
            for p, tflops in zip(run, answers, strict=True):
                self.record.append(measurement_row(p, s.problems[p], s.configs[k], tflops, self.measurer))
                s.note(p, k, tflops)

    def pending(self) -> RoundPlan | None:
        """The round a previous run planned and did not finish, if any."""
        if not self.round_path.exists():
            return None
        return read_json_model(RoundPlan, self.round_path, "round file")

    def say(self, plan: RoundPlan, estimate: Estimate) -> None:
        s = self.state
        log.log(
            NOTICE,
            "round %d: %d/%d kernels built, %d/%d pairs timed (%d not measured), %s estimate "
            "(sigma %.3f), estimated mean regret %.2f %%, %.0f s of builds and timing",
            plan.round,
            len(s.built),
            self.budget.kernels,
            s.pairs,
            self.budget.pairs,
            int(np.count_nonzero(s.tried & np.isnan(s.values))),
            estimate.source,
            estimate.sigma,
            100.0 * estimate.mean_regret(),
            s.seconds(self.costs),
        )

    def run(self) -> tuple[int, Estimate | None, str]:
        """Rounds until a stop; returns the rounds done, the last estimate and why it stopped."""
        s, plan = self.state, self.pending()
        number = 0
        if plan is not None:
            number = plan.round
            self.execute(plan)
        estimate = self.estimate() if s.pairs else None
        while True:
            if estimate is not None and plan is not None:
                self.say(plan, estimate)
            stop = self.stop(estimate)
            if stop:
                return number, estimate, stop
            number += 1
            plan = self.plan(number, estimate)
            if not plan.pairs:
                return number - 1, estimate, "no pair is worth timing"
            write_atomic(self.round_path, (plan.model_dump_json() + "\n").encode(), "round file")
            self.execute(plan)
            estimate = self.estimate()

    def stop(self, estimate: Estimate | None) -> str:
        """Why the loop stops now ('' to go on)."""
        s, b = self.state, self.budget
        if s.pairs >= b.pairs:
            return "pairs budget"
        if len(s.built) >= b.kernels and not s.askable[:, s.built].any():
            return "kernels budget"
        if estimate is not None and b.target_regret is not None and estimate.mean_regret() < b.target_regret:
            return "target regret"
        return ""


def _leading(todo: list[tuple[int, int]], k: int) -> list[tuple[int, int]]:
    """The pairs of kernel ``k`` at the head of ``todo``."""
    out = []
    for pair in todo:
        if pair[1] != k:
            break
        out.append(pair)
    return out


def learn(
    measurer: Measurer,
    record: Record,
    problems: tuple[ConvProblem, ...],
    weights: np.ndarray,
    budget: Budget,
    out: Path,
    seed: int = 0,
    settings: LearnSettings | None = None,
    num_threads: int | None = None,
    command: str = "",
) -> LearnReport:
    """Run the loop (see the module doc) with ``record`` (its existing rows resume it), then train
    the model into ``out``, which holds the record and the round file as well."""
    configs = measurer.kernels()
    record = measurer.record(record)
    state = State.empty(problems, weights, configs, measurer.runs(problems))
    read_record(record.path, state)
    if state.built:  # a resumed run's measurer has built nothing yet (a GPU one finds them cached)
        measurer.build([configs[k] for k in state.built])
    threads = thread_count(num_threads)
    settings = settings or LearnSettings()
    loop = Loop(measurer, record, state, budget, settings, seed, threads, [], Path(out) / ROUND_FILE)
    cell = configs[0]
    start_facts = performance.calibrated_facts(hardware_facts(cell.arch), settings.start)
    start = {name: performance.constant(name, start_facts) for name in FITTED}
    known = cell.arch == SHIPPED_FROM or bool(settings.start)  # the start is this GPU's already
    calibrate = settings.calibrate if settings.calibrate is not None else not known
    constants, designed = loop.calibrate(start) if calibrate else (dict(settings.start), 0)
    hw = performance.calibrated_facts(hardware_facts(cell.arch), constants)
    loop.per_problem = problem_features(loop.data(), hw=hw)
    rounds, estimate, stopped = loop.run()
    log.log(NOTICE, "stopped after round %d: %s; training the model on %d pairs", rounds, stopped, state.pairs)
    data = load_measurements([record.path], cell.arch, cell.variant, cell.dtype)
    card, _ = train_anchored(loop.data(), data, loop.per_problem, Path(out), seed, command, threads, constants)
    return LearnReport(
        rounds=rounds,
        kernels_built=len(state.built),
        pairs_timed=state.pairs,
        pairs_not_measured=int(np.count_nonzero(state.tried & np.isnan(state.values))),
        measurement_seconds=state.seconds(loop.costs),
        estimate_source=estimate.source if estimate is not None else "none",
        estimated_mean_regret=estimate.mean_regret() if estimate is not None else None,
        stopped_by=stopped,
        calibrated=calibrate,
        calibration_pairs=designed,
        constants={name: performance.constant(name, hw) for name in FITTED},
        model=str(out),
        objective=card.objective,
    )
