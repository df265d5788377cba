"""A workload (problems with weights) and the selector's predictions for it: the input of a plan.

Problems come as CSV in the format of the problem lists MIOpen and upstream publish: a row per
convolution with N, G, total C and K, spatial sizes and filter sizes, and optional stride, pad and
dilation columns, for all dimensions or per dimension (``stride``, ``stride_h``, ``pad_d``, ...),
read as ``--problem`` reads its keys (:mod:`ckspace.workloads.problem_columns` refuses a column it would
misread, in one line). A row is 3D when an ``ndim`` column
says so or when its depth columns (Di, Z, stride_d, pad_d, dil_d) are not the neutral 1/1/1/0/1
those lists write for 2D shapes; else 2D. Identical problems are merged, their weights added, so a
list that repeats a shape weighs it more (as a weight column does).

:func:`predicted_instance` turns a workload and a candidate registry into a
:class:`~ckspace.planning.plan.PlanInstance` with the selector's two models, each used for what it
is for: the *ranker's* score orders the candidates of a problem (the pick inside any set is the
first of that order, as :meth:`Selector.select` picks), and the *regressor's* predicted TFLOPS,
as the selector's list shows them (capped at the kernel ranked above:
:func:`~ckspace.planning.plan.shown_tflops`), give the value: a pick's efficiency is its shown
TFLOPS over the registry's best shown (the top-ranked kernel's) for that problem. Both come from
:meth:`Selector.score_table`, the rule select uses: a kernel outside the model's training domain
is estimated through its nearest seen sibling and the analytical model. Without a model both come
from the analytical performance model.
"""

from __future__ import annotations

import csv
import io
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ckspace.core.config import GemmConfig
from ckspace.core.errors import CkspaceError, InvalidInputError
from ckspace.core.vocab import ScoreSource, Variant
from ckspace.environment.inputs import read_input_text
from ckspace.planning.plan import PlanInstance, shown_tflops
from ckspace.select.candidates import Candidate
from ckspace.select.selector import Selector
from ckspace.workloads.problem import ConvProblem
from ckspace.workloads.problem_columns import ProblemColumns

log = logging.getLogger(__name__)

_DEPTH_NEUTRAL = {"Di": 1, "Z": 1, "stride_d": 1, "pad_d": 0, "dil_d": 1}


@dataclass(frozen=True)
class Workload:
    """Distinct problems in first-seen order with their summed weights, and where they came from."""

    problems: tuple[ConvProblem, ...]
    weights: np.ndarray
    rows: int
    weight_column: str | None
    skipped: tuple[str, ...]
    """Rows that describe no convolution (e.g. a filter larger than the padded input: real lists
    hold a few), each as "line N: why"; they are left out and reported, not guessed at."""


def read_workload(path: Path, variant: Variant, weight_column: str | None = None) -> Workload:
    """The problems of a CSV (see the module docstring); bad rows are errors naming the row, and a
    file that is no CSV text (:func:`~ckspace.environment.inputs.read_input_text`) is one line naming it.
    Columns are read as ``--problem`` reads keys (:class:`~ckspace.workloads.problem_columns.ProblemColumns`)."""
    reader = csv.DictReader(io.StringIO(read_input_text(path, "--problems"), newline=""))
    try:
        layout = ProblemColumns.of_problems_header(reader.fieldnames, path)
        if weight_column is not None and weight_column not in (reader.fieldnames or ()):
            raise CkspaceError(
                f"{path}: no weight column {weight_column!r}; columns: {', '.join(reader.fieldnames or ())}"
            )
        merged: dict[ConvProblem, float] = {}
        skipped: list[str] = []
        rows = 0
        for number, row in enumerate(reader, start=2):
            rows += 1
            layout.check_width(row, number)
            direction = (row.get("direction") or "").strip()
            if direction and direction != variant.value:
                raise CkspaceError(f"{path}: line {number} is a {direction} problem; the plan is for {variant.value}")
            weight = _weight(row, weight_column, path, number)
            try:
                problem = layout.problem(row, number, _ndim_of)
            except InvalidInputError as exc:
                skipped.append(f"line {number}: {str(exc).rpartition(': ')[2]}")
                continue
            merged[problem] = merged.get(problem, 0.0) + weight
    except csv.Error as exc:  # e.g. a field longer than the csv module reads
        raise InvalidInputError(f"--problems {str(path)!r} is not a CSV file ({exc})") from None
    if not merged:
        raise CkspaceError(f"{path}: no problems" + (f" ({skipped[0]})" if skipped else ""))
    if skipped:
        log.warning("%s: %d row(s) describe no convolution and are left out (%s)", path, len(skipped), skipped[0])
    weights = np.asarray(list(merged.values()))
    if not weights.any():
        raise CkspaceError(
            f"{path}: every weight in column {weight_column!r} is 0: no problem counts, so every plan "
            "is as good as any other; give some problem a positive weight"
        )
    return Workload(tuple(merged), weights, rows, weight_column, tuple(skipped))


def _ndim_of(values: dict[str, int]) -> int:
    """A problem list row's dimension count when it has no ``ndim`` cell: 3D when a depth cell is
    not the neutral value 2D lists write, else 2D, whose neutral depth cells are dropped."""
    if any(values.get(k, neutral) != neutral for k, neutral in _DEPTH_NEUTRAL.items()):
        return 3
    for key in _DEPTH_NEUTRAL:
        values.pop(key, None)
    return 2


def _weight(row: dict[str, str], column: str | None, path: Path, line: int) -> float:
    if column is None:
        return 1.0
    text = (row.get(column) or "").strip()
    try:
        weight = float(text)
    except ValueError:
        raise CkspaceError(f"{path}: line {line}: weight {column}={text!r} is not a number") from None
    if not np.isfinite(weight) or weight < 0:
        raise CkspaceError(f"{path}: line {line}: weight {column}={text!r} must be finite and not negative")
    return weight


@dataclass(frozen=True)
class Predictions:
    """The instance over ``kernels`` (the registry's candidates, then the vector variants its
    fallbacks reach: ``registry`` of them are candidates) and, per problem and item of its order,
    the predicted TFLOPS; ``best_tflops`` per problem."""

    instance: PlanInstance
    kernels: tuple[str, ...]
    registry: int
    tflops: tuple[np.ndarray, ...]
    best_tflops: np.ndarray
    source: ScoreSource
    configs: tuple[GemmConfig, ...] = ()
    """The kernels themselves, in ``kernels``' order (``kernels`` are their names)."""
    extrapolated: tuple[str | None, ...] = ()
    """Per kernel, why the model extrapolates for it (None: inside its domain, or no model)."""


def predicted_instance(
    selector: Selector, candidates: Sequence[Candidate], workload: Workload, advance: Callable[[], None] | None = None
) -> Predictions:
    """Every (problem, kernel) pair that can run, scored in one batch per problem.

    The items are kernels to build: the registry's candidates, plus each vector variant the
    selector's fallbacks reach for a problem of the workload (a candidate failing only on vector
    alignment runs through its family's widest variant that passes, :meth:`Selector.runnable`).
    A library runs a problem with the kernels it holds, and its dispatcher falls back only to
    those, so an item runs a problem as it is: a variant is chosen, and counted, like any kernel."""
    prepared = selector.prepare(candidates)
    configs = _items(selector, prepared, workload)
    universe = selector.prepare(configs)
    order, value, tflops, best = [], [], [], []
    for problem in workload.problems:
        ranked = _ranked(selector, problem, universe)
        for column, entry in zip((order, value, tflops, best), ranked, strict=True):
            column.append(entry)
        if advance is not None:
            advance()
    instance = PlanInstance(len(configs), tuple(order), tuple(value), workload.weights)
    support = universe.support_of()
    return Predictions(
        instance,
        tuple(c.name for c in configs),
        len(prepared.names),
        tuple(tflops),
        np.asarray(best),
        selector.source,
        tuple(configs),
        support.reasons if support is not None else (None,) * len(configs),
    )


def _items(selector: Selector, prepared, workload: Workload) -> list:
    """The registry's configs, then each vector variant the selector's fallbacks reach for a problem
    of the workload (in the order first reached): a library's dispatcher falls back only to kernels
    it holds, so a variant the plan relies on must be an item it chooses and counts."""
    configs = list(prepared.table.configs)
    known = {c.name for c in configs}
    for problem in workload.problems:
        _, fallback = selector.runnable(problem, prepared)
        if fallback.size:
            variant_configs = prepared.variants()[0].table.configs
            for j in fallback[:, 1].tolist():
                if variant_configs[j].name not in known:
                    known.add(variant_configs[j].name)
                    configs.append(variant_configs[j])
    return configs


def _ranked(selector: Selector, problem, universe) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    """One problem's feasible items in the selector's order, with their values relative to the first
    and their shown TFLOPS: the plan's pick inside a set must be the one ``select`` would make, and
    its efficiency the one ``select`` would show (empty for a problem no item runs)."""
    index = np.flatnonzero(selector.feasible(problem, universe))
    if index.size == 0:
        return index, np.empty(0), np.empty(0), 0.0
    scored = selector.score_table(problem, universe.table.take(index), universe.support_of(index))
    predicted = selector.predicted_tflops(scored, np.arange(index.size))
    ranked = np.argsort(-scored.scores, kind="stable")  # item order breaks ties, as select does
    shown = shown_tflops(predicted[ranked]) if selector.source is ScoreSource.MODEL else predicted[ranked]
    return index[ranked], shown / shown[0], shown, float(shown[0])
