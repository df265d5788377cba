"""Pydantic's validation errors as ckspace's bad-input error.

The configs and ``ConvProblem`` are pydantic models; constructing one with a bad value raises
pydantic's ``ValidationError``. The API promises a :class:`~ckspace.core.errors.CkspaceError` for
bad input, so the models turn it into an :class:`~ckspace.core.errors.InvalidInputError` (still a
``ValueError``) naming the first bad field and its value. Kept out of ``errors`` so that importing
the error types does not import pydantic (a warm cache hit never does).
"""

from __future__ import annotations

from pydantic import ValidationError

from ckspace.core.errors import InvalidInputError


def invalid_input(what: str, exc: ValidationError) -> InvalidInputError:
    """One line: ``what``, the first bad field with its value, and pydantic's reason."""
    first = exc.errors()[0]
    where = ".".join(str(p) for p in first.get("loc", ()))
    reason = first["msg"].removeprefix("Value error, ")
    if where:
        return InvalidInputError(f"{what} {where}={first.get('input')!r}: {reason}")
    return InvalidInputError(f"{what}: {reason}")
