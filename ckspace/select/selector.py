"""Run-time kernel selection: score a registry's feasible candidates for one problem in one batch.

``Selector.load(arch, variant, dtype)`` loads the shipped model of the cell (verified, see
:mod:`ckspace.select.store`) or, when the package has none, falls back to the analytical
performance model (:mod:`ckspace.features.performance`) and says so (``selector.source``). A kernel
outside the model's training domain is scored through its nearest seen sibling
(:mod:`ckspace.select.support`); every ranked row says where its estimate comes from.
``select(problem, candidates, k)``

1. keeps the candidates whose config passes CK's ``IsSupportedArgument`` checks for the problem
   (:func:`~ckspace.constraints.rulebook.problem_rules.gemm_problem_templates`, bound to the problem;
   :mod:`ckspace.select.feasibility`);
2. replaces a candidate that fails only on vector alignment by its family's widest vector variant
   that passes every check (:mod:`ckspace.select.fallbacks`), and says so (``Ranked.family``);
3. ranks what is left by :meth:`Selector.score_table` (the one scoring rule select, plan and the
   C dispatcher share; :mod:`ckspace.select.scoring`) and returns the pick and the top k with
   estimated TFLOPS; raises :class:`~ckspace.core.errors.NoKernelError` naming the blocking rules
   when nothing can run.

Everything that depends on the candidates only (configs, feature columns, rule columns, the
vector variants) is computed once per candidate list and reused (:mod:`ckspace.select.candidates`);
per problem the work is a few dozen numpy operations over all candidates at once, two tree-ensemble
calls and no validation. The generated C dispatcher (:mod:`ckspace.emit.dispatcher`) implements
these same steps.

What computes the features and the scores is the selector's :class:`~ckspace.select.scorers.Scorer`
(the trees compiled to C, LightGBM, or the analytical model; :mod:`ckspace.select.scorers`): the
rule above is stated once, here, whatever the engine.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ckspace.core.config import GemmConfig
from ckspace.core.errors import InvalidChoiceError
from ckspace.core.naming import is_depthwise_name
from ckspace.core.vocab import Dtype, Engine, ScoreSource, Variant, parse_arch
from ckspace.environment.target import AUTO, Target, resolve_target
from ckspace.features import performance
from ckspace.features.hardware import HardwareFacts, hardware_facts
from ckspace.features.matrix import ConfigTable
from ckspace.select import feasibility
from ckspace.select.candidates import Candidate, CandidateSet, Rows, Support
from ckspace.select.compiled import CompiledSelector
from ckspace.select.scorers import (
    ANALYTICAL_COLUMN,
    AnalyticalScorer,
    CompiledScorer,
    Scorer,
    SelectorError,
    model_scorer,
)
from ckspace.select.scoring import Scored, vector_rule
from ckspace.select.selection import Ranked, Selection
from ckspace.select.store import ModelCard, load_model, model_facts, shipped_model_dir
from ckspace.space.benchmark_names import config_from_any_name
from ckspace.workloads.problem import ConvProblem

log = logging.getLogger(__name__)

ENGINES = ("auto", Engine.COMPILED.value, Engine.LIGHTGBM.value)
"""What :meth:`Selector.load` takes as its ``engine``: an :class:`~ckspace.core.vocab.Engine` that
scores with a model, or ``auto`` (compiled when it can be)."""

__all__ = ["ENGINES", "Selector", "SelectorError"]


class Selector:
    """Scores candidates of one cell (arch, variant, dtype) for problems."""

    def __init__(
        self,
        arch: str,
        variant: Variant,
        dtype: Dtype,
        hw: HardwareFacts,
        scorer: Scorer | None = None,
        card: ModelCard | None = None,
        target: Target | None = None,
        ranker: object | None = None,
        regressor: object | None = None,
    ) -> None:
        """``scorer``: what computes features and scores (:mod:`ckspace.select.scorers`; the
        analytical model when not given). ``card``: the model's card, whose training domain the
        selector extrapolates outside of (required with a scorer of ``source`` ``model``).
        ``ranker``, ``regressor``: the model's boosters as loaded, kept for inspection."""
        self.arch, self.variant, self.dtype, self.hw = arch, variant, dtype, hw
        self.target = target if target is not None else resolve_target(AUTO)
        """The target the vector fallbacks stay inside (:mod:`ckspace.environment.target`)."""
        self.scorer = scorer if scorer is not None else AnalyticalScorer(variant, dtype, hw)
        """What computes the features and the scores (:class:`~ckspace.select.scorers.Scorer`)."""
        if self.scorer.source is ScoreSource.MODEL and card is None:
            raise SelectorError("a trained model's scorer needs the model's card (its training domain)")
        self.card = card
        self.ranker, self.regressor = ranker, regressor
        self._prepared: dict[tuple, CandidateSet] = {}
        self.domain = card.domain if card is not None else None
        """The model's training domain (None without a model)."""
        self._families: dict[tuple, int] = {}

    @property
    def source(self) -> ScoreSource:
        """Where the scores come from: a trained model, or the analytical model."""
        return self.scorer.source

    @property
    def engine(self) -> Engine:
        """What computes the scores: the trees compiled to C, LightGBM's C API, or the roofline."""
        return self.scorer.engine

    @property
    def compiled(self) -> CompiledSelector | None:
        """The compiled model when the engine is ``compiled``."""
        return self.scorer.compiled if isinstance(self.scorer, CompiledScorer) else None

    @classmethod
    def load(
        cls,
        arch: str,
        variant: Variant | str,
        dtype: Dtype | str,
        model_dir: str | Path | None = None,
        num_threads: int = 1,
        engine: str = "auto",
        ck: object = AUTO,
    ) -> Selector:
        """The cell's model (``model_dir``, else the shipped one), or the analytical fallback when
        the package ships none for the cell; a damaged or mismatched model is an error.

        ``engine``: ``compiled`` runs the trees compiled to C (:mod:`ckspace.select.compiled`;
        built once per model with the host C compiler, cached), ``lightgbm`` calls LightGBM's C API,
        ``auto`` (default) compiles when a C compiler is there and the cache can keep the result.
        Both give the same scores; the compiled trees answer ~7x faster for a few dozen candidates.

        One prediction thread by default: for a few dozen rows a second OpenMP thread saves
        ~0.07 ms on an idle machine, but costs over 10 ms per call when the cores are busy (as they
        are inside a framework), measured with bench/selection.py.

        ``ck``: the target (as ``Space``'s): a candidate's vector fallback is a kernel of it."""
        if engine not in ENGINES:
            raise InvalidChoiceError("selector engine", engine, ENGINES)
        arch, variant, dtype = parse_arch(arch), Variant.parse(variant), Dtype.parse(dtype)
        target = resolve_target(ck)
        hw = hardware_facts(arch)
        directory = Path(model_dir) if model_dir is not None else shipped_model_dir(arch, variant.value, dtype.value)
        if model_dir is None and not directory.is_dir():
            log.warning(
                "no model for %s %s %s: ranking by the analytical performance model", arch, variant.value, dtype.value
            )
            return cls(arch, variant, dtype, hw, target=target)
        ranker, regressor, card = load_model(directory)
        if (card.arch, card.variant, card.dtype) != (arch, variant.value, dtype.value):
            raise SelectorError(
                f"model {directory} is for {card.arch} {card.variant} {card.dtype}, "
                f"not {arch} {variant.value} {dtype.value}"
            )
        hw = model_facts(card)  # priced with the constants measured on the model's GPU
        scorer = model_scorer(engine, variant, dtype, hw, directory, card, ranker, regressor, num_threads)
        return cls(arch, variant, dtype, hw, scorer, card, target, ranker, regressor)

    def feature_matrix(self, problem: ConvProblem, table: ConfigTable) -> np.ndarray:
        """The features of ``problem`` with every row of ``table``, through the engine."""
        return self.scorer.feature_matrix(problem, table)

    def scores(self, matrix: np.ndarray) -> np.ndarray:
        """The model's raw scores of feature rows (higher is better), through the engine."""
        self._need_model()
        return self.scorer.scores(matrix)

    def log_tflops(self, matrix: np.ndarray) -> np.ndarray:
        """The regressor's predicted log TFLOPS of feature rows, through the engine."""
        self._need_model()
        log_tflops = self.scorer.log_tflops(matrix)
        if log_tflops is None:
            raise SelectorError(
                f"the {self.engine.value} model for {self.arch} {self.variant.value} {self.dtype.value} "
                "has no TFLOPS regressor"
            )
        return log_tflops

    def _need_model(self) -> None:
        if self.scorer.source is not ScoreSource.MODEL:
            raise SelectorError(
                f"no model for {self.arch} {self.variant.value} {self.dtype.value}: nothing to score with"
            )

    @property
    def default_candidates(self) -> tuple[str, ...]:
        """The kernels the model was trained on (its measured registry); empty without a model."""
        return tuple(self.card.kernels) if self.card else ()

    def prepare(self, candidates: Sequence[Candidate], pool: Sequence[GemmConfig] | None = None) -> CandidateSet:
        """Resolve candidates (kernel names — ckspace or tile-engine benchmark names — or configs)
        and compute their columns; memoised per candidate list and pool.

        ``pool``: the vector-width fallbacks are exactly the variants among these configs (a tree's
        or a built library's kernels, whatever the target; as its C dispatcher's are); without it
        a family may fall back to any variant the validity rules allow that is a kernel of the target."""
        pool_key = None if pool is None else frozenset(c.kernel_key() for c in pool)
        key = (tuple(candidates), pool_key)
        prepared = self._prepared.get(key)
        if prepared is None:
            if not key[0]:
                raise SelectorError("no candidate kernels to select from")
            configs, names = [], []
            depthwise = [item for item in key[0] if _is_depthwise(item)]
            if len(depthwise) == len(key[0]):
                raise SelectorError(
                    f"the {len(depthwise)} candidates are all depthwise kernels; the selector "
                    "ranks GEMM kernels (depthwise ones have no model and no CK Tile instance)"
                )
            if depthwise:  # enumerate --list prints them beside the GEMM kernels: accepted, not ranked
                log.info("%d depthwise candidates skipped: the selector ranks GEMM kernels", len(depthwise))
            for item in key[0]:
                if _is_depthwise(item):
                    continue
                config = item if isinstance(item, GemmConfig) else config_from_any_name(str(item), self.arch)
                if config.variant is not self.variant or config.dtype is not self.dtype or config.arch != self.arch:
                    raise SelectorError(
                        f"candidate {config.name} is a {config.arch} {config.variant.value} "
                        f"{config.dtype.value} kernel; the selector is for {self.arch} "
                        f"{self.variant.value} {self.dtype.value}"
                    )
                configs.append(config)
                names.append(config.name)  # the config's own name, whatever name it was given by
            prepared = CandidateSet(
                tuple(names),
                Rows.build(configs, self.hw),
                np.asarray([c.ndim for c in configs]),
                pool_key,
                self.target,
                self.domain,
                self._families,
                self.hw,
            )
            self._prepared[key] = prepared
        return prepared

    def feasible(self, problem: ConvProblem, prepared: CandidateSet) -> np.ndarray:
        """Mask of the candidates that can run ``problem`` as they are, before any vector fallback
        (:func:`ckspace.select.feasibility.feasible`)."""
        return feasibility.feasible(problem, prepared, self.variant, self.dtype)

    def runnable(self, problem: ConvProblem, prepared: CandidateSet) -> tuple[np.ndarray, np.ndarray]:
        """The candidates that run ``problem`` as they are, and the vector variants that replace those
        that fail only on vector alignment (:func:`ckspace.select.feasibility.runnable`)."""
        return feasibility.runnable(problem, prepared, self.variant, self.dtype)

    def select(
        self,
        problem: ConvProblem | str,
        candidates: Sequence[Candidate],
        k: int = 5,
        pool: Sequence[GemmConfig] | None = None,
    ) -> Selection:
        """The best kernel for ``problem`` among the candidates and their vector fallbacks (from
        ``pool`` when given, see :meth:`prepare`), and the top ``k`` with predicted TFLOPS."""
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise SelectorError(f"k must be an integer of at least 1, not {k!r}")
        problem = problem if isinstance(problem, ConvProblem) else ConvProblem.parse(problem)
        prepared = self.prepare(candidates, pool)
        direct, fallback = self.runnable(problem, prepared)
        if direct.size == 0 and fallback.size == 0:
            raise feasibility.no_kernel(problem, prepared, self.variant, self.dtype)
        everything = direct.size == len(prepared.names)
        table = prepared.table if everything else prepared.table.take(direct)
        support = prepared.support_of(None if everything else direct)
        names = [prepared.names[i] for i in direct]
        families: list[str | None] = [None] * len(names)
        family_index = direct
        if fallback.size:
            rows, _, _, variant_names = prepared.variants()
            table = table.stack(rows.table.take(fallback[:, 1]))
            if support is not None:
                support = support.stack(prepared.variant_support.take(fallback[:, 1]))
            names += [variant_names[j] for j in fallback[:, 1]]
            families += [prepared.names[i] for i in fallback[:, 0]]
            family_index = np.concatenate([direct, fallback[:, 0]])
            order = np.argsort(family_index, kind="stable")  # candidate order, variants in their family's place
            table = table.take(order)
            support = support.take(order) if support is not None else None
            names = [names[i] for i in order]
            families = [families[i] for i in order]
        scored = self.score_table(problem, table, support)
        order = np.argsort(-scored.scores, kind="stable")[:k]
        tflops = self.predicted_tflops(scored, order)
        if scored.source is ScoreSource.MODEL:  # a regressor's estimates need not follow the ranker's order
            tflops = np.minimum.accumulate(tflops)
        top = [
            Ranked(names[i], families[i], float(scored.scores[i]), float(t), table.configs[i], scored.row_source(i))
            for i, t in zip(order, tflops, strict=True)
        ]
        return Selection(
            top[0].name, top[0].family, top, self.source, len(names), int(fallback.shape[0]), len(prepared.names)
        )

    def outside(self, config: GemmConfig) -> str | None:
        """Why the model would extrapolate for ``config`` (None: inside its domain, or no model)."""
        return None if self.domain is None else self.domain.outside(config)

    def score_table(self, problem: ConvProblem, table: ConfigTable, support: Support | None = None) -> Scored:
        """Every row of ``table`` scored for ``problem`` -- the one rule select, plan and the C
        dispatcher share: the model's score for a kernel inside its domain; for one outside it,
        the model's score of its sibling plus the analytical model's log2 ratio of the two times
        the scorer's units per log2 TFLOPS (:mod:`ckspace.select.support`); without a model, the
        analytical log2 TFLOPS; whatever the engine (:mod:`ckspace.select.scorers`). ``support``:
        the rows against the domain (:class:`~ckspace.select.candidates.Support`; worked out here
        when not given, as a candidate set keeps it for its rows)."""
        matrix = self.scorer.feature_matrix(problem, table)
        scores = self.scorer.scores(matrix)
        if self.scorer.source is not ScoreSource.MODEL:  # physics: no domain to leave
            return Scored(scores, matrix, [None] * len(table), np.full(len(table), -1), None, self.scorer.source)
        assert self.domain is not None
        support = support if support is not None else Support.of(table.configs, self.domain, self._families, self.hw)
        scale = self.scorer.score_per_log2_tflops
        sibling_of = np.full(len(table), -1, dtype=np.int64)
        sibling = None
        extrapolated = np.flatnonzero(support.outside)
        if extrapolated.size:
            needed, sibling_of[extrapolated] = np.unique(support.sibling[extrapolated], return_inverse=True)
            sibling = self.scorer.feature_matrix(problem, support.siblings.take(needed))
            at = sibling_of[extrapolated]
            scores[extrapolated] = self.scorer.scores(sibling)[at] + scale * (
                matrix[extrapolated, ANALYTICAL_COLUMN] - sibling[at, ANALYTICAL_COLUMN]
            )
        scores = vector_rule(scores, matrix[:, ANALYTICAL_COLUMN], support, scale)
        reasons = list(support.reasons)
        beyond = self.domain.problem_outside(problem)
        if beyond is not None:
            reasons = [f"problem {beyond}" + ("" if r is None else f"; {r}") for r in reasons]
        return Scored(scores, matrix, reasons, sibling_of, sibling, ScoreSource.MODEL)

    def predicted_tflops(self, scored: Scored, rows: np.ndarray) -> np.ndarray:
        """The TFLOPS estimate of ``rows`` of a scored table: the scorer's regressor's (of the
        sibling, times the analytical ratio, for an extrapolated row) or, for a scorer without one,
        the analytical model's, calibrated to measured TFLOPS (its feature stays at the ideal
        hardware's level)."""
        log_tflops = self.scorer.log_tflops(np.ascontiguousarray(scored.matrix[rows]))
        if log_tflops is None:
            return performance.calibrated_tflops(scored.matrix[rows, ANALYTICAL_COLUMN])
        through = scored.sibling_of[rows]
        at = np.flatnonzero(through >= 0)
        if at.size:
            assert scored.sibling is not None
            sib = np.ascontiguousarray(scored.sibling[through[at]])
            log_tflops[at] = self.scorer.log_tflops(sib) + math.log(2.0) * (
                scored.matrix[rows[at], ANALYTICAL_COLUMN] - sib[:, ANALYTICAL_COLUMN]
            )
        return np.exp(log_tflops)


def _is_depthwise(item: object) -> bool:
    """A depthwise kernel (a name of the depthwise grammar or a depthwise config)."""
    if isinstance(item, str):
        return is_depthwise_name(item.strip())
    return getattr(item, "kind", None) == "depthwise"
