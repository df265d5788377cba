"""What turns a problem's feature rows into scores: one interface (:class:`Scorer`), one class per engine.

Why an interface: the selector's rule (:meth:`ckspace.select.selector.Selector.score_table`: the
domain, the extrapolation through a sibling, the vector rule, the TFLOPS shown) is the same whatever
computes the numbers, and so is the C dispatcher's. Only four things differ between engines, and a
:class:`Scorer` states exactly those:

* :meth:`Scorer.feature_matrix`: the features of one problem with every row of a config table
  (Python's :func:`~ckspace.features.matrix.assemble`, or the same formulas compiled to C);
* :meth:`Scorer.scores`: one score per feature row, higher is better;
* :attr:`Scorer.score_per_log2_tflops`: the scores' unit -- how much a score rises when the
  TFLOPS double. The selector moves an extrapolated kernel's score by the analytical log2 ratio
  times this, and the vector rule caps in the same unit, so a scorer whose scores are not log2
  TFLOPS says how far they are from it (a ranker's, measured on its training data);
* :meth:`Scorer.log_tflops`: the predicted natural-log TFLOPS of feature rows where the engine has
  a regressor, None where it has not (the selector then states the analytical model's TFLOPS,
  calibrated).

The engines here: :class:`CompiledScorer` (the model's trees compiled to C,
:mod:`ckspace.select.compiled`), :class:`LightGBMScorer` (the same trees through LightGBM's C API,
:class:`FastPredictor`) and :class:`AnalyticalScorer` (the analytical performance model's feature:
no model). :func:`model_scorer` picks between the first two for ``Selector.load``'s ``engine``. A
new model (say one whose prior is the analytical model as a formula rather than as trees) is one
more subclass, handed to :class:`~ckspace.select.selector.Selector`; nothing else changes.
"""

from __future__ import annotations

import ctypes
import logging
from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any

import numpy as np

from ckspace.constraints.rulebook.problem_rules import problem_values
from ckspace.core.errors import InvalidInputError
from ckspace.core.vocab import Dtype, Engine, ScoreSource, Variant
from ckspace.features.hardware import HardwareFacts
from ckspace.features.matrix import (
    ANALYTICAL_FEATURE,
    FEATURE_NAMES,
    PROBLEM_VALUES,
    ConfigTable,
    assemble,
    feature_formulas,
    feature_program,
)
from ckspace.select.compiled import CompiledSelector, host_c_compiler
from ckspace.select.store import RANKER_FILE, TFLOPS_FILE, ModelCard, model_texts
from ckspace.workloads.problem import ConvProblem

log = logging.getLogger(__name__)

ANALYTICAL_COLUMN = FEATURE_NAMES.index(ANALYTICAL_FEATURE)
"""The column of the analytical model's log2 TFLOPS in a feature matrix."""


class SelectorError(InvalidInputError):
    """Bad input to the selector: no candidates, a candidate of another cell, a bad ``k``, a
    model of another cell, an engine this machine cannot run (a ``ValueError`` too). Raised here
    and by :mod:`ckspace.select.selector`, which exports it."""


class Scorer(ABC):
    """Feature rows to scores for one cell (variant, dtype, hardware): what an engine must answer
    for the selector to rank with it (the module says why these four)."""

    engine: Engine
    """What computes the scores (``Selector.engine``)."""
    source: ScoreSource
    """Where the scores come from: a model trained on measurements (``model``: it has a training
    domain, outside which the selector extrapolates) or the analytical model (``analytical``)."""

    def __init__(self, variant: Variant, dtype: Dtype, hw: HardwareFacts, score_per_log2_tflops: float) -> None:
        self.score_per_log2_tflops = score_per_log2_tflops
        """Score units per doubling of TFLOPS (1 for scores that are log2 TFLOPS)."""
        self._program = feature_program(variant, dtype, hw)
        self.hw = hw
        """The facts the features are priced with (a model's: its card's measured constants)."""

    def feature_matrix(self, problem: ConvProblem, table: ConfigTable) -> np.ndarray:
        """The features of ``problem`` with every row of ``table`` (C-contiguous float64, one row
        per config, :data:`~ckspace.features.matrix.FEATURE_NAMES` columns); ``table`` priced with
        the same facts."""
        table.check_priced(self.hw)
        return assemble(self._program, problem_values(problem), table)

    @abstractmethod
    def scores(self, matrix: np.ndarray) -> np.ndarray:
        """One score per row of ``matrix`` (higher is better), in :attr:`score_per_log2_tflops` units."""

    def log_tflops(self, matrix: np.ndarray) -> np.ndarray | None:
        """The predicted natural-log TFLOPS of each row of ``matrix``; None: no regressor."""
        return None


class AnalyticalScorer(Scorer):
    """The analytical performance model (:mod:`ckspace.features.performance`): its log2 TFLOPS, a
    column of the feature matrix, is the score. What a cell without a shipped model ranks by."""

    engine = Engine.ANALYTICAL
    source = ScoreSource.ANALYTICAL

    def __init__(self, variant: Variant, dtype: Dtype, hw: HardwareFacts) -> None:
        super().__init__(variant, dtype, hw, 1.0)

    def scores(self, matrix: np.ndarray) -> np.ndarray:
        return matrix[:, ANALYTICAL_COLUMN].copy()


class LightGBMScorer(Scorer):
    """A model's ranker and TFLOPS regressor (LightGBM boosters) called through LightGBM's C API."""

    engine = Engine.LIGHTGBM
    source = ScoreSource.MODEL

    def __init__(
        self,
        variant: Variant,
        dtype: Dtype,
        hw: HardwareFacts,
        ranker: Any,
        regressor: Any,
        score_per_log2_tflops: float,
        num_threads: int = 1,
    ) -> None:
        super().__init__(variant, dtype, hw, score_per_log2_tflops)
        self._rank = FastPredictor(ranker, num_threads)
        self._log_tflops = FastPredictor(regressor, num_threads)

    def scores(self, matrix: np.ndarray) -> np.ndarray:
        return self._rank(matrix)

    def log_tflops(self, matrix: np.ndarray) -> np.ndarray:
        return self._log_tflops(matrix)


class CompiledScorer(Scorer):
    """A model's features and trees compiled to C (:class:`~ckspace.select.compiled.CompiledSelector`):
    the same scores as :class:`LightGBMScorer` (tests compare them), ~7x faster for a few dozen rows."""

    engine = Engine.COMPILED
    source = ScoreSource.MODEL

    def __init__(
        self,
        variant: Variant,
        dtype: Dtype,
        hw: HardwareFacts,
        compiled: CompiledSelector,
        score_per_log2_tflops: float,
    ) -> None:
        super().__init__(variant, dtype, hw, score_per_log2_tflops)
        self.compiled = compiled

    def feature_matrix(self, problem: ConvProblem, table: ConfigTable) -> np.ndarray:
        table.check_priced(self.hw)
        values = np.fromiter(
            (getattr(problem, name) for name in PROBLEM_VALUES), dtype=np.float64, count=len(PROBLEM_VALUES)
        )
        return self.compiled.feature_matrix(values, table)

    def scores(self, matrix: np.ndarray) -> np.ndarray:
        return self.compiled.rank(matrix)

    def log_tflops(self, matrix: np.ndarray) -> np.ndarray:
        return self.compiled.log_tflops(matrix)


def model_scorer(
    engine: str,
    variant: Variant,
    dtype: Dtype,
    hw: HardwareFacts,
    directory: Path,
    card: ModelCard,
    ranker: Any,
    regressor: Any,
    num_threads: int = 1,
) -> Scorer:
    """The scorer of a loaded model (``directory``, its boosters and card) for ``Selector.load``'s
    ``engine``: ``compiled`` compiles the trees (a missing C compiler is an error), ``lightgbm``
    calls LightGBM, ``auto`` compiles when a C compiler is there and the cache can keep the result,
    else calls LightGBM and says why (same answers, slower per call)."""
    scale = card.domain.score_per_log2_tflops
    if engine != Engine.LIGHTGBM.value:
        compiler = host_c_compiler()
        if compiler is None and engine == Engine.COMPILED.value:
            raise SelectorError("engine 'compiled' needs a C compiler ($CC, cc, gcc or clang); none was found")
        if compiler is not None:
            texts = model_texts(directory, card)
            # without a cache to keep it, compiling costs each run seconds LightGBM does not
            compiled = CompiledSelector.build(
                feature_formulas(variant, dtype, hw),
                texts[RANKER_FILE],
                texts[TFLOPS_FILE],
                ranker.num_feature(),
                compiler,
                uncached=engine == Engine.COMPILED.value,
                model=f"{card.arch} {card.variant} {card.dtype} ({directory})",
            )
            if compiled is not None:
                return CompiledScorer(variant, dtype, hw, compiled, scale)
            log.info(
                "the compiled selector cannot be cached: the selector calls LightGBM (slower per call, same answers)"
            )
        else:
            log.info("no C compiler: the selector calls LightGBM (slower, same answers)")
    return LightGBMScorer(variant, dtype, hw, ranker, regressor, scale, num_threads)


_ROW_MAJOR = 1
_FLOAT64 = 1  # C_API_DTYPE_FLOAT64
_PREDICT_NORMAL = 0


class FastPredictor:
    """Raw-score prediction of one booster for C-contiguous float64 matrices, straight through
    LightGBM's C API.

    ``Booster.predict`` re-validates its input, converts it and picks a thread count on every call,
    which for one problem's few dozen candidate rows costs more than the trees themselves. This
    calls the same ``LGBM_BoosterPredictForMat`` entry point that ``predict`` ends in, on the
    C-contiguous float64 matrix the feature code already produced, with a fixed thread count; the
    result is identical (tests compare them)."""

    def __init__(self, booster: Any, num_threads: int = 1) -> None:
        from lightgbm.basic import _LIB, _c_str  # the library handle lightgbm itself calls

        self.booster = booster  # keeps the handle alive
        self._lib = _LIB
        self._handle = booster._handle
        self._params = _c_str(f"num_threads={num_threads}")
        self._features = booster.num_feature()

    def __call__(self, matrix: np.ndarray) -> np.ndarray:
        if matrix.dtype != np.float64 or not matrix.flags.c_contiguous or matrix.shape[1] != self._features:
            raise ValueError(f"expected a C-contiguous float64 matrix with {self._features} columns")
        out = np.empty(matrix.shape[0], dtype=np.float64)
        written = ctypes.c_int64(0)
        status = self._lib.LGBM_BoosterPredictForMat(
            self._handle,
            matrix.ctypes.data_as(ctypes.c_void_p),
            ctypes.c_int(_FLOAT64),
            ctypes.c_int32(matrix.shape[0]),
            ctypes.c_int32(matrix.shape[1]),
            ctypes.c_int(_ROW_MAJOR),
            ctypes.c_int(_PREDICT_NORMAL),
            ctypes.c_int(0),
            ctypes.c_int(-1),
            self._params,
            ctypes.byref(written),
            out.ctypes.data_as(ctypes.POINTER(ctypes.c_double)),
        )
        if status != 0 or written.value != matrix.shape[0]:
            raise RuntimeError(self._lib.LGBM_GetLastError().decode())
        return out
