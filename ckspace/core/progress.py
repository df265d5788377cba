"""Progress bars: one look for every long step (builds, benches, training, plans).

A bar counts done of total with the step's name, a bar, ``done/total`` and the time elapsed, plus
any columns a caller adds (a rate, an ETA). ``enabled`` is the caller's decision (usually: is the
stream a terminal); a disabled bar draws nothing and costs nothing. rich is imported only when a
bar is made, so commands that never draw one do not load it.
"""

from __future__ import annotations

import logging
import sys
from typing import Any

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
