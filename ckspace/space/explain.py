"""Why a kernel is, or is not, in a space.

For each cell the question concerns, the cell's CP-SAT model answers: the config (or, for a partial
config, some completion) either satisfies every enabled constraint, or the solver finds the fewest
named constraints to switch off so that it would -- a minimal set, each member reported with the
offending values. Constraints are of the kinds of :class:`~ckspace.core.vocab.RuleKind`, reported
apart: validity rules (the upstream predicates), the rule set's proposals (valid, but not something
the rule set proposes: the closest proposals and the fields they differ in are shown), user
filters, problem checks and what the CK headers in use cannot compile.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Protocol

from pydantic import BaseModel

from ckspace.constraints.evaluators.model import PROPOSALS, CellModel
from ckspace.constraints.language.render import why
from ckspace.core.cells import Cell, Request
from ckspace.core.errors import CkspaceError, InvalidChoiceError
from ckspace.core.fields import DEPTHWISE_FIELDS, GEMM_FIELD_NAMES, decode, parse_depthwise_field, parse_field, plain
from ckspace.core.naming import depthwise_name, gemm_name
from ckspace.core.tables import shape_key
from ckspace.core.vocab import Dtype, RuleKind, Variant, parse_ndim

if TYPE_CHECKING:
    from ckspace.core.cells import CellProposals
    from ckspace.core.config import KernelConfig

Verdict = Literal["member", "not_proposed", "invalid"]
VERDICTS: tuple[str, ...] = ("member", "not_proposed", "invalid")
"""explain's three answers: a kernel of the space; a config every rule allows but the rule set does
not propose (the closest proposals that are kernels of the space are offered); a config some rule
excludes (a minimal set of them is named)."""


class Blame(BaseModel):
    """One constraint in a minimal set that excludes the config."""

    constraint: str
    kind: RuleKind
    statement: str
    source: str
    values: dict[str, Any]
    detail: str


class CellExplanation(BaseModel):
    arch: str
    variant: str
    ndim: int
    dtype: str
    rule_set: str
    rules_revision: str
    config_kind: Literal["gemm", "depthwise"]
    valid: bool
    verdict: Verdict
    completions: int
    blame: list[Blame]
    closest: list[str]

    def text(self, partial: bool) -> str:
        head = f"{self.arch} {self.variant}/{self.ndim}d/{self.dtype} ({self.rule_set}, rules {self.rules_revision}): "
        if self.valid:
            more = f"; {self.completions} valid completion(s)" if partial else ""
            return head + "VALID" + more
        if self.verdict == "not_proposed":
            subject = (
                f"a completion passes every rule but rule set {self.rule_set} proposes none"
                if partial
                else f"NOT PROPOSED: it passes every rule of the target (emit --kernels builds it; a "
                f"selector may run it as a vector fallback), but rule set {self.rule_set} does not "
                "propose it"
            )
            return "\n".join([head + subject, *(f"      {c}" for c in self.closest)])
        subject = "no valid completion; the closest completion breaks" if partial else "NOT VALID; it breaks"
        lines = [head + subject + f" {len(self.blame)} constraint(s):"]
        for b in self.blame:
            values = ", ".join(f"{k}={v}" for k, v in b.values.items())
            lines.append(f"  - [{b.kind}] {b.constraint}: {b.statement}")
            lines.append(f"      {b.detail}" + (f"  ({values})" if values and b.kind is not RuleKind.RULE_SET else ""))
        lines += [f"      {c}" for c in self.closest]
        return "\n".join(lines)


class Explanation(BaseModel):
    """The answer of ``Space.explain``: per cell, valid or the minimal blame; overall, the best
    verdict of its cells (``member`` before ``not_proposed`` before ``invalid``) and the target."""

    query: dict[str, Any]
    partial: bool
    valid: bool
    verdict: Verdict
    target: dict[str, Any]
    cells: list[CellExplanation]

    def text(self) -> str:
        lines = [c.text(self.partial) for c in self.cells]
        if len(self.cells) > 1:
            valid = [c for c in self.cells if c.valid]
            where = f"{len(valid)} of {len(self.cells)} cells"
            lines.append(
                f"summary: {sum(c.completions for c in valid)} valid completion(s) in {where}"
                if self.partial
                else f"summary: a kernel of {where}; verdict {self.verdict}"
            )
        return "\n".join([*lines, "# " + self.target["note"]])


def overall_verdict(cells: Sequence[CellExplanation]) -> Verdict:
    """The best answer any cell gives."""
    return min((c.verdict for c in cells), key=VERDICTS.index)


def _decoded(field: str, value: int, depthwise: bool) -> Any:
    return value if depthwise else plain(decode(field, value))


def _closest(
    rows: Sequence[tuple[int, ...]],
    fields: Sequence[str],
    values: Mapping[str, int],
    render,
    rule_set: str,
    depthwise: bool,
) -> list[str]:
    """Where the config misses the rule set's tables: the nearest of its kernels in the space (valid
    proposals of this target) and how they differ."""
    if not rows:
        return [f"{rule_set} has no kernel in this cell for this target"]
    index = {f: i for i, f in enumerate(fields)}
    fixed = [(index[f], v) for f, v in values.items() if f in index]
    distance = [sum(row[i] != v for i, v in fixed) for row in rows]
    best = min(distance)
    nearest = [row for row, d in zip(rows, distance, strict=True) if d == best]
    out = [f"no kernel of {rule_set} matches; {len(nearest)} of its kernels differ in {best} field(s), e.g.:"]
    for row in nearest[:3]:
        diff = ", ".join(
            f"{fields[i]} {_decoded(fields[i], v, depthwise)} -> {_decoded(fields[i], row[i], depthwise)}"
            for i, v in fixed
            if row[i] != v
        )
        out.append(f"  {render(row)}  ({diff})")
    if not depthwise and any(f in values for f in ("tile_m", "tile_n", "tile_k")):
        tiles = sorted({row[:3] for row in rows})
        wanted = tuple(values.get(f) for f in ("tile_m", "tile_n", "tile_k"))
        if not any(all(w is None or w == t for w, t in zip(wanted, tile, strict=True)) for tile in tiles):
            listed = ", ".join(shape_key(t) for t in tiles)
            out.append(f"  no proposal uses that tile; this cell's tiles: {listed}")
    return out


def encode_partial(partial: Mapping[str, object], depthwise: bool) -> dict[str, int]:
    """Field values from user text/objects to the integers the models use, parsed strictly: a
    boolean is true/false/1/0, an integer is an integer in the field's domain, an enum one of its
    values (:func:`~ckspace.core.fields.parse_field`)."""
    fields = DEPTHWISE_FIELDS if depthwise else GEMM_FIELD_NAMES
    out = {}
    for field, value in partial.items():
        if field not in fields:
            raise InvalidChoiceError("field", field, fields)
        out[field] = parse_depthwise_field(field, value) if depthwise else parse_field(field, value)
    return out


@dataclass(frozen=True)
class PartialQuery:
    """A partial config: the cells it narrows to (``variant``, ``ndim``, ``dtype`` keys), the
    config kind, and the encoded values of the fields it fixes."""

    variant: Variant | None
    ndim: int | None
    dtype: Dtype | None
    depthwise: bool
    values: dict[str, int]

    @classmethod
    def parse(cls, item: Mapping[str, object]) -> PartialQuery:
        partial = dict(item)
        variant = Variant.parse(partial.pop("variant")) if "variant" in partial else None
        ndim = parse_ndim(partial.pop("ndim")) if "ndim" in partial else None
        dtype = Dtype.parse(partial.pop("dtype")) if "dtype" in partial else None
        kind = str(partial.pop("kind", "gemm"))
        if kind not in ("gemm", "depthwise"):
            raise CkspaceError(f"unknown config kind {kind!r}; valid: gemm, depthwise")
        depthwise = kind == "depthwise"
        return cls(variant, ndim, dtype, depthwise, encode_partial(partial, depthwise))

    def matches(self, cell: Cell) -> bool:
        return (
            (self.variant is None or cell.variant is self.variant)
            and (self.ndim is None or cell.ndim == self.ndim)
            and (self.dtype is None or cell.dtype is self.dtype)
        )


class ExplainedSpace(Protocol):
    """What :func:`explain_targets` reads of a :class:`~ckspace.space.space.Space` (which imports
    this module, so this one names only what it uses)."""

    requests: tuple[Request, ...]

    def proposals(self, request: Request) -> dict[Cell, CellProposals]: ...

    def configs_from_name(self, name: str, *, fields: Mapping[str, object] | None = None) -> list[KernelConfig]: ...

    def placements(self, config: KernelConfig) -> Iterator[tuple[Request, Cell, dict[str, int]]]: ...


def explain_targets(
    space: ExplainedSpace, item: KernelConfig | str | Mapping[str, object], fields: Mapping[str, object] | None = None
) -> tuple[list[tuple[Request, Cell, dict[str, int], bool]], dict[str, Any]]:
    """What :meth:`Space.explain <ckspace.space.space.Space.explain>` asks each cell's model: every
    (request, cell, encoded values, depthwise) of ``space`` that ``item`` (a config, a kernel name or
    a partial config) concerns, and the query as the explanation reports it. ``fields``: a kernel
    name's parsed fields. :class:`~ckspace.core.errors.CkspaceError` when no cell is concerned."""
    from ckspace.core.config import DepthwiseConfig, GemmConfig

    if isinstance(item, Mapping):
        partial = PartialQuery.parse(item)
        query = {k: plain(v) for k, v in item.items()}
        targets = [
            (request, cell, partial.values, partial.depthwise)
            for request in space.requests
            for cell in request.cells
            if partial.matches(cell) and (not partial.depthwise or space.proposals(request)[cell].depthwise)
        ]
        if not targets:
            raise CkspaceError(f"the query {query} matches no cell of {space!r}")
        return targets, query
    if isinstance(item, str):
        configs, query = space.configs_from_name(item, fields=fields), {"name": item.strip()}
    elif isinstance(item, (GemmConfig, DepthwiseConfig)):
        configs, query = [item], {"name": item.name, "arch": item.arch}
    else:
        raise CkspaceError(
            f"explain takes a config, a kernel name or a dict of field values, not {type(item).__name__}"
        )
    targets = [
        (request, cell, values, isinstance(config, DepthwiseConfig))
        for config in configs
        for request, cell, values in space.placements(config)
    ]
    if not targets:
        raise CkspaceError(f"{query['name']} belongs to no cell of {space!r}")
    return targets, query


def explain_cell(
    model: CellModel,
    request: Request,
    cell: Cell,
    values: dict[str, int],
    depthwise: bool,
    *,
    valid_rows: Sequence[tuple[int, ...]] | Callable[[dict[str, int]], int],
) -> CellExplanation:
    """One cell's answer: valid (with the valid kernels among ``valid_rows`` that agree with
    ``values``, or their number as ``valid_rows(values)`` counts it where the rows are never listed)
    or a minimal correction set of ``model``'s constraints with the offending values; when the rule
    set is blamed, the closest of ``valid_rows`` (kernels of the space) are offered. (A rule set
    without rows to list, ``open``, has no proposal table to blame.) Three steps: membership
    (:func:`_completions`), the correction (:func:`_correction`), then its blame (:func:`_blame`)."""
    base = _cell_fields(request, cell, depthwise)
    completions = _completions(model, values, depthwise, valid_rows)
    if completions is not None:
        return CellExplanation(**base, valid=True, verdict="member", completions=completions, blame=[], closest=[])
    off, witness = _correction(model, request, cell, values)
    blame, closest = _blame(model, request, cell, values, depthwise, off, witness, valid_rows)
    verdict = "not_proposed" if list(off) == [PROPOSALS] else "invalid"
    return CellExplanation(**base, valid=False, verdict=verdict, completions=0, blame=blame, closest=closest)


def _cell_fields(request: Request, cell: Cell, depthwise: bool) -> dict[str, Any]:
    """The fields of a :class:`CellExplanation` that say which cell answers."""
    return {
        "arch": request.arch,
        "variant": cell.variant.value,
        "ndim": cell.ndim,
        "dtype": cell.dtype.value,
        "rule_set": request.rule_set,
        "rules_revision": request.rules_revision,
        "config_kind": "depthwise" if depthwise else "gemm",
    }


def _completions(
    model: CellModel,
    values: dict[str, int],
    depthwise: bool,
    valid_rows: Sequence[tuple[int, ...]] | Callable[[dict[str, int]], int],
) -> int | None:
    """How many valid kernels agree with ``values``, or None when none does."""
    fields = DEPTHWISE_FIELDS if depthwise else GEMM_FIELD_NAMES
    fixed = [(fields.index(f), v) for f, v in values.items()]
    if callable(valid_rows):  # no listing (open): the solver decides
        return valid_rows(values) if model.feasible(values) else None
    # the cell's valid kernels are listed: a matching row answers without a solve (the CK rules make
    # the cell's model slow to decide: ~0.1 s where the rows take microseconds); the same rules decide both
    completions = sum(all(row[i] == v for i, v in fixed) for row in valid_rows)
    return completions or None


def _correction(
    model: CellModel, request: Request, cell: Cell, values: dict[str, int]
) -> tuple[list[str], dict[str, int]]:
    """The constraints a non-member breaks (a minimal correction set) and the witness values that
    satisfy the rest; an error when a value is out of domain or the listing and model disagree."""
    correction = model.minimal_correction(values)
    if correction is None:
        bounds = ", ".join(f"{f} in [{lo}, {hi}]" for f, (lo, hi) in model.bounds.items() if f in values)
        raise CkspaceError(f"a value is outside the fields' domains ({bounds})")
    off, witness = correction
    if not off:  # the listing and the model disagree: a defect of ckspace, never an answer
        raise CkspaceError(
            f"internal error: no listed kernel of {request.arch} {cell.label()} matches {values}, "
            "but its CP-SAT model admits one; please report it"
        )
    return off, witness


def _blame(
    model: CellModel,
    request: Request,
    cell: Cell,
    values: dict[str, int],
    depthwise: bool,
    off: Sequence[str],
    witness: dict[str, int],
    valid_rows: Sequence[tuple[int, ...]] | Callable[[dict[str, int]], int],
) -> tuple[list[Blame], list[str]]:
    """Each broken constraint in words with its offending values, and (when the rule set is blamed)
    the closest kernels of the space."""
    fields = DEPTHWISE_FIELDS if depthwise else GEMM_FIELD_NAMES

    def render(row: tuple[int, ...]) -> str:
        if depthwise:
            return depthwise_name(cell.dtype, cell.ndim, row)
        return gemm_name(cell.variant, cell.dtype, cell.ndim, row)

    blame = []
    closest: list[str] = []
    for name in off:
        if name == PROPOSALS:
            blame.append(
                Blame(
                    constraint=PROPOSALS,
                    kind=RuleKind.RULE_SET,
                    source=f"rule set {request.rule_set}",
                    statement=f"the config is not one that rule set {request.rule_set} proposes",
                    values={},
                    detail="valid configs outside the rule set's tables are not emitted",
                )
            )
            closest = _closest(valid_rows, fields, values, render, request.rule_set, depthwise)
            continue
        rule = model.rules[name]
        shown = {f: _decoded(f, witness[f], depthwise) for f in rule.fields if f in witness}
        blame.append(
            Blame(
                constraint=name,
                kind=rule.predicate.kind,
                statement=rule.text,
                source=rule.source,
                values=shown,
                detail=why(rule.expr, witness),
            )
        )
    return blame, closest
