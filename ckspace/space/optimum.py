"""The answer of :meth:`ckspace.Space.best`."""

from __future__ import annotations

from pydantic import BaseModel

from ckspace.core.config import GemmConfig


class Optimum(BaseModel):
    """The best valid kernel for an objective, with the solver's proof status (``OPTIMAL`` when
    every cell was solved to optimality, ``FEASIBLE`` when a time limit cut one short)."""

    objective: str
    maximize: bool
    status: str
    value: int | None
    config: GemmConfig | None
