"""Progress bars: one look for every long step (builds, benches, training, plans).

A bar counts done of total with the step's name, a bar, ``done/total`` and the time elapsed, plus
any columns a caller adds (a rate, an ETA). ``enabled`` is the caller's decision (usually: is the
stream a terminal); a disabled bar draws nothing and costs nothing. rich is imported only when a
bar is made, so commands that never draw one do not load it.

Where no bar is drawn (stderr is a pipe, a file, a CI log), a step of minutes would be silent, so
:func:`counted_steps` says a line per finished item instead (:func:`step_line`, at :data:`NOTICE`).
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

log = logging.getLogger(__name__)

NOTICE = logging.INFO + 5
"""Log level of the one line said before a step that takes seconds and draws no bar (compiling the
selector): the command line shows it without -v, while a program using ckspace as a library sees it
only if it asks for INFO (Python's last-resort handler prints WARNING and above)."""
logging.addLevelName(NOTICE, "NOTICE")


def counting_bar(*, enabled: bool, transient: bool = False, stderr: bool = False, extra: tuple[Any, ...] = ()) -> Any:
    """A ``rich.progress.Progress`` with the standard columns then ``extra`` (rich columns);
    ``stderr``: draw there (else rich's default console, stdout); ``transient``: erase it when done,
    so what is printed afterwards stands alone."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), *extra)
    console = Console(file=sys.stderr) if stderr else None
    return Progress(*columns, console=console, transient=transient, disable=not enabled)


def step_line(label: str, done: int, total: int, item: str, started: float) -> None:
    """The line said, where no bar is drawn, when ``item`` (the ``done``-th of ``total``) of the
    step ``label`` has finished, ``started`` (``time.monotonic()``) being when the step began:
    ``compiling gfx942: 3/40 NAME (12 s)``. At :data:`NOTICE`: the command line shows it, a
    program using ckspace as a library only if it asks for INFO."""
    log.log(NOTICE, "%s: %d/%d %s (%.0f s)", label, done, total, item, time.monotonic() - started)


@contextmanager
def counted_steps(label: str, total: int, *, bar: bool) -> Iterator[Callable[[list[str]], None]]:
    """Progress of a step of ``total`` items: yields ``finished(items)``, to be called with the
    names of the items that have just finished. With ``bar`` (stderr is a terminal) a bar on stderr
    counts them; without, each finished item is a :func:`step_line`, so a piped step of minutes
    still says how far it is."""
    if bar:
        with counting_bar(enabled=True, stderr=True) as progress:
            task = progress.add_task(label, total=total)
            yield lambda items: progress.advance(task, len(items))
        return
    started, done = time.monotonic(), 0

    def finished(items: list[str]) -> None:
        nonlocal done
        for item in items:
            done += 1
            step_line(label, done, total, item, started)

    yield finished
