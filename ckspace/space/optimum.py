"""The answer of :meth:`ckspace.Space.best`, and the search that finds it (:func:`best_kernel`):
kept beside the answer because it is a search of its own over the cells' models, apart from
listing the space."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from pydantic import BaseModel

from ckspace.core.config import GemmConfig
from ckspace.core.fields import GEMM_FIELD_NAMES

if TYPE_CHECKING:
    from ckspace.constraints.evaluators.model import CellModel
    from ckspace.core.cells import Cell, Request


class Optimum(BaseModel):
    """The best valid kernel for an objective, with the solver's proof status (``OPTIMAL`` when
    every cell was solved to optimality, ``FEASIBLE`` when a time limit cut one short)."""

    objective: str
    maximize: bool
    status: str
    value: int | None
    config: GemmConfig | None


def best_kernel(
    requests: Iterable[Request],
    cell_model: Callable[[Request, Cell, bool], CellModel],
    objective: str,
    maximize: bool = True,
) -> Optimum:
    """:meth:`ckspace.Space.best` over ``requests``: the GEMM kernel that maximises (or minimises)
    ``objective``, found by CP-SAT in each cell's model (``cell_model``: the space's, with its extra
    rules), with the proof status over all cells."""
    from ckspace.constraints.language.where import parse_objective

    expr = parse_objective(objective)
    best: tuple[int, GemmConfig] | None = None
    statuses = set()
    for request in requests:
        for cell in request.cells:
            status, value, values = cell_model(request, cell, False).optimize(expr, maximize)
            statuses.add(status)
            if value is None:
                continue
            config = GemmConfig.from_row(
                request.arch, cell.variant, cell.ndim, cell.dtype, tuple(values[f] for f in GEMM_FIELD_NAMES)
            )
            if best is None or (value > best[0] if maximize else value < best[0]):
                best = (value, config)
    proven = statuses <= {"OPTIMAL", "INFEASIBLE"}
    status = ("OPTIMAL" if proven else "FEASIBLE") if best else ("INFEASIBLE" if proven else "UNKNOWN")
    return Optimum(
        objective=objective,
        maximize=maximize,
        status=status,
        value=best[0] if best else None,
        config=best[1] if best else None,
    )
