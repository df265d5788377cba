"""Compiling translation units on this machine with a generated ``build.ninja``.

``ninja -k 0``: one failure never stops the others; ``-j`` bounds the compiles running at once.
The units' sources are the emitted tree itself, which ninja's compiles read in place.
"""

from __future__ import annotations

import io
import logging
import os
import re
import shlex
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

from ninja import ninja_syntax

from ckspace.compiling.executor import Unit, UnitResult
from ckspace.compiling.toolchain import Toolchain
from ckspace.core.errors import CkspaceError
from ckspace.emit.manifest import LOGS_FOLDER, OBJECTS_FOLDER, logs_dir, objects_dir
from ckspace.environment.files import generated, write_if_changed

log = logging.getLogger(__name__)

PLACEHOLDERS = ("$in", "$out")
FINISHED = re.compile(r"\[\d+/\d+\] CXX tu/(\S+)\.cpp$")
"""The line ninja prints (``NINJA_STATUS`` ``[%f/%t] `` then the rule's description) as a unit's
compile finishes, when its output is not a terminal: it names the unit."""
UNWRAPPED = 1 << 30
"""A line width no ninja file of ckspace reaches (see :func:`ninja_writer`)."""


def ninja_binary() -> str:
    """The ``ninja`` of the ninja PyPI package (a dependency), else one on PATH."""
    try:
        from ninja import BIN_DIR  # type: ignore[import-untyped]

        candidate = Path(BIN_DIR) / "ninja"
        if candidate.is_file():
            return str(candidate)
    except ImportError:
        pass
    found = shutil.which("ninja")
    if found is None:
        raise CkspaceError("ninja not found (pip install ninja)")
    return found


def command_value(words: list[str]) -> str:
    """``words`` as the value of a rule's ``command``: each shell-quoted for the shell ninja runs it
    with, then ``$``-escaped (:func:`ninja_syntax.escape`: in a value only ``$`` is ninja's), so a
    compiler or an include directory whose path holds spaces, colons or ``$`` reaches the compiler
    intact; ninja's own ``$in`` and ``$out`` stay variables."""
    return " ".join(w if w in PLACEHOLDERS else ninja_syntax.escape(shlex.quote(w)) for w in words)


def ninja_writer(text: io.StringIO) -> ninja_syntax.Writer:
    """A writer of ninja syntax into ``text`` that never wraps a line: it would wrap at a space, and
    ninja drops the spaces that begin a continued line, so a path holding two spaces in a row could
    lose one."""
    return ninja_syntax.Writer(text, width=UNWRAPPED)


def _write_ninja(path: Path, units: list[Unit], toolchain: Toolchain, includes: tuple[str, ...]) -> None:
    """One rule, :meth:`Toolchain.compile_command` with ninja's ``$in``/``$out`` and its output sent
    to the unit's log; one build per unit, between relative paths of names ckspace chose."""
    text = io.StringIO()
    ninja = ninja_writer(text)
    ninja.comment(generated("ckspace build"))
    ninja.rule("cxx", command_value(toolchain.compile_command(*PLACEHOLDERS, includes)) + " > $log 2>&1", "CXX $in")
    for unit in units:
        ninja.newline()
        ninja.build(
            f"{OBJECTS_FOLDER}/{unit.name}.o",
            "cxx",
            f"tu/{unit.name}.cpp",
            variables={"log": f"{LOGS_FOLDER}/{unit.name}.log"},
        )
    write_if_changed(path, text.getvalue().encode())


def _run_ninja(build_dir: Path, ninja_file: str, jobs: int, units: list[Unit], advance: Callable[[Unit], None]) -> None:
    """Run ninja on ``ninja_file``, calling ``advance(unit)`` as each unit's compile finishes (by
    ninja's status line, :data:`FINISHED`) and, once ninja has exited, for those it never named."""
    env = {**os.environ, "NINJA_STATUS": "[%f/%t] "}
    command = [ninja_binary(), "-C", str(build_dir), "-f", ninja_file, "-k", "0", "-j", str(jobs)]
    log.info("running %s", " ".join(command))
    pending = {unit.name: unit for unit in units}
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env) as proc:
        assert proc.stdout is not None
        for line in proc.stdout:
            match = FINISHED.match(line.rstrip())
            if match and match.group(1) in pending:
                advance(pending.pop(match.group(1)))
            log.debug("ninja: %s", line.rstrip())
        proc.wait()
    for unit in pending.values():
        advance(unit)


class NinjaExecutor:
    """Units compiled under ``build_dir`` (``tu/``, ``obj/``, ``logs/``, ``<stage>.ninja``)."""

    def __init__(self, build_dir: Path, toolchain: Toolchain, includes: tuple[str, ...], jobs: int) -> None:
        self.build_dir = build_dir
        self.toolchain = toolchain
        self.includes = includes
        self.jobs = jobs

    def compile(self, stage: str, units: list[Unit], advance: Callable[[Unit], None]) -> dict[str, UnitResult]:
        for unit in units:
            write_if_changed(self.build_dir / "tu" / f"{unit.name}.cpp", unit.text.encode())
            (objects_dir(self.build_dir) / f"{unit.name}.o").unlink(missing_ok=True)
        logs_dir(self.build_dir).mkdir(parents=True, exist_ok=True)
        _write_ninja(self.build_dir / f"{stage}.ninja", units, self.toolchain, self.includes)
        _run_ninja(self.build_dir, f"{stage}.ninja", self.jobs, units, advance)
        results = {}
        for unit in units:
            obj = objects_dir(self.build_dir) / f"{unit.name}.o"
            unit_log = logs_dir(self.build_dir) / f"{unit.name}.log"
            text = unit_log.read_text(errors="replace") if unit_log.is_file() else ""
            results[unit.name] = UnitResult(object=obj.read_bytes() if obj.is_file() else None, log=text)
        return results
