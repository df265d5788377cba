"""The measurement CSV of a sweep: created whole, appended a whole row per pair, resumed.

Rows are appended with one ``write`` on a file opened for appending, so a sweep killed at any point
leaves only whole rows (a write that a full disk cut short is the one torn line possible; resuming
drops it, since only ckspace appends to the file). ``--resume`` reads the pairs already done and
checks that the file belongs to the same problem list, so a resumed sweep writes exactly the rows an
uninterrupted one would.
"""

from __future__ import annotations

import csv
import io
import logging
import os
from pathlib import Path

from ckspace.core.errors import CkspaceError, InvalidInputError
from ckspace.core.files import write_atomic
from ckspace.core.measurement import COLUMNS, problem_from_row
from ckspace.core.problem import ConvProblem

log = logging.getLogger(__name__)


def _line(row: dict[str, str]) -> bytes:
    text = io.StringIO()
    csv.DictWriter(text, fieldnames=COLUMNS, lineterminator="\n").writerow(row)
    return text.getvalue().encode()


class ResultsFile:
    """The sweep's output; :meth:`open` creates or resumes it, :meth:`append` adds one row."""

    def __init__(self, path: Path, done: set[tuple[str, int]]) -> None:
        self.path = path
        self.done = done
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND)

    @classmethod
    def open(cls, path: Path, resume: bool, problems: tuple[ConvProblem, ...]) -> "ResultsFile":
        """A new file with the header, or (``resume``) the pairs an existing one holds. An existing
        file without ``--resume`` is refused, never replaced."""
        if path.exists() and not resume:
            raise InvalidInputError(f"--out {path} exists: --resume to continue that sweep, or choose another --out")
        if not path.exists():
            header = io.StringIO()
            csv.writer(header, lineterminator="\n").writerow(COLUMNS)
            write_atomic(path, header.getvalue().encode())
            return cls(path, set())
        return cls(path, _read_done(path, problems))

    def append(self, row: dict[str, str]) -> None:
        os.write(self._fd, _line(row))
        self.done.add((row["kernel"], int(row["problem_idx"])))

    def close(self) -> None:
        os.close(self._fd)


def _read_done(path: Path, problems: tuple[ConvProblem, ...]) -> set[tuple[str, int]]:
    """The (kernel, problem_idx) pairs of an existing results file, checked against ``problems``."""
    data = path.read_bytes()
    if data and not data.endswith(b"\n"):
        cut = data.rfind(b"\n") + 1
        log.warning("%s: dropping a torn last row (%d bytes) before resuming", path, len(data) - cut)
        with open(path, "r+b") as handle:
            handle.truncate(cut)
        data = data[:cut]
    reader = csv.DictReader(io.StringIO(data.decode("utf-8", errors="replace")))
    if tuple(reader.fieldnames or ()) != COLUMNS:
        raise InvalidInputError(f"--resume: {path} is not a results file of this ckspace version's bench "
                                "(its columns differ); choose another --out")
    done = set()
    for line, row in enumerate(reader, start=2):
        try:
            idx = int(row["problem_idx"])
            problem = problem_from_row(row)
        except (ValueError, CkspaceError) as exc:
            raise InvalidInputError(f"--resume: {path} line {line} is not a bench row ({exc})") from None
        if not 0 <= idx < len(problems) or problems[idx] != problem:
            raise InvalidInputError(f"--resume: {path} line {line}: problem {idx} is {problem.text()}, which is not "
                                    f"problem {idx} of --problems; resume with the problems file it was started with")
        done.add((row["kernel"], idx))
    return done
