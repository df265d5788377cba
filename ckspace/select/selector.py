"""Run-time kernel selection: score a registry's feasible candidates for one problem in one batch.

``Selector.load(arch, variant, dtype)`` loads the shipped model of the cell (verified, see
:mod:`ckspace.select.store`) or, when the package has none, falls back to the analytical roofline
score (:data:`ckspace.select.features.ANALYTICAL_FEATURE`) and says so (``selector.source``). ``select(problem,
candidates, k)`` keeps the candidates whose config passes CK's ``IsSupportedArgument`` checks for
the problem (:func:`~ckspace.constraints.problem_rules.gemm_problem_rules`), ranks them, and
returns the pick and the top k with predicted TFLOPS. Everything that depends on the candidates
only (configs, feature columns, rule columns) is computed once per candidate list and reused.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from pydantic import BaseModel

from ckspace.constraints.classify import columns, rule_masks
from ckspace.constraints.problem_rules import gemm_problem_rules
from ckspace.core.config import GemmConfig
from ckspace.core.errors import CkspaceError
from ckspace.core.fields import GEMM_FIELD_NAMES
from ckspace.core.problem import ConvProblem
from ckspace.core.vocab import Dtype, Variant, parse_arch
from ckspace.select.benchmark_names import config_from_any_name
from ckspace.select.features import (
    ANALYTICAL_FEATURE,
    FEATURE_NAMES,
    ConfigTable,
    feature_matrix,
)
from ckspace.select.hardware import HardwareFacts, hardware_facts
from ckspace.select.predictor import FastPredictor
from ckspace.select.store import ModelCard, load_model, shipped_model_dir

log = logging.getLogger(__name__)

_ANALYTICAL = FEATURE_NAMES.index(ANALYTICAL_FEATURE)

Candidate = str | GemmConfig


class Ranked(BaseModel):
    name: str
    predicted_tflops: float


class Selection(BaseModel):
    """The answer: the pick (the candidate's name exactly as given) and the top candidates."""

    pick: str
    top: list[Ranked]
    source: str  # "model" or "analytical"
    feasible: int
    candidates: int


@dataclass(frozen=True)
class CandidateSet:
    """Candidates resolved to configs with their per-candidate columns."""

    names: tuple[str, ...]
    table: ConfigTable
    rule_columns: dict[str, np.ndarray]
    ndim: np.ndarray


class Selector:
    """Scores candidates of one cell (arch, variant, dtype) for problems."""

    def __init__(self, arch: str, variant: Variant, dtype: Dtype, hw: HardwareFacts,
                 ranker: object | None = None, regressor: object | None = None, card: ModelCard | None = None,
                 num_threads: int = 1) -> None:
        self.arch, self.variant, self.dtype, self.hw = arch, variant, dtype, hw
        self.card = card
        self.source = "model" if ranker is not None else "analytical"
        self.rank_predictor = FastPredictor(ranker, num_threads) if ranker is not None else None
        """Scores candidates (higher is better); None with the analytical fallback."""
        self.tflops_predictor = FastPredictor(regressor, num_threads) if regressor is not None else None
        """Predicts log TFLOPS of the listed candidates."""
        self._prepared: dict[tuple, CandidateSet] = {}

    @classmethod
    def load(cls, arch: str, variant: Variant | str, dtype: Dtype | str, model_dir: str | Path | None = None,
             num_threads: int = 1) -> "Selector":
        """The cell's model (``model_dir``, else the shipped one), or the analytical fallback when
        the package ships none for the cell; a damaged or mismatched model is an error.

        One prediction thread by default: for a few dozen rows a second OpenMP thread saves
        ~0.07 ms on an idle machine, but costs over 10 ms per call when the cores are busy (as they
        are inside a framework), measured with bench/selection.py."""
        arch, variant, dtype = parse_arch(arch), Variant.parse(variant), Dtype.parse(dtype)
        hw = hardware_facts(arch)
        directory = Path(model_dir) if model_dir is not None else shipped_model_dir(arch, variant.value, dtype.value)
        if model_dir is None and not directory.is_dir():
            log.warning("no model for %s %s %s: ranking by the analytical roofline score", arch, variant.value,
                        dtype.value)
            return cls(arch, variant, dtype, hw, num_threads=num_threads)
        ranker, regressor, card = load_model(directory)
        if (card.arch, card.variant, card.dtype) != (arch, variant.value, dtype.value):
            raise CkspaceError(f"model {directory} is for {card.arch} {card.variant} {card.dtype}, "
                               f"not {arch} {variant.value} {dtype.value}")
        return cls(arch, variant, dtype, hw, ranker, regressor, card, num_threads)

    @property
    def default_candidates(self) -> tuple[str, ...]:
        """The kernels the model was trained on (its measured registry); empty without a model."""
        return tuple(self.card.kernels) if self.card else ()

    def prepare(self, candidates: Sequence[Candidate]) -> CandidateSet:
        """Resolve candidates (kernel names — ckspace or tile-engine benchmark names — or configs)
        and compute their columns; memoised per candidate list."""
        key = tuple(candidates)
        prepared = self._prepared.get(key)
        if prepared is None:
            if not key:
                raise CkspaceError("no candidate kernels to select from")
            configs, names = [], []
            for item in key:
                config = item if isinstance(item, GemmConfig) else config_from_any_name(str(item), self.arch)
                if config.variant is not self.variant or config.dtype is not self.dtype or config.arch != self.arch:
                    raise CkspaceError(f"candidate {config.name} is a {config.arch} {config.variant.value} "
                                       f"{config.dtype.value} kernel; the selector is for {self.arch} "
                                       f"{self.variant.value} {self.dtype.value}")
                configs.append(config)
                names.append(item.name if isinstance(item, GemmConfig) else str(item))
            table = ConfigTable.build(configs)
            prepared = CandidateSet(tuple(names), table, columns([c.row() for c in configs], GEMM_FIELD_NAMES),
                                    np.asarray([c.ndim for c in configs]))
            self._prepared[key] = prepared
        return prepared

    def feasible(self, problem: ConvProblem, prepared: CandidateSet) -> np.ndarray:
        """Mask of the candidates that can run ``problem`` (every problem rule of their cell holds)."""
        mask = prepared.ndim == problem.ndim
        if not mask.any():
            return mask
        rules = gemm_problem_rules(problem, self.variant, problem.ndim, self.dtype)
        for ok in rule_masks(rules, prepared.rule_columns, len(prepared.names)).values():
            mask &= ok
        return mask

    def select(self, problem: ConvProblem | str, candidates: Sequence[Candidate], k: int = 5) -> Selection:
        """The best feasible candidate for ``problem`` and the top ``k`` with predicted TFLOPS."""
        if k < 1:
            raise CkspaceError(f"k must be at least 1, not {k}")
        problem = problem if isinstance(problem, ConvProblem) else ConvProblem.parse(problem)
        prepared = self.prepare(candidates)
        mask = self.feasible(problem, prepared)
        index = np.flatnonzero(mask)
        if index.size == 0:
            raise CkspaceError(f"none of the {len(prepared.names)} candidates can run {problem.text()} "
                               "(see `ckspace explain --problem` for the rules they break)")
        table = prepared.table if index.size == len(prepared.names) else _take(prepared.table, index)
        matrix = feature_matrix(problem, self.variant, self.dtype, table, self.hw)
        if self.rank_predictor is not None:
            order = np.argsort(-self.rank_predictor(matrix), kind="stable")[:k]
            tflops = np.exp(self.tflops_predictor(np.ascontiguousarray(matrix[order])))
        else:
            order = np.argsort(-matrix[:, _ANALYTICAL], kind="stable")[:k]
            tflops = np.exp2(matrix[order, _ANALYTICAL])
        top = [Ranked(name=prepared.names[index[i]], predicted_tflops=float(t)) for i, t in zip(order, tflops)]
        return Selection(pick=top[0].name, top=top, source=self.source, feasible=int(index.size),
                         candidates=len(prepared.names))


def _take(table: ConfigTable, index: np.ndarray) -> ConfigTable:
    """The rows ``index`` of a config table (no recomputation)."""
    return ConfigTable(tuple(table.configs[i] for i in index), np.ascontiguousarray(table.block[index]),
                       {name: values[index] for name, values in table.col.items()})

