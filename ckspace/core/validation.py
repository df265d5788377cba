"""Pydantic's validation errors as ckspace's bad-input error.

The configs and ``ConvProblem`` are pydantic models; constructing one with a bad value raises
pydantic's ``ValidationError``. The API promises a :class:`~ckspace.core.errors.CkspaceError` for
bad input, so the models turn it into an :class:`~ckspace.core.errors.InvalidInputError` (still a
``ValueError``) naming the first bad field and its value. Kept out of ``errors`` so that importing
the error types does not import pydantic (a warm cache hit never does).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ValidationError

from ckspace.core.errors import InvalidChoiceError, InvalidInputError


def invalid_input(what: str, exc: ValidationError) -> InvalidInputError:
    """One line: ``what``, the first bad field with its value, and pydantic's reason."""
    first = exc.errors()[0]
    where = ".".join(str(p) for p in first.get("loc", ()))
    reason = first["msg"].removeprefix("Value error, ")
    if where:
        return InvalidInputError(f"{what} {where}={first.get('input')!r}: {reason}")
    return InvalidInputError(f"{what}: {reason}")


class CheckedModel(BaseModel):
    """A pydantic model whose construction with a bad value raises :func:`invalid_input`'s error
    (the configs and ``ConvProblem`` derive from it)."""

    def __init__(self, **data: Any) -> None:
        try:
            super().__init__(**data)
        except ValidationError as exc:
            raise self._bad_input(exc) from None

    @classmethod
    def _bad_input(cls, exc: ValidationError) -> InvalidInputError:
        return invalid_input(cls.__name__, exc)

    def replace(self, **changes: Any) -> Any:
        """A copy with ``changes``, validated like a new instance. Pydantic's
        ``model_copy(update=...)`` checks nothing: a misspelt field (``pipline``) or a wrong value
        would give a config that is silently not what was meant."""
        fields = type(self).model_fields
        unknown = [name for name in changes if name not in fields]
        if unknown:
            raise InvalidChoiceError(f"{type(self).__name__} field", unknown[0], fields)
        return type(self)(**{**self.model_dump(), **changes})
