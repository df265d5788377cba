"""Steps that must finish once begun, with Ctrl-C and SIGTERM held back until they have.

The command line turns SIGINT and SIGTERM into exceptions raised wherever the main thread is
(:mod:`ckspace.cli`), which is what lets cleanup handlers run. But a cleanup handler can itself be
cut short that way: removing the previous model that a swap moved aside, or stopping and joining
the solver's thread, left half-done, leaves debris or a live C++ thread at exit. Such a step runs
inside :func:`signals_deferred`.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager

STOPPING = (signal.SIGINT, signal.SIGTERM)
"""The signals a user stops ckspace with."""


@contextmanager
def signals_deferred() -> Iterator[None]:
    """Run the block with SIGINT and SIGTERM held back, then handle them with the handlers in place
    before, as if they had just arrived (also when the block raised: the signal's exception then
    takes over, so a SIGTERM still ends the command with its own status). Outside the main thread
    this holds nothing back: Python runs signal handlers in the main thread only, so none can
    interrupt another thread."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    held: list[int] = []
    previous: dict[int, object] = {}
    try:
        for signum in STOPPING:
            previous[signum] = signal.signal(signum, lambda caught, _frame: held.append(caught))
        yield
    finally:
        for signum, handler in previous.items():  # None: a handler not set from Python, the default
            signal.signal(signum, signal.SIG_DFL if handler is None else handler)
        for signum in held:  # its handler runs here, inside raise_signal
            signal.raise_signal(signum)
