"""Run-time kernel selection: score a registry's feasible candidates for one problem in one batch.

``Selector.load(arch, variant, dtype)`` loads the shipped model of the cell (verified, see
:mod:`ckspace.select.store`) or, when the package has none, falls back to the analytical
performance model (:mod:`ckspace.features.performance`) and says so (``selector.source``). A kernel
outside the model's training domain is scored through its nearest seen sibling
(:mod:`ckspace.select.support`); every ranked row says where its estimate comes from.
``select(problem, candidates, k)``

1. keeps the candidates whose config passes CK's ``IsSupportedArgument`` checks for the problem
   (:func:`~ckspace.constraints.problem_rules.gemm_problem_templates`, bound to the problem);
2. replaces a candidate that fails only on vector alignment by its family's widest vector variant
   that passes every check (:mod:`ckspace.select.fallbacks`), and says so (``Ranked.family``);
3. ranks what is left by :meth:`Selector.score_table` (the one scoring rule select, plan and the
   C dispatcher share) and returns the pick and the top k with estimated TFLOPS; raises
   :class:`~ckspace.core.errors.NoKernelError` naming the blocking rules when nothing can run.

Everything that depends on the candidates only (configs, feature columns, rule columns, the
vector variants) is computed once per candidate list and reused; per problem the work is a few
dozen numpy operations over all candidates at once, two tree-ensemble calls and no validation.
The generated C dispatcher (:mod:`ckspace.emit.dispatcher`) implements these same steps.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

import numpy as np

from ckspace.constraints.classify import columns
from ckspace.constraints.expr import bind, evaluate, fields_of
from ckspace.constraints.problem_rules import ProblemRule, gemm_problem_templates, problem_values
from ckspace.core.config import GemmConfig
from ckspace.core.errors import InvalidChoiceError, InvalidInputError, NoKernelError
from ckspace.core.fields import GEMM_FIELD_NAMES
from ckspace.core.operands import VECTOR_FIELDS
from ckspace.core.naming import is_depthwise_name
from ckspace.core.problem import ConvProblem
from ckspace.core.target import AUTO, Target, resolve_target
from ckspace.core.vocab import Dtype, Variant, parse_arch
from ckspace.space.benchmark_names import config_from_any_name
from ckspace.select.compiled import CompiledSelector, host_c_compiler
from ckspace.select.fallbacks import family_key, identity, vector_variants
from ckspace.features.matrix import (
    ANALYTICAL_FEATURE,
    FEATURE_NAMES,
    PROBLEM_VALUES,
    ConfigTable,
    assemble,
    feature_formulas,
    feature_program,
)
from ckspace.features.hardware import HardwareFacts, hardware_facts
from ckspace.select.predictor import FastPredictor
from ckspace.select.support import ModelDomain, source_text
from ckspace.select.store import (
    RANKER_FILE,
    TFLOPS_FILE,
    ModelCard,
    load_model,
    model_texts,
    shipped_model_dir,
)

log = logging.getLogger(__name__)

_ANALYTICAL = FEATURE_NAMES.index(ANALYTICAL_FEATURE)

Candidate = str | GemmConfig
ENGINES = ("auto", "compiled", "lightgbm")


class SelectorError(InvalidInputError):
    """Bad input to the selector: no candidates, a candidate of another cell, a bad ``k``, a
    model of another cell (a ``ValueError`` too)."""


@dataclass(frozen=True, slots=True)
class Ranked:
    """One ranked kernel: ``name`` is the kernel to run; ``family`` the candidate it stands for when
    it is that candidate's vector-width variant (else None); ``score`` what the list is ordered by
    (the ranker's raw score, or the analytical log2 TFLOPS).

    ``predicted_tflops`` agrees with the order: the regressor's estimate, capped at the estimate
    shown for the kernel ranked above, so a later kernel never shows a higher number (the ranker
    and the regressor are separate models and disagree on close calls). The pick's number is the
    regressor's own estimate, as the C dispatcher returns it. A plain dataclass: built per select
    call, where a pydantic model's construction alone cost ~5 us."""

    name: str
    family: str | None
    score: float
    predicted_tflops: float
    config: GemmConfig
    """The kernel itself (``name`` is its own name)."""
    source: str = "model"
    """Where the estimate comes from: ``model`` (the trained model, a kernel and problem inside its
    training domain), ``model, extrapolated: <reason>`` (outside it: the model's estimate of the
    nearest kernel it saw, scaled by the analytical model, :mod:`ckspace.select.support`) or
    ``analytical`` (no model for the cell: :mod:`ckspace.features.performance`)."""


@dataclass(frozen=True, slots=True)
class Selection:
    """The answer: the kernel to run, the top candidates, and how many could run the problem."""

    pick: str
    family: str | None
    top: list[Ranked]
    source: str  # "model" or "analytical": what the cell has; each row says its own (Ranked.source)
    feasible: int
    fallbacks: int
    candidates: int

    @property
    def pick_source(self) -> str:
        """The pick's own source (``model``, ``model, extrapolated: ...`` or ``analytical``)."""
        return self.top[0].source


@dataclass(frozen=True)
class Scored:
    """One problem's rows scored by the one rule :meth:`Selector.score_table` states: ``scores``
    order them (higher first); ``reasons[i]`` says why row i is extrapolated (None: it is not);
    ``sibling_of[i]`` is the row of ``sibling`` (the feature rows of the distinct siblings) row i
    is scored through, -1 when it is scored itself."""

    scores: np.ndarray
    matrix: np.ndarray
    reasons: list[str | None]
    sibling_of: np.ndarray
    sibling: np.ndarray | None
    source: str

    def row_source(self, i: int) -> str:
        return source_text(self.source == "model", self.reasons[i])


@dataclass(frozen=True)
class Rows:
    """Configs as the selector reads them: feature columns and rule columns."""

    table: ConfigTable
    rule_columns: dict[str, np.ndarray]

    @classmethod
    def build(cls, configs: Sequence[GemmConfig]) -> "Rows":
        return cls(ConfigTable.build(configs), columns([c.row() for c in configs], GEMM_FIELD_NAMES))


@dataclass(frozen=True)
class Support:
    """Rows of a config table against the model's domain: which are outside it and why, and the
    index of each row's sibling in ``siblings`` (the distinct siblings of the outside rows: kernels
    that share a sibling -- a kernel's vector variants -- score it once); and each row's vector
    family (an id shared by a kernel's vector-width variants) and widths, for the vector rule."""

    outside: np.ndarray  # bool per row
    reasons: tuple[str | None, ...]
    sibling: np.ndarray  # per row: index into siblings, -1 inside the domain
    siblings: ConfigTable
    family: np.ndarray  # per row: vector family id
    vectors: np.ndarray  # per row: (vec_a, vec_b, vec_c)

    @classmethod
    def of(cls, configs: Sequence[GemmConfig], domain: ModelDomain, families: dict[tuple, int]) -> "Support":
        reasons = tuple(domain.outside(c) for c in configs)
        distinct: dict[GemmConfig, int] = {}
        index = np.full(len(configs), -1, dtype=np.int64)
        for i, (c, reason) in enumerate(zip(configs, reasons)):
            if reason is not None:
                index[i] = distinct.setdefault(domain.sibling(c), len(distinct))
        family = np.asarray([families.setdefault(family_key(c), len(families)) for c in configs], dtype=np.int64)
        vectors = np.asarray([[c.vec_a, c.vec_b, c.vec_c] for c in configs], dtype=np.int64).reshape(len(configs), 3)
        return cls(index >= 0, reasons, index, ConfigTable.build(list(distinct)), family, vectors)

    def take(self, rows: np.ndarray) -> "Support":
        return Support(self.outside[rows], tuple(self.reasons[i] for i in rows), self.sibling[rows], self.siblings,
                       self.family[rows], self.vectors[rows])

    def stack(self, other: "Support") -> "Support":
        offset = len(self.siblings)
        return Support(np.concatenate([self.outside, other.outside]), self.reasons + other.reasons,
                       np.concatenate([self.sibling, np.where(other.sibling >= 0, other.sibling + offset, -1)]),
                       self.siblings.stack(other.siblings), np.concatenate([self.family, other.family]),
                       np.concatenate([self.vectors, other.vectors]))


@dataclass
class CandidateSet:
    """Candidates resolved to configs with their per-candidate columns; the vector variants of
    their families are worked out on first need (restricted to ``pool`` when one is given)."""

    names: tuple[str, ...]
    rows: Rows
    ndim: np.ndarray
    pool: frozenset[tuple] | None = None
    target: Target | None = None
    domain: ModelDomain | None = None
    families: dict[tuple, int] = field(default_factory=dict, repr=False)
    """The selector's vector-family ids (shared by every candidate set, so rows of two sets agree)."""
    _variants: tuple[Rows, np.ndarray, np.ndarray, list[str]] | None = field(default=None, repr=False)
    _support: Support | None = field(default=None, repr=False)
    _variant_support: Support | None = field(default=None, repr=False)
    family_rows: list[np.ndarray] = field(default_factory=list, repr=False)
    same_as_candidate: np.ndarray = field(default_factory=lambda: np.empty(0, dtype=np.int64), repr=False)
    """Per variant row: the candidate with the same config, or -1."""

    @property
    def table(self) -> ConfigTable:
        return self.rows.table

    @property
    def support(self) -> Support:
        """The candidates against the model's domain (worked out on first need)."""
        if self._support is None:
            assert self.domain is not None
            self._support = Support.of(self.table.configs, self.domain, self.families)
        return self._support

    def support_of(self, rows: np.ndarray | None = None) -> Support | None:
        """The support of candidate ``rows`` (all of them when None); None without a model."""
        if self.domain is None:
            return None
        return self.support if rows is None else self.support.take(rows)

    @property
    def variant_support(self) -> Support:
        """The vector variants (:meth:`variants`' rows) against the model's domain."""
        if self._variant_support is None:
            assert self.domain is not None
            self._variant_support = Support.of(self.variants()[0].table.configs, self.domain, self.families)
        return self._variant_support

    def variants(self) -> tuple[Rows, np.ndarray, np.ndarray, list[str]]:
        """(rows of every family's variants, widest first per family; the family of each row; the
        offsets of each family's block; their names)."""
        if self._variants is None:
            per_family = vector_variants(self.table.configs, self.target)
            if self.pool is not None:
                per_family = [[v for v in family if identity(v) in self.pool] for family in per_family]
            flat = [v for family in per_family for v in family]
            owner = np.repeat(np.arange(len(per_family)), [len(f) for f in per_family])
            offsets = np.concatenate([[0], np.cumsum([len(f) for f in per_family])]).astype(np.int64)
            rows = Rows.build(flat) if flat else Rows(ConfigTable.build([]), {})
            self._variants = (rows, owner, offsets, [v.name for v in flat])
            self.family_rows = [np.arange(offsets[i], offsets[i + 1]) for i in range(len(per_family))]
            candidates = {identity(c): i for i, c in enumerate(self.table.configs)}
            self.same_as_candidate = np.asarray([candidates.get(identity(v), -1) for v in flat], dtype=np.int64)
        return self._variants


def _masks(rules: Sequence[ProblemRule], values: dict[str, int], cols: dict[str, np.ndarray], size: int,
           ) -> tuple[np.ndarray, np.ndarray]:
    """(passes every non-vector check, passes every vector-alignment check) per row."""
    other, vector = np.ones(size, dtype=bool), np.ones(size, dtype=bool)
    for rule in rules:
        target = vector if rule.vector_field else other
        result = rule.check(values, cols)
        if isinstance(result, np.ndarray):
            target &= result
        elif not result:
            target[:] = False
    return other, vector


@cache
def _vector_checks(variant: Variant, ndim: int, dtype: Dtype) -> tuple[tuple[ProblemRule, ...], tuple[str, ...]]:
    """The problem checks of a cell that read a vector width, and the config fields they read."""
    rules = tuple(r for r in gemm_problem_templates(variant, ndim, dtype) if set(fields_of(r.expr)) & set(VECTOR_FIELDS))
    return rules, tuple(sorted({f for rule in rules for f in fields_of(rule.expr)}))


class Selector:
    """Scores candidates of one cell (arch, variant, dtype) for problems."""

    def __init__(self, arch: str, variant: Variant, dtype: Dtype, hw: HardwareFacts,
                 ranker: object | None = None, regressor: object | None = None, card: ModelCard | None = None,
                 num_threads: int = 1, compiled: CompiledSelector | None = None, target: Target | None = None) -> None:
        self.arch, self.variant, self.dtype, self.hw = arch, variant, dtype, hw
        self.target = target if target is not None else resolve_target(AUTO)
        """The target the vector fallbacks stay inside (:mod:`ckspace.core.target`)."""
        self.card = card
        self.ranker, self.regressor = ranker, regressor
        self.source = "model" if ranker is not None else "analytical"
        self.engine = "compiled" if compiled is not None else "lightgbm" if ranker is not None else "analytical"
        """What computes the scores: the trees compiled to C, LightGBM's C API, or the roofline."""
        self._rank: Callable[[np.ndarray], np.ndarray] | None = None
        self._log_tflops: Callable[[np.ndarray], np.ndarray] | None = None
        self.compiled = compiled
        if compiled is not None:
            self._rank, self._log_tflops = compiled.rank, compiled.log_tflops
        elif ranker is not None:
            self._rank, self._log_tflops = FastPredictor(ranker, num_threads), FastPredictor(regressor, num_threads)
        self._prepared: dict[tuple, CandidateSet] = {}
        self._program = feature_program(variant, dtype, hw)
        self.domain = card.domain if card is not None else None
        """The model's training domain (None without a model)."""
        self._families: dict[tuple, int] = {}

    @classmethod
    def load(cls, arch: str, variant: Variant | str, dtype: Dtype | str, model_dir: str | Path | None = None,
             num_threads: int = 1, engine: str = "auto", ck: object = AUTO) -> "Selector":
        """The cell's model (``model_dir``, else the shipped one), or the analytical fallback when
        the package ships none for the cell; a damaged or mismatched model is an error.

        ``engine``: ``compiled`` runs the trees compiled to C (:mod:`ckspace.select.compiled`;
        built once per model with the host C compiler, cached), ``lightgbm`` calls LightGBM's C API,
        ``auto`` (default) compiles when a C compiler is there and the cache can keep the result. Both give the same scores; the
        compiled trees answer ~7x faster for a few dozen candidates.

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
            log.warning("no model for %s %s %s: ranking by the analytical performance model", arch, variant.value,
                        dtype.value)
            return cls(arch, variant, dtype, hw, num_threads=num_threads, target=target)
        ranker, regressor, card = load_model(directory)
        if (card.arch, card.variant, card.dtype) != (arch, variant.value, dtype.value):
            raise SelectorError(f"model {directory} is for {card.arch} {card.variant} {card.dtype}, "
                                f"not {arch} {variant.value} {dtype.value}")
        compiled = None
        if engine != "lightgbm":
            compiler = host_c_compiler()
            if compiler is None and engine == "compiled":
                raise SelectorError("engine 'compiled' needs a C compiler ($CC, cc, gcc or clang); none was found")
            if compiler is not None:
                texts = model_texts(directory, card)
                # without a cache to keep it, compiling costs each run seconds LightGBM does not
                compiled = CompiledSelector.build(feature_formulas(variant, dtype, hw), texts[RANKER_FILE],
                                                  texts[TFLOPS_FILE], ranker.num_feature(), compiler,
                                                  uncached=engine == "compiled",
                                                  model=f"{card.arch} {card.variant} {card.dtype} ({directory})")
                if compiled is None:
                    log.info("the compiled selector cannot be cached: the selector calls LightGBM (slower per "
                             "call, same answers)")
            else:
                log.info("no C compiler: the selector calls LightGBM (slower, same answers)")
        return cls(arch, variant, dtype, hw, ranker, regressor, card, num_threads, compiled, target)

    def feature_matrix(self, problem: ConvProblem, table: ConfigTable) -> np.ndarray:
        """The features of ``problem`` with every row of ``table``, through the engine."""
        if self.compiled is not None:
            values = np.fromiter((getattr(problem, name) for name in PROBLEM_VALUES), dtype=np.float64,
                                 count=len(PROBLEM_VALUES))
            return self.compiled.feature_matrix(values, table)
        return assemble(self._program, problem_values(problem), table)

    def scores(self, matrix: np.ndarray) -> np.ndarray:
        """The ranker's raw scores of feature rows (higher is better), through the engine."""
        if self._rank is None:
            raise SelectorError(f"no model for {self.arch} {self.variant.value} {self.dtype.value}: nothing to score with")
        return self._rank(matrix)

    def log_tflops(self, matrix: np.ndarray) -> np.ndarray:
        """The regressor's predicted log TFLOPS of feature rows, through the engine."""
        if self._log_tflops is None:
            raise SelectorError(f"no model for {self.arch} {self.variant.value} {self.dtype.value}: nothing to score with")
        return self._log_tflops(matrix)

    @property
    def default_candidates(self) -> tuple[str, ...]:
        """The kernels the model was trained on (its measured registry); empty without a model."""
        return tuple(self.card.kernels) if self.card else ()

    def prepare(self, candidates: Sequence[Candidate], pool: Sequence[GemmConfig] | None = None) -> CandidateSet:
        """Resolve candidates (kernel names — ckspace or tile-engine benchmark names — or configs)
        and compute their columns; memoised per candidate list and pool.

        ``pool`` limits the vector-width fallbacks to these configs (a built library's kernels);
        without it a family may fall back to any variant the validity rules allow."""
        pool_key = None if pool is None else frozenset(identity(c) for c in pool)
        key = (tuple(candidates), pool_key)
        prepared = self._prepared.get(key)
        if prepared is None:
            if not key[0]:
                raise SelectorError("no candidate kernels to select from")
            configs, names = [], []
            depthwise = [item for item in key[0] if _is_depthwise(item)]
            if len(depthwise) == len(key[0]):
                raise SelectorError(f"the {len(depthwise)} candidates are all depthwise kernels; the selector "
                                    "ranks GEMM kernels (depthwise ones have no model and no CK Tile instance)")
            if depthwise:  # enumerate --list prints them beside the GEMM kernels: accepted, not ranked
                log.info("%d depthwise candidates skipped: the selector ranks GEMM kernels", len(depthwise))
            for item in key[0]:
                if _is_depthwise(item):
                    continue
                config = item if isinstance(item, GemmConfig) else config_from_any_name(str(item), self.arch)
                if config.variant is not self.variant or config.dtype is not self.dtype or config.arch != self.arch:
                    raise SelectorError(f"candidate {config.name} is a {config.arch} {config.variant.value} "
                                        f"{config.dtype.value} kernel; the selector is for {self.arch} "
                                        f"{self.variant.value} {self.dtype.value}")
                configs.append(config)
                names.append(config.name)  # the config's own name, whatever name it was given by
            prepared = CandidateSet(tuple(names), Rows.build(configs), np.asarray([c.ndim for c in configs]),
                                    pool_key, self.target, self.domain, self._families)
            self._prepared[key] = prepared
        return prepared

    def _rules(self, problem: ConvProblem) -> tuple[ProblemRule, ...]:
        return gemm_problem_templates(self.variant, problem.ndim, self.dtype)

    def feasible(self, problem: ConvProblem, prepared: CandidateSet) -> np.ndarray:
        """Mask of the candidates that can run ``problem`` as they are (every problem rule of their
        cell holds), before any vector fallback."""
        other, vector = _masks(self._rules(problem), problem_values(problem), prepared.rows.rule_columns,
                               len(prepared.names))
        return (prepared.ndim == problem.ndim) & other & vector

    def runnable(self, problem: ConvProblem, prepared: CandidateSet) -> tuple[np.ndarray, np.ndarray]:
        """(indices of the candidates that run ``problem`` as they are; for candidates that fail
        only on vector alignment, pairs (candidate, index of the variant that replaces it))."""
        rules, values = self._rules(problem), problem_values(problem)
        other, vector = _masks(rules, values, prepared.rows.rule_columns, len(prepared.names))
        other &= prepared.ndim == problem.ndim
        direct = np.flatnonzero(other & vector)
        needs = np.flatnonzero(other & ~vector)
        if needs.size == 0:
            return direct, np.empty((0, 2), dtype=np.int64)
        rows, owner, _, _ = prepared.variants()
        candidate_rows = np.concatenate([prepared.family_rows[i] for i in needs])
        if candidate_rows.size == 0:
            return direct, np.empty((0, 2), dtype=np.int64)
        # a variant differs from its family only in vector widths: only the checks that read them can
        # change, and the family passed all the others
        vector_rules, fields = _vector_checks(self.variant, problem.ndim, self.dtype)
        cols = {name: rows.rule_columns[name][candidate_rows] for name in fields}
        ok_other, ok_vector = _masks(vector_rules, values, cols, candidate_rows.size)
        passing = candidate_rows[ok_other & ok_vector]  # grouped by family, widest first within each
        families = owner[passing]
        first = np.flatnonzero(np.concatenate(([True], families[1:] != families[:-1]))) if passing.size else passing
        chosen, families = passing[first], families[first]
        # a variant that is itself a directly runnable candidate is ranked once, as that candidate
        keep = ~np.isin(prepared.same_as_candidate[chosen], direct)
        return direct, np.column_stack([families[keep], chosen[keep]]).astype(np.int64)

    def select(self, problem: ConvProblem | str, candidates: Sequence[Candidate], k: int = 5,
               pool: Sequence[GemmConfig] | None = None) -> Selection:
        """The best kernel for ``problem`` among the candidates and their vector fallbacks (from
        ``pool`` when given, see :meth:`prepare`), and the top ``k`` with predicted TFLOPS."""
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise SelectorError(f"k must be an integer of at least 1, not {k!r}")
        problem = problem if isinstance(problem, ConvProblem) else ConvProblem.parse(problem)
        prepared = self.prepare(candidates, pool)
        direct, fallback = self.runnable(problem, prepared)
        if direct.size == 0 and fallback.size == 0:
            raise self._no_kernel(problem, prepared)
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
        if self._rank is not None:
            tflops = np.minimum.accumulate(tflops)
        top = [Ranked(names[i], families[i], float(scored.scores[i]), float(t), table.configs[i], scored.row_source(i))
               for i, t in zip(order, tflops)]
        return Selection(top[0].name, top[0].family, top, self.source, len(names), int(fallback.shape[0]),
                         len(prepared.names))

    def outside(self, config: GemmConfig) -> str | None:
        """Why the model would extrapolate for ``config`` (None: inside its domain, or no model)."""
        return None if self.domain is None else self.domain.outside(config)

    def score_table(self, problem: ConvProblem, table: ConfigTable, support: Support | None = None) -> Scored:
        """Every row of ``table`` scored for ``problem`` -- the one rule select, plan and the C
        dispatcher share: the model's score for a kernel inside its domain; for one outside it,
        the model's score of its sibling plus the analytical model's log2 ratio of the two times
        the model's score scale (:mod:`ckspace.select.support`); without a model, the analytical
        log2 TFLOPS. ``support``: the rows against the domain (:class:`Support`; worked out here
        when not given, as a candidate set keeps it for its rows)."""
        matrix = self.feature_matrix(problem, table)
        if self._rank is None:
            return Scored(matrix[:, _ANALYTICAL].copy(), matrix, [None] * len(table), np.full(len(table), -1), None,
                          "analytical")
        assert self.domain is not None
        support = support if support is not None else Support.of(table.configs, self.domain, self._families)
        scale = self.domain.score_per_log2_tflops
        scores = self.scores(matrix)
        sibling_of = np.full(len(table), -1, dtype=np.int64)
        sibling = None
        extrapolated = np.flatnonzero(support.outside)
        if extrapolated.size:
            needed, sibling_of[extrapolated] = np.unique(support.sibling[extrapolated], return_inverse=True)
            sibling = self.feature_matrix(problem, support.siblings.take(needed))
            at = sibling_of[extrapolated]
            scores[extrapolated] = self.scores(sibling)[at] + scale * (
                matrix[extrapolated, _ANALYTICAL] - sibling[at, _ANALYTICAL])
        scores = _vector_rule(scores, matrix[:, _ANALYTICAL], support, scale)
        reasons = list(support.reasons)
        beyond = self.domain.problem_outside(problem)
        if beyond is not None:
            reasons = [f"problem {beyond}" + ("" if r is None else f"; {r}") for r in reasons]
        return Scored(scores, matrix, reasons, sibling_of, sibling, "model")

    def predicted_tflops(self, scored: Scored, rows: np.ndarray) -> np.ndarray:
        """The TFLOPS estimate of ``rows`` of a scored table: the regressor's (of the sibling,
        times the analytical ratio, for an extrapolated row) or the analytical model's."""
        if scored.source == "analytical":
            return np.exp2(scored.scores[rows])
        log_tflops = self.log_tflops(np.ascontiguousarray(scored.matrix[rows]))
        through = scored.sibling_of[rows]
        at = np.flatnonzero(through >= 0)
        if at.size:
            assert scored.sibling is not None
            sib = np.ascontiguousarray(scored.sibling[through[at]])
            log_tflops[at] = self.log_tflops(sib) + math.log(2.0) * (
                scored.matrix[rows[at], _ANALYTICAL] - sib[:, _ANALYTICAL])
        return np.exp(log_tflops)

    def _no_kernel(self, problem: ConvProblem, prepared: CandidateSet) -> NoKernelError:
        """The error naming, for each candidate, the checks that block it (for a family whose
        variants were tried, the checks its narrowest variant still fails)."""
        blocking: dict[str, tuple[str, ...]] = {}
        values = problem_values(problem)
        bound = [(rule, bind(rule.expr, values)) for rule in self._rules(problem)]
        rows, _, offsets, _ = prepared.variants()
        for i, name in enumerate(prepared.names):
            if prepared.ndim[i] != problem.ndim:
                blocking[name] = ("problem_ndim",)
                continue
            source, j = (rows, offsets[i + 1] - 1) if offsets[i + 1] > offsets[i] else (prepared.rows, i)
            cols = {f: col[j:j + 1] for f, col in source.rule_columns.items()}
            blocking[name] = tuple(rule.name for rule, expr in bound
                                   if not bool(np.asarray(evaluate(expr, cols)).reshape(-1)[0]))
        groups: dict[tuple[str, ...], list[str]] = {}
        for name, rules in blocking.items():
            groups.setdefault(rules, []).append(name)
        detail = "; ".join(f"{', '.join(rules)} blocks {len(names)} ({', '.join(names[:3])}"
                           f"{', ...' if len(names) > 3 else ''})" for rules, names in groups.items())
        return NoKernelError(f"none of the {len(prepared.names)} candidates (nor a vector-width variant of one) "
                             f"can run {problem.text()}: {detail}", blocking)


def _vector_rule(scores: np.ndarray, analytical: np.ndarray, support: Support, scale: float) -> np.ndarray:
    """A kernel never scores above a wider-vector variant of itself among the rows: each row is
    capped at every wider variant's score moved by the analytical log2 ratio of the two (which the
    analytical model makes negative). The caps read the uncapped scores; they are transitive, so
    the order of the rows does not matter. A kernel outside the domain already scores so against
    a shared sibling; the rule binds where a model was trained on several widths and ordered two
    variants against physics. The C dispatcher applies the same caps in the same arithmetic."""
    family = support.family
    if len(set(family.tolist())) == family.size:  # no kernel here with a variant of itself: the usual case
        return scores
    _, inverse, counts = np.unique(family, return_inverse=True, return_counts=True)
    shared = np.flatnonzero(counts[inverse] > 1)  # rows with another variant of their kernel here
    fam, vec = family[shared], support.vectors[shared]
    at_least = (vec[None, :, :] >= vec[:, None, :]).all(axis=2)  # [r, w]: w as wide as r everywhere
    beyond = (vec[None, :, :] > vec[:, None, :]).any(axis=2)
    r, w = np.nonzero((fam[:, None] == fam[None, :]) & at_least & beyond)
    if r.size == 0:
        return scores
    r, w = shared[r], shared[w]
    capped = scores.copy()
    np.minimum.at(capped, r, scores[w] + scale * (analytical[r] - analytical[w]))
    return capped


def _is_depthwise(item: object) -> bool:
    """A depthwise kernel (a name of the depthwise grammar or a depthwise config)."""
    if isinstance(item, str):
        return is_depthwise_name(item.strip())
    return getattr(item, "kind", None) == "depthwise"
