"""LightGBM training on clean measurements: design matrices, objectives, fitting.

Two objectives are supported and compared by :mod:`ckspace.training.evaluation`:

* ``regression``: L2 regression on log TFLOPS. Its output is a TFLOPS prediction, which is what
  ``select`` reports beside each candidate.
* ``lambdarank``: LightGBM's per-problem ranking objective, with graded relevance from each
  kernel's efficiency (its TFLOPS over the problem's best). It orders kernels but predicts no
  TFLOPS.

Thread count: every LightGBM call (fit and predict) is given ``num_threads`` explicitly, bounded by
:func:`default_threads` unless the caller says otherwise. With ``deterministic`` and
``force_row_wise`` the trees do not depend on it (checked: 1, 2 and 4 threads give the same model
text, parameters aside), so it changes the time only.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np

from ckspace.core.errors import InvalidChoiceError, InvalidInputError
from ckspace.environment.cpus import available_cpus
from ckspace.features.hardware import HardwareFacts, hardware_facts
from ckspace.features.matrix import FEATURE_NAMES, ConfigTable, feature_matrix
from ckspace.training.dataset import Measurements

log = logging.getLogger(__name__)

OBJECTIVES = ("regression", "lambdarank")
RELEVANCE_LEVELS = 16
"""Graded relevance for lambdarank: efficiency 1.0 is the top grade, each grade 2.5 % lower."""
RELEVANCE_STEP = 0.025

BASE_PARAMS: dict[str, object] = {
    "learning_rate": 0.1,
    "num_leaves": 15,
    "min_data_in_leaf": 20,
    "feature_fraction": 0.8,
    "bagging_fraction": 0.8,
    "bagging_freq": 1,
    "lambda_l2": 1.0,
    "deterministic": True,
    "force_row_wise": True,
    "verbosity": -1,
}
"""Parameters of every fit; ``num_threads`` is added per call (see :func:`default_threads`)."""
NUM_ROUNDS = 150
"""Boosting rounds of every fit (read at each call: tests lower it to train in seconds)."""
MAX_DEFAULT_THREADS = 4
"""The most threads a fit uses unless told otherwise: a cell's data are a few thousand rows of a few
dozen features, so each boosting round's work is short and threads beyond about four add more
synchronisation than they take off the split search."""


def default_threads() -> int:
    """The threads LightGBM may use when the caller names none: :func:`available_cpus`, at most
    :data:`MAX_DEFAULT_THREADS`. Bounded because more OpenMP threads than cores oversubscribe:
    they spin and preempt each other, and on a loaded machine a fit then costs many times its CPU
    time; LightGBM's own default (every core OpenMP sees) does exactly that."""
    return min(MAX_DEFAULT_THREADS, available_cpus())


def thread_count(num_threads: int | None) -> int:
    """The threads to use: :func:`default_threads` for None, else ``num_threads`` if it is a whole
    number of threads, 1 or more; LightGBM reads 0 or less as "OpenMP's default" (every core),
    which is the oversubscription the bound is there to prevent."""
    if num_threads is None:
        return default_threads()
    if isinstance(num_threads, bool) or not isinstance(num_threads, int) or num_threads < 1:
        raise InvalidInputError(f"num_threads {num_threads!r}: give a whole number of threads, 1 or more")
    return num_threads


@dataclass(frozen=True)
class Design:
    """Rows of (problem, kernel) pairs with a measurement, in problem order."""

    features: np.ndarray  # (rows, features)
    log_tflops: np.ndarray  # (rows,)
    efficiency: np.ndarray  # (rows,) TFLOPS over the problem's best
    problem: np.ndarray  # (rows,) problem index
    kernel: np.ndarray  # (rows,) kernel index
    group_sizes: np.ndarray  # rows per problem, in order


def problem_features(
    data: Measurements, table: ConfigTable | None = None, hw: HardwareFacts | None = None
) -> list[np.ndarray]:
    """The feature matrix of every problem with every kernel of ``data`` (all kernels, measured or
    not), priced with ``hw`` (default: the arch's spec sheet and the shipped constants; ``learn``
    passes the constants it measured)."""
    hw = hw if hw is not None else hardware_facts(data.arch)
    table = table or ConfigTable.build(data.configs, hw)
    return [feature_matrix(p, data.variant, data.dtype, table, hw) for p in data.problems]


def design(data: Measurements, per_problem: list[np.ndarray] | None = None) -> Design:
    per_problem = per_problem if per_problem is not None else problem_features(data)
    feats, logs, effs, probs, kerns, sizes = [], [], [], [], [], []
    for p, matrix in enumerate(per_problem):
        measured = ~np.isnan(data.tflops[p])
        values = data.tflops[p, measured]
        feats.append(matrix[measured])
        logs.append(np.log(values))
        effs.append(values / values.max())
        probs.append(np.full(values.size, p))
        kerns.append(np.flatnonzero(measured))
        sizes.append(values.size)
    return Design(
        np.vstack(feats),
        np.concatenate(logs),
        np.concatenate(effs),
        np.concatenate(probs),
        np.concatenate(kerns),
        np.asarray(sizes),
    )


def relevance(efficiency: np.ndarray) -> np.ndarray:
    """Integer grades for lambdarank (higher is better)."""
    grade = RELEVANCE_LEVELS - 1 - np.floor((1.0 - efficiency) / RELEVANCE_STEP)
    return np.clip(grade, 0, RELEVANCE_LEVELS - 1).astype(int)


def params_for(objective: str, seed: int, num_threads: int | None = None) -> dict[str, object]:
    """LightGBM's parameters for ``objective`` (``num_threads``: default :func:`default_threads`)."""
    if objective not in OBJECTIVES:
        raise InvalidChoiceError("objective", objective, OBJECTIVES)
    params = {**BASE_PARAMS, "seed": seed, "num_threads": thread_count(num_threads)}
    if objective == "regression":
        params["objective"] = "regression"
    else:
        params.update(
            objective="lambdarank",
            lambdarank_truncation_level=10,
            eval_at=[1, 5],
            label_gain=[float(2**i - 1) for i in range(RELEVANCE_LEVELS)],
        )
    return params


def fit(rows: Design, objective: str, seed: int = 0, num_rounds: int | None = None, num_threads: int | None = None):
    """Train a booster on ``rows`` (``num_rounds``, default :data:`NUM_ROUNDS`; ``num_threads``,
    default :func:`default_threads`, which changes the time, not the trees); returns a
    ``lightgbm.Booster``."""
    import lightgbm as lgb

    num_rounds = NUM_ROUNDS if num_rounds is None else num_rounds
    params = params_for(objective, seed, num_threads)
    if objective == "regression":
        dataset = lgb.Dataset(rows.features, label=rows.log_tflops, feature_name=list(FEATURE_NAMES))
    else:
        dataset = lgb.Dataset(
            rows.features, label=relevance(rows.efficiency), group=rows.group_sizes, feature_name=list(FEATURE_NAMES)
        )
    log.info(
        "training %s on %d rows of %d problems, %d threads",
        objective,
        len(rows.log_tflops),
        len(rows.group_sizes),
        params["num_threads"],
    )
    return lgb.train(params, dataset, num_boost_round=num_rounds)
