"""Exceptions of ckspace.

Every error a user can cause derives from :class:`CkspaceError`, so callers (and the CLI, which turns
them into one line on stderr and exit status 2) can tell bad input from bugs.
"""

from __future__ import annotations

from collections.abc import Iterable


class CkspaceError(Exception):
    """Base class of the errors ckspace raises on bad input or bad state."""


class InvalidInputError(CkspaceError, ValueError):
    """A value the caller passed is wrong (an empty candidate list, k < 1, a model for another cell):
    bad input, so also a ``ValueError`` for callers that catch the standard type."""


def did_you_mean(value: object, choices: Iterable[object]) -> str:
    """``; did you mean X?`` naming the choice ``value`` most resembles (difflib's ratio at least
    0.6), else nothing: the hint every refusal of an unknown name ends with, so a typo is fixed
    from the message rather than by reading the whole list of valid names."""
    import difflib  # here, not at the top: milliseconds of every start, needed only for a mistake

    close = difflib.get_close_matches(str(value), [str(c) for c in choices], n=1)
    return f"; did you mean {close[0]}?" if close else ""


class InvalidChoiceError(InvalidInputError):
    """A value is not one of the allowed choices; the message names both, and the closest choice
    (:func:`did_you_mean`)."""

    def __init__(self, what: str, value: object, choices: Iterable[object]) -> None:
        self.what = what
        self.value = value
        self.choices = tuple(choices)
        listed = ", ".join(str(c) for c in self.choices)
        super().__init__(f"unknown {what} {value!r}; valid: {listed}{did_you_mean(value, self.choices)}")


class KernelNameError(InvalidInputError):
    """A kernel name does not follow the kernel-name grammar (:mod:`ckspace.core.naming`)."""


class NoKernelError(CkspaceError):
    """A valid question with a negative answer: no candidate kernel (nor a vector-width variant of
    one) can run the problem. The CLI exits 1, not 2. ``blocking`` maps each candidate to the
    problem rules that block it."""

    def __init__(self, message: str, blocking: dict[str, tuple[str, ...]]) -> None:
        super().__init__(message)
        self.blocking = blocking


class CkHeadersNotFound(CkspaceError):
    """No CK Tile headers at any place ckspace looks (``looked`` lists them): for the default target
    a fact (the rule space is answered for instead), for ``emit`` and ``build`` an error."""

    def __init__(self, message: str, looked: str) -> None:
        super().__init__(message)
        self.looked = looked
