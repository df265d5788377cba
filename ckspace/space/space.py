"""The ``Space`` query API: the kernels a rule set really emits, for one or more cells.

The queries are written once over two ways to the kernels (:mod:`ckspace.space.backend`), one of
which :meth:`Space._choose_backend` picks: the table rule sets' listing, or ``open``'s exact counts.

Everything a listing needs on a warm cache is imported here at the top and is pure Python (rows,
names, the cell cache); pydantic configs, numpy and the CP-SAT solver load only when a query needs
them, so ``ckspace enumerate --count`` answers from the cache in a fraction of a second.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Iterator, Mapping, Sequence
from itertools import product
from typing import TYPE_CHECKING

from ckspace.constraints.rulesets import get_rule_set
from ckspace.core.cells import Cell, CellProposals, Request
from ckspace.core.errors import CkspaceError, InvalidChoiceError, InvalidInputError, KernelNameError
from ckspace.core.fields import DEPTHWISE_FIELDS, GEMM_FIELD_NAMES
from ckspace.core.naming import is_depthwise_name
from ckspace.environment.target import AUTO, Target, resolve_target
from ckspace.space.backend import Backend
from ckspace.space.listing import Kernel
from ckspace.space.tabled import TableBackend

if TYPE_CHECKING:
    from ckspace.constraints.evaluators.model import CellModel
    from ckspace.constraints.language.rule import Rule
    from ckspace.core.ck import CkRevision
    from ckspace.core.config import KernelConfig
    from ckspace.space.explain import Explanation
    from ckspace.space.optimum import Optimum
    from ckspace.workloads.problem import ConvProblem


def _listify(value: object) -> list | None:
    if value is None:
        return None
    if isinstance(value, (str, int)) or not isinstance(value, Iterable):
        return [value]
    return list(value)


class Space:
    """The valid kernels of a rule set for the given archs, variants, ndims and dtypes.

    Every argument takes one value or a list. ``variant``, ``ndim`` and ``dtype`` default to all
    values; ``rule_set`` to ``full``. A list of variants/ndims/dtypes is one upstream request, so
    the sampling rule sets (full-tests, tiny) sample over all of it; several archs or rule sets
    are separate requests whose kernels are united. ``rules_revision`` names the upstream state of
    the validity rules (``ckspace rules`` lists them; default: the newest merged one).

    ``ck`` chooses the target (:mod:`ckspace.environment.target`): by default (``"auto"``) the CK headers
    ckspace finds, and the space holds only what they can build, less the kernels upstream
    documents as wrong; ``None`` is the upstream rule space (rules only); a path names the CK root.
    ``target.describe()`` says which.
    """

    def __init__(
        self,
        arch: str | Sequence[str],
        variant: object = None,
        ndim: object = None,
        dtype: object = None,
        rule_set: str | Sequence[str] = "full",
        *,
        where: str | Sequence[str] = (),
        use_cache: bool = True,
        rules_revision: str | None = None,
        ck: object = AUTO,
    ) -> None:
        archs = _listify(arch) or []
        rule_sets = [get_rule_set(rs).name for rs in _listify(rule_set) or []]
        if not archs or not rule_sets:
            raise CkspaceError("a Space needs at least one arch and one rule set")
        self.open: bool = not get_rule_set(rule_sets[0]).has_table  # no table: counted, not listed
        if any(get_rule_set(rs).has_table == self.open for rs in rule_sets):
            raise CkspaceError(
                "a rule set without a table (open) cannot share a Space with other rule sets: "
                "their union is not countable without listing it"
            )
        variants, ndims, dtypes = _listify(variant), _listify(ndim), _listify(dtype)
        self.requests: tuple[Request, ...] = tuple(
            Request.build(a, rs, variants, ndims, dtypes, rules_revision) for a, rs in product(archs, rule_sets)
        )
        self.rules_revision: str = self.requests[0].rules_revision
        self.use_cache = use_cache
        self.filters: tuple[Rule, ...] = ()
        if where:
            from ckspace.constraints.language.where import parse_where

            self.filters = tuple(parse_where(text) for text in _listify(where) or [])
        self.problem: ConvProblem | None = None
        self.target: Target = resolve_target(ck)
        self._backend: Backend = self._choose_backend()

    def _choose_backend(self) -> Backend:
        """The one place the two kinds of space part: a table rule set's listing, or ``open``'s
        counts (loaded only then: they need numpy)."""
        if self.open:
            from ckspace.space.counted import CountedBackend

            return CountedBackend(self)
        return TableBackend(self)

    # -- narrowing ------------------------------------------------------------------------------
    def where(self, *expressions: str) -> Space:
        """A narrower space: every expression (see :mod:`ckspace.constraints.language.where`) must hold.

        Filters become named constraints of each cell's CP-SAT model and are evaluated with the
        rules when listing.
        """
        from ckspace.constraints.language.where import parse_where

        return self._narrowed(filters=self.filters + tuple(parse_where(text) for text in expressions))

    def for_problem(self, problem: ConvProblem | str) -> Space:
        """The kernels of this space that can run ``problem`` (a :class:`ConvProblem` or its text
        form): each check of CK Tile's ``IsSupportedArgument`` becomes a named constraint of every
        cell (see :mod:`ckspace.constraints.rulebook.problem_rules`)."""
        from ckspace.workloads.problem import ConvProblem

        return self._narrowed(problem=problem if isinstance(problem, ConvProblem) else ConvProblem.parse(problem))

    def for_ck(self, revision: CkRevision | str | None) -> Space:
        """This space for another target: the kernels the CK Tile headers of ``revision`` (a
        :class:`~ckspace.core.ck.CkRevision`, a CK root path, ``"auto"``) can compile, less the
        known-wrong ones (what the revision lacks becomes named constraints of every cell,
        :mod:`ckspace.constraints.rulebook.ck_rules`); None: the upstream rule space."""
        return self._narrowed(target=resolve_target(revision))

    @property
    def ck(self) -> CkRevision | None:
        """The revision of the target's CK headers (None: rules only, or none found)."""
        return self.target.ck.revision() if self.target.ck is not None else None

    def _narrowed(self, **changes: object) -> Space:
        """A copy with ``changes`` and a backend of its own, so none of this space's memos."""
        narrower = copy.copy(self)
        narrower.__dict__.update(changes)
        narrower._backend = self._backend.narrowed(narrower)
        return narrower

    def cell_rules(self, request: Request, cell: Cell) -> tuple[list[Rule], list[Rule]]:
        """Extra rules of a cell beyond the rule set and the validity predicates: the target's (what
        its CK cannot build, the known-wrong kernels), the filters and the problem's checks, for GEMM
        and for depthwise configs."""
        from ckspace.constraints.rulebook.catalogue import target_rules

        added = target_rules(self.target, request.arch, cell)
        gemm, depthwise = list(added.gemm), list(added.depthwise)
        extra_gemm, extra_depthwise = self._query_rules(request, cell)
        return gemm + extra_gemm, depthwise + extra_depthwise

    def _query_rules(self, request: Request, cell: Cell) -> tuple[list[Rule], list[Rule]]:
        """The filters and the problem's checks of a cell (the target's rules come with the cached
        listing)."""
        gemm, depthwise = list(self.filters), list(self.filters)
        if self.problem is not None:
            from ckspace.constraints.rulebook.problem_rules import depthwise_problem_rules, gemm_problem_rules

            gemm += gemm_problem_rules(self.problem, cell.variant, cell.ndim, cell.dtype)
            depthwise += depthwise_problem_rules(self.problem)
        return gemm, depthwise

    def __repr__(self) -> str:
        return f"Space({', '.join(r.key() for r in self.requests)}{', rules only' if self.target.rules_only else ''})"

    # -- listing --------------------------------------------------------------------------------
    def kernels(self, raw: bool = False) -> list[Kernel]:
        """The listing as light records (arch, cell, row, validity), without building configs."""
        return list(self._backend.raw if raw else self._backend.valid)

    def count(self) -> int:
        """Number of valid kernels (a kernel is a config for one dtype, i.e. one name per arch).
        For ``open``, counted exactly without listing (:mod:`ckspace.constraints.evaluators.count`)."""
        return self._backend.count()

    __len__ = count

    def refuse_beyond(self, limit: int, purpose: str, narrow: str) -> int:
        """The count of valid kernels, or :class:`CkspaceError` at once (an ``open`` space is counted,
        never listed) when it exceeds ``limit``: one line naming the count, ``purpose`` (what the
        limit is for) and ``narrow`` (how the caller's user narrows the space)."""
        count = self.count()
        if count > limit:
            rule_sets = ", ".join(dict.fromkeys(r.rule_set for r in self.requests))
            cells = "; ".join(f"{r.arch} {', '.join(c.label() for c in r.cells)}" for r in self.requests)
            raise CkspaceError(
                f"rule set {rule_sets} holds {count:,} kernels ({cells}); {purpose} at most "
                f"{limit:,}: narrow it with {narrow}"
            )
        return count

    def iter_kernels(self) -> Iterator[Kernel]:
        """The valid kernels one at a time, in listing order; for ``open``, produced lazily in rank
        order with constant memory whatever the count."""
        return self._backend.iter_kernels()

    def __iter__(self) -> Iterator[KernelConfig]:
        return (k.config() for k in self.iter_kernels())

    def names(self) -> list[str]:
        """Sorted names of the valid kernels (names carry no arch: equal names of two archs
        appear once)."""
        return sorted({k.name for k in self._backend.valid})

    def raw(self) -> list[KernelConfig]:
        """The rule set's proposals before the generator's validity filter, in rule-set order."""
        return [k.config() for k in self._backend.raw]

    # -- membership -----------------------------------------------------------------------------
    def contains(self, item: KernelConfig | str) -> bool:
        """Whether a config (or a kernel name, for any arch of the space) is a valid kernel here.

        Decided by the cell's CP-SAT model with every rule and the rule set's proposal table
        enforced. A config's dtype tag is a property of the rule set that proposes it, so it is
        taken from the rule set, not from the argument.
        """
        from ckspace.core.config import DepthwiseConfig

        if isinstance(item, str):
            return any(self.contains(c) for c in self.configs_from_name(item))
        depthwise = isinstance(item, DepthwiseConfig)
        return any(
            self.cell_model(request, cell, depthwise).feasible(values)
            for request, cell, values in self.placements(item)
        )

    __contains__ = contains

    def placements(self, config: KernelConfig) -> Iterator[tuple[Request, Cell, dict[str, int]]]:
        """The requests whose cells hold ``config``'s cell, each with the config's field values
        as that request's models see them (the dtype tag is the rule set's)."""
        from ckspace.core.config import GemmConfig

        cell = Cell(config.variant, config.ndim, config.dtype)
        for request in self.requests:
            if config.arch != request.arch or cell not in request.cells:
                continue
            if isinstance(config, GemmConfig):
                tagged = get_rule_set(request.rule_set).tags_dtype
                row = config.model_copy(update={"tagged": tagged}).row()
                yield request, cell, dict(zip(GEMM_FIELD_NAMES, row, strict=True))
            else:
                yield request, cell, dict(zip(DEPTHWISE_FIELDS, config.row(), strict=True))

    def rows_of(self, arch: str, cell: Cell, depthwise: bool) -> list[tuple[int, ...]]:
        """The rows of the valid kernels of one cell of one arch."""
        return self._backend.rows_of(arch, cell, depthwise)

    def configs_from_name(self, name: str, *, fields: Mapping[str, object] | None = None) -> list[KernelConfig]:
        """The config a kernel name stands for, once per arch of the space (names carry no arch).
        ``fields``: the name's fields when the caller has parsed it already, so it is parsed once."""
        from ckspace.core.config import DepthwiseConfig, GemmConfig
        from ckspace.core.naming import is_benchmark_name, parse_kernel_name

        archs = dict.fromkeys(r.arch for r in self.requests)
        if fields is None and is_benchmark_name(name.strip()):  # a tile-engine benchmark name stands for a config too
            from ckspace.space.benchmark_names import config_from_benchmark_name

            return [config_from_benchmark_name(name.strip(), arch) for arch in archs]
        kind = DepthwiseConfig if is_depthwise_name(name) else GemmConfig
        values = parse_kernel_name(name) if fields is None else fields
        try:
            return [kind(arch=arch, **values) for arch in archs]
        except InvalidInputError as exc:  # the grammar matched, a value is out of its domain (a tile of 0)
            raise KernelNameError(f"kernel name {name!r}: {exc}") from None

    # -- queries --------------------------------------------------------------------------------
    def explain(
        self, item: KernelConfig | str | Mapping[str, object], *, fields: Mapping[str, object] | None = None
    ) -> Explanation:
        """Why a config, a kernel name or a partial config (dict of field values; ``variant``,
        ``ndim`` and ``dtype`` keys narrow the cells) is or is not in the space: per cell, valid
        (with the number of valid completions) or a minimal set of named constraints that
        exclude it, with the offending values. See :mod:`ckspace.space.explain`. ``fields``: a
        kernel name's parsed fields, as for :meth:`configs_from_name`."""
        from ckspace.space.explain import Explanation, explain_cell, explain_targets, overall_verdict

        targets, query = explain_targets(self, item, fields)
        cells = [
            explain_cell(
                self.cell_model(request, cell, depthwise),
                request,
                cell,
                values,
                depthwise,
                valid_rows=self._backend.completions(request, cell, depthwise),
            )
            for request, cell, values, depthwise in targets
        ]
        return Explanation(
            query=query,
            partial=isinstance(item, Mapping),
            valid=any(c.valid for c in cells),
            verdict=overall_verdict(cells),
            target=self.target.record(),
            cells=cells,
        )

    def sample(self, n: int, seed: int = 0, stratify_by: Sequence[str] | None = None) -> list[KernelConfig]:
        """``n`` valid kernels, deterministic for a seed and spread over the strata of the given
        fields (e.g. to choose what to benchmark): strata take turns, each yielding its kernels in
        a seeded random order. Depthwise kernels form their own stratum. ``stratify_by`` defaults to
        pipeline and tile; on ``open`` to no strata: a uniform sample drawn from the exact counts."""
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            raise InvalidInputError(f"sample size {n!r}: valid: an integer of at least 0")
        if isinstance(seed, bool) or not isinstance(seed, int):
            raise InvalidInputError(f"seed {seed!r}: valid: an integer")
        if stratify_by is None:
            stratify_by = self._backend.default_strata
        if isinstance(stratify_by, str):
            stratify_by = [stratify_by]
        unknown = [f for f in stratify_by if f not in GEMM_FIELD_NAMES]
        if unknown:
            raise InvalidChoiceError("stratify field", unknown[0], GEMM_FIELD_NAMES)
        return [k.config() for k in self._backend.sample(n, seed, stratify_by)]

    def best(self, objective: str, maximize: bool = True) -> Optimum:
        """The valid kernel that maximises (or minimises) an integer expression over fields, e.g.
        ``tile_m * tile_n - 2 * tile_k``, found by CP-SAT in each cell's model, with the proof
        status (``OPTIMAL`` when every cell was solved to optimality)."""
        from ckspace.space.optimum import best_kernel

        return best_kernel(self.requests, self.cell_model, objective, maximize)

    def violated_rules(self, config: KernelConfig) -> list[str]:
        """Names of the rules that keep ``config`` out of this space's target in its cell, in check
        order, the rule set's proposals aside: the validity rules of this space's rules revision,
        then the target's (what its CK cannot build, the known-wrong kernels). The target's are the
        ones :meth:`cell_rules` gives the cell models, so ``explain`` blames the same rules. Empty
        for a kernel of the target that the generator would emit if proposed."""
        from ckspace.constraints.rulebook.catalogue import target_rules
        from ckspace.constraints.rulebook.validity import depthwise_rules, gemm_rules
        from ckspace.core.config import DepthwiseConfig

        depthwise = isinstance(config, DepthwiseConfig)
        if depthwise:
            validity = depthwise_rules()
        else:
            validity = gemm_rules(config.arch, config.variant, config.dtype, self.rules_revision)
        cell = Cell(config.variant, config.ndim, config.dtype)
        return _broken([*validity, *target_rules(self.target, config.arch, cell).of_kind(depthwise)], config)

    def excluded_by(self, config: KernelConfig) -> list[str]:
        """Names of every rule that keeps ``config`` out of this space in its cell, the rule set's
        proposals aside: :meth:`violated_rules` (validity, then the target's), then the filters and
        the problem's checks. Empty: a kernel of the space, or one the rule set does not propose."""
        from ckspace.core.config import DepthwiseConfig

        broken = self.violated_rules(config)
        kind = 1 if isinstance(config, DepthwiseConfig) else 0
        cell = Cell(config.variant, config.ndim, config.dtype)
        for request in self.requests:
            if request.arch == config.arch and cell in request.cells:
                broken += _broken(self._query_rules(request, cell)[kind], config)
                break
        return list(dict.fromkeys(broken))

    # -- models ---------------------------------------------------------------------------------
    def model(
        self,
        variant: object = None,
        ndim: int | None = None,
        dtype: object = None,
        arch: str | None = None,
        depthwise: bool = False,
    ) -> CellModel:
        """The CP-SAT model of one cell of this space (first request of ``arch``); the cell may be
        left out when the space has only one."""
        from ckspace.core.vocab import Dtype, Variant, parse_ndim

        if variant is None and ndim is None and dtype is None:
            cells = {cell for request in self.requests for cell in request.cells}
            if len(cells) != 1:
                raise InvalidInputError(f"{self!r} has {len(cells)} cells: give variant, ndim and dtype")
            cell = cells.pop()
        elif variant is None or ndim is None or dtype is None:
            raise InvalidInputError("give the cell's variant, ndim and dtype (or none, for a one-cell space)")
        else:
            cell = Cell(Variant.parse(variant), parse_ndim(ndim), Dtype.parse(dtype))
        for request in self.requests:
            if (arch is None or request.arch == arch) and cell in request.cells:
                return self.cell_model(request, cell, depthwise)
        raise CkspaceError(f"cell {cell.label()} is not part of {self!r}")

    def proposals(self, request: Request) -> dict[Cell, CellProposals]:
        """The rule set's proposals per cell of ``request`` (memoised: explanations reuse them)."""
        return self._backend.proposals(request)

    def cell_model(self, request: Request, cell: Cell, depthwise: bool) -> CellModel:
        """The cell's model with this space's extra rules (memoised): see
        :func:`ckspace.constraints.evaluators.model.cell_model`."""
        return self._backend.cell_model(request, cell, depthwise)


def _broken(rules: Iterable[Rule], config: KernelConfig) -> list[str]:
    """Names of ``rules`` that ``config`` breaks, in their order, each rule as the cell models meet
    it (:func:`~ckspace.constraints.language.rule.for_kind`: a rule on fields the config's kind lacks is
    broken), evaluated on the config's row in one pass."""
    from ckspace.constraints.evaluators.classify import columns, rule_masks
    from ckspace.constraints.language.rule import for_kind
    from ckspace.core.config import DepthwiseConfig

    depthwise = isinstance(config, DepthwiseConfig)
    fields, kind = (DEPTHWISE_FIELDS, "depthwise") if depthwise else (GEMM_FIELD_NAMES, "GEMM")
    masks = rule_masks([for_kind(rule, fields, kind) for rule in rules], columns([config.row()], fields), 1)
    return [name for name, ok in masks.items() if not ok[0]]
