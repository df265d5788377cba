"""The measurement CSV of a sweep: created whole, appended a whole row per pair, resumed.

Rows are appended with one ``write`` on a file opened for appending, so a sweep killed at any point
leaves only whole rows (a write that a full disk cut short is the one torn line possible).
``--resume`` reads the pairs already done and checks that the file belongs to the same problem
list, so a resumed sweep writes exactly the rows an uninterrupted one would.

Nothing of anyone else's is lost: the file is checked whole (ckspace's header, every complete line a
row of these problems, UTF-8) before a byte of it changes, so a foreign or mismatched file is refused
untouched; only then is an unterminated last line that can be the start of a row (ckspace's own torn
write) dropped. A symbolic link, fifo or directory is refused, never followed or read; a new file is
created whole and never replaces one that appeared meanwhile; and a file is written by one sweep at
a time (an exclusive lock on it while a sweep holds it open).
"""

from __future__ import annotations

import csv
import errno
import fcntl
import io
import logging
import os
import stat
from pathlib import Path

from ckspace.core.errors import CkspaceError, InvalidInputError
from ckspace.environment.files import create_new, refuse_foreign
from ckspace.environment.inputs import file_kind
from ckspace.workloads.measurement import COLUMNS, problem_from_row
from ckspace.workloads.problem import ConvProblem

log = logging.getLogger(__name__)


def _line(row: dict[str, str]) -> bytes:
    text = io.StringIO()
    csv.DictWriter(text, fieldnames=COLUMNS, lineterminator="\n").writerow(row)
    return text.getvalue().encode()


class ResultsFile:
    """The sweep's output; :meth:`open` creates or resumes it, :meth:`append` adds one row."""

    def __init__(self, path: Path, fd: int, done: set[tuple[str, int]]) -> None:
        self.path = path
        self.done = done
        self._fd = fd

    @classmethod
    def open(cls, path: Path, resume: bool, problems: tuple[ConvProblem, ...]) -> ResultsFile:
        """A new file with the header, or (``resume``) the pairs an existing one holds. An existing
        file without ``--resume`` is refused, never replaced; so is a link, fifo or directory."""
        refuse_foreign(path, "--out")
        exists = path.exists()
        if exists and not resume:
            raise InvalidInputError(f"--out {path} exists: --resume to continue that sweep, or choose another --out")
        if not exists:
            header = io.StringIO()
            csv.writer(header, lineterminator="\n").writerow(COLUMNS)
            try:
                fd = create_new(path, header.getvalue().encode(), "--out")
            except FileExistsError:
                raise InvalidInputError(
                    f"--out {path} exists (another bench created it just now): --resume to "
                    "continue that sweep, or choose another --out"
                ) from None
            except OSError as exc:
                raise CkspaceError(f"cannot create --out {path}: {exc.strerror}") from None
        else:
            fd = _open_existing(path)
        try:
            _locked(fd, path)
            done = _resume(fd, path, problems) if exists else set()
        except BaseException:
            os.close(fd)
            raise
        return cls(path, fd, done)

    def append(self, row: dict[str, str]) -> None:
        os.write(self._fd, _line(row))
        self.done.add((row["kernel"], int(row["problem_idx"])))

    def close(self) -> None:
        os.close(self._fd)


def _open_existing(path: Path) -> int:
    """``path`` opened to read and append, never through a link nor waiting on a fifo: the flags
    and the check of the open descriptor of :func:`~ckspace.environment.inputs.read_input`, which this file
    cannot use (it is opened for appending too, and must not be a link)."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise InvalidInputError(
                f"--out {str(path)!r} is a symbolic link; ckspace does not write through links, give the target path"
            ) from None
        raise CkspaceError(f"cannot open --out {path} to resume it: {exc.strerror}") from None
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise InvalidInputError(f"--out {str(path)!r} is {file_kind(mode)}, not a regular file")
    os.set_blocking(fd, True)
    return fd


def _locked(fd: int, path: Path) -> None:
    """``fd`` with an exclusive lock: a second bench of the same file is refused, not interleaved."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        raise InvalidInputError(
            f"--out {path} is being written by another ckspace bench; wait for it to end "
            "(then --resume), or choose another --out"
        ) from None
    except OSError:
        pass  # a file system without locks: the sweep goes on unguarded, as before


def _read_all(fd: int) -> bytes:
    chunks, offset = [], 0
    while chunk := os.pread(fd, 1 << 20, offset):
        chunks.append(chunk)
        offset += len(chunk)
    return b"".join(chunks)


def _resume(fd: int, path: Path, problems: tuple[ConvProblem, ...]) -> set[tuple[str, int]]:
    """The pairs of the results file open as ``fd``, all of it checked before its torn last row
    (if any) is dropped; any refusal leaves the file as it was."""
    data = _read_all(fd)
    cut = data.rfind(b"\n") + 1
    done = _read_done(path, data[:cut], problems)
    torn = data[cut:]
    if torn:
        if not _row_start(torn, problems):
            raise InvalidInputError(
                f"--resume: {path} ends in a line that is neither a bench row nor the start of "
                "one (not a results file ckspace wrote); choose another --out"
            )
        log.warning("%s: dropping a torn last row (%d bytes) before resuming", path, len(torn))
        os.ftruncate(fd, cut)
    return done


_NAME_START = "grouped_conv_"
"""How every kernel name begins (:mod:`ckspace.core.naming`)."""


def _row_start(torn: bytes, problems: tuple[ConvProblem, ...]) -> bool:
    """Whether an unterminated last line can be a row ckspace's append was cut short in: no more
    columns than a row, a kernel name first, then (if written whole) one of the problems' indices."""
    text = torn.decode("utf-8", errors="replace")
    if "\r" in text:
        return False
    try:
        fields = next(csv.reader([text]), [])
    except csv.Error:
        return False
    name = fields[0] if fields else ""
    if not name or len(fields) > len(COLUMNS) or not (name.startswith(_NAME_START) or _NAME_START.startswith(name)):
        return False
    if len(fields) > 2:  # problem_idx is complete
        return fields[1].isdigit() and int(fields[1]) < len(problems)
    return True


def _read_done(path: Path, data: bytes, problems: tuple[ConvProblem, ...]) -> set[tuple[str, int]]:
    """The (kernel, problem_idx) pairs of the complete lines ``data`` of a results file, checked
    against ``problems``."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidInputError(
            f"--resume: {path} is not a results file of ckspace bench (not UTF-8 text); choose another --out"
        ) from None
    reader = csv.DictReader(io.StringIO(text, newline=""))
    try:
        columns = tuple(reader.fieldnames or ())
    except csv.Error:
        columns = ()
    if columns != COLUMNS:
        raise InvalidInputError(
            f"--resume: {path} is not a results file of this ckspace version's bench "
            "(its columns differ); choose another --out"
        )
    done = set()
    try:
        for line, row in enumerate(reader, start=2):
            try:
                if None in row or any(value is None for value in row.values()):
                    raise InvalidInputError(f"{len(COLUMNS)} columns expected")
                idx = int(row["problem_idx"])
                problem = problem_from_row(row)
            except (ValueError, CkspaceError) as exc:
                raise InvalidInputError(f"--resume: {path} line {line} is not a bench row ({exc})") from None
            if not 0 <= idx < len(problems) or problems[idx] != problem:
                raise InvalidInputError(
                    f"--resume: {path} line {line}: problem {idx} is {problem.text()}, which is "
                    f"not problem {idx} of --problems; resume with the problems file it was "
                    "started with"
                )
            done.add((row["kernel"], idx))
    except csv.Error as exc:
        raise InvalidInputError(f"--resume: {path} is not a results file of ckspace bench ({exc})") from None
    return done
