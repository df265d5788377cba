"""One CP-SAT model per cell: field variables, every rule behind its own enforcement literal, and
the rule set's proposals as an allowed-assignment table behind one more.

Switching literals on and off asks different questions of the same model: all on is "is this a
kernel the generator emits?", the proposal literal off is "does it satisfy the rules at all?", and
rule literals as assumptions let the solver name the rules that exclude a config.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from ortools.sat.python import cp_model

from ckspace.constraints.evaluators.cpsat import Compiler
from ckspace.constraints.language.expr import Expr
from ckspace.constraints.language.rule import Rule, for_kind
from ckspace.constraints.rulebook.validity import depthwise_rules, gemm_rules
from ckspace.core.cells import Cell, CellProposals
from ckspace.core.fields import DEPTHWISE_BOUNDS, DEPTHWISE_FIELDS, GEMM_BOUNDS, GEMM_FIELD_NAMES
from ckspace.core.vocab import EMITTED_PREDICATES

PROPOSALS = "proposals"


class CellModel:
    """The constraint model of one cell over one config schema (GEMM or depthwise fields)."""

    def __init__(
        self,
        field_names: Sequence[str],
        bounds: Mapping[str, tuple[int, int]],
        rules: Sequence[Rule],
        proposals: Sequence[Sequence[int]] | None,
    ) -> None:
        self.field_names = tuple(field_names)
        self.bounds = dict(bounds)
        self.rules = {rule.name: rule for rule in rules}
        self.model = cp_model.CpModel()
        self.vars = {name: self.model.new_int_var(*self.bounds[name], name) for name in self.field_names}
        compiler = Compiler(self.model, self.vars, self.bounds)
        self.literals: dict[str, cp_model.IntVar] = {}
        for rule in rules:
            lit = self.model.new_bool_var(rule.name)
            compiler.enforce(rule.expr, [lit])
            self.literals[rule.name] = lit
        if proposals is not None:
            lit = self.model.new_bool_var(PROPOSALS)
            ordered = [self.vars[name] for name in self.field_names]
            self.model.add_allowed_assignments(ordered, [tuple(r) for r in proposals]).only_enforce_if(lit)
            self.literals[PROPOSALS] = lit

    def in_bounds(self, values: Mapping[str, int]) -> bool:
        return all(self.bounds[k][0] <= v <= self.bounds[k][1] for k, v in values.items())

    def _solver(self) -> cp_model.CpSolver:
        solver = cp_model.CpSolver()
        solver.parameters.num_workers = 1
        return solver

    def _fixed(self, values: Mapping[str, int], enabled: Iterable[str]) -> cp_model.CpModel:
        model = self.model.clone()
        for name, value in values.items():
            model.add(model.get_int_var_from_proto_index(self.vars[name].index) == value)
        for name in enabled:
            model.add(model.get_bool_var_from_proto_index(self.literals[name].index) == 1)
        return model

    def feasible(self, values: Mapping[str, int], enabled: Iterable[str] | None = None) -> bool:
        """Whether some config agreeing with ``values`` satisfies the ``enabled`` constraints
        (default: every rule and the proposals)."""
        if not self.in_bounds(values):
            return False
        enabled = list(self.literals) if enabled is None else list(enabled)
        status = self._solver().solve(self._fixed(values, enabled))
        return status in (cp_model.OPTIMAL, cp_model.FEASIBLE)

    def solutions(
        self, values: Mapping[str, int] | None = None, enabled: Iterable[str] | None = None, limit: int | None = None
    ) -> list[tuple[int, ...]]:
        """Enumerate, with the solver, the configs agreeing with ``values`` that satisfy the
        ``enabled`` constraints. Slow per solution: for partial configs and cross-checks, not for
        listing whole rule sets (see :mod:`ckspace.constraints.evaluators.classify`)."""
        values = dict(values or {})
        if not self.in_bounds(values):
            return []
        enabled = list(self.literals) if enabled is None else list(enabled)
        model = self._fixed(values, enabled)
        field_vars = [model.get_int_var_from_proto_index(self.vars[n].index) for n in self.field_names]
        found: list[tuple[int, ...]] = []

        class Collector(cp_model.CpSolverSolutionCallback):
            def on_solution_callback(self) -> None:
                found.append(tuple(self.value(v) for v in field_vars))
                if limit is not None and len(found) >= limit:
                    self.stop_search()

        solver = self._solver()
        solver.parameters.enumerate_all_solutions = True
        solver.solve(model, Collector())
        return found

    def minimal_correction(
        self, values: Mapping[str, int], enabled: Iterable[str] | None = None
    ) -> tuple[list[str], dict[str, int]] | None:
        """The fewest constraints to switch off so that some config agreeing with ``values``
        satisfies the rest, and that config.

        One CP-SAT optimisation: every enabled literal is soft and the solver maximises how many
        hold. A minimum-cardinality correction set is minimal: switching off any proper subset
        leaves the config excluded. Returns None when ``values`` lie outside the fields' domains.
        """
        if not self.in_bounds(values):
            return None
        names = list(self.literals) if enabled is None else list(enabled)
        model = self._fixed(values, [])
        lits = [model.get_bool_var_from_proto_index(self.literals[n].index) for n in names]
        for name in set(self.literals) - set(names):
            model.add(model.get_bool_var_from_proto_index(self.literals[name].index) == 0)
        model.maximize(sum(lits))
        solver = self._solver()
        status = solver.solve(model)
        if status != cp_model.OPTIMAL:
            return None
        off = [n for n, lit in zip(names, lits, strict=True) if not solver.boolean_value(lit)]
        witness = {n: solver.value(model.get_int_var_from_proto_index(v.index)) for n, v in self.vars.items()}
        return off, witness

    def optimize(
        self, objective: Expr, maximize: bool = True, time_limit: float = 10.0
    ) -> tuple[str, int | None, dict[str, int] | None]:
        """Optimise an integer expression over the configs satisfying every constraint.

        Returns the solver status (``OPTIMAL`` is a proof), the objective value and the config.
        """
        model = self.model.clone()
        for lit in self.literals.values():
            model.add(model.get_bool_var_from_proto_index(lit.index) == 1)
        fields = {n: model.get_int_var_from_proto_index(v.index) for n, v in self.vars.items()}
        target = Compiler(model, fields, self.bounds).linear(objective).expr
        if maximize:
            model.maximize(target)
        else:
            model.minimize(target)
        solver = self._solver()
        solver.parameters.max_time_in_seconds = time_limit
        status = solver.solve(model)
        name = solver.status_name(status)
        if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
            return name, None, None
        return name, round(solver.objective_value), {n: solver.value(v) for n, v in fields.items()}


def cell_model(
    arch: str,
    cell: Cell,
    proposal: CellProposals | None,
    depthwise: bool,
    extra: Sequence[Rule] = (),
    revision: str | None = None,
) -> CellModel:
    """The model of one cell's GEMM (or depthwise) configs: the rules the rule set and the
    generator of rule revision ``revision`` (None: the newest merged one) apply (as the enumerator classifies
    with them), the ``extra`` rules (filters, a
    problem's checks, a CK revision's rules) and the rule set's table (its candidates, before the
    predicates it runs itself; None for a rule set without a table, whose domain rules come as
    ``extra`` rules). An extra rule on fields this kind of config lacks excludes the
    kind, by name (:func:`~ckspace.constraints.language.rule.for_kind`)."""
    kind = "depthwise" if depthwise else "GEMM"
    if depthwise:
        fields, bounds, rows = DEPTHWISE_FIELDS, DEPTHWISE_BOUNDS, proposal.depthwise if proposal else None
        rules = list(depthwise_rules())
    else:
        fields, bounds, rows = GEMM_FIELD_NAMES, GEMM_BOUNDS, proposal.candidates if proposal else None
        wanted = set(EMITTED_PREDICATES) | set(proposal.applies if proposal else ())
        rules = [r for r in gemm_rules(arch, cell.variant, cell.dtype, revision) if r.predicate in wanted]
    rules += [for_kind(rule, fields, kind) for rule in extra]
    return CellModel(fields, bounds, rules, rows)
