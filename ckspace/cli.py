"""The ``ckspace`` command line.

Bad input is one line on stderr naming the bad value and the valid choices, and exit status 2; a
valid question with a negative answer exits 1. Output is assembled first and written at the end,
so a failing command prints nothing half-done. Ctrl-C and SIGTERM end quietly with 130 and 143
(every file ckspace writes is written whole or not at all). Answers served from the cache load
neither numpy, pydantic nor the solver.

Signals: :func:`main` installs its handlers first and imports everything else only after that (the
commands, argparse, logging, ckspace's errors), so a signal while they load ends as quietly as one
later. At its top this module imports nothing that Python has not loaded at start-up but ``signal``,
and the package's ``__init__`` nothing at all: the console script's ``import ckspace.cli`` takes a
tenth of the time it took when it loaded those too (a Ctrl-C then was a KeyboardInterrupt
traceback). A signal that arrives before Python runs ``main`` at all (interpreter start-up, ``import
ckspace.cli``) cannot be handled by ckspace: Python's defaults apply, death by the signal (a shell
reports 130 or 143) or, for SIGINT once the interpreter has its own handler, a KeyboardInterrupt
traceback (then exit status 1, or death by SIGINT). Nothing has been written then. ``python -m
ckspace`` narrows that window (its ``__main__`` installs handlers before importing this module). Nor
can a signal that arrives after ``main`` has returned, while the interpreter shuts down (it resets
the handlers): death by the signal, with every file already written.
A test or supervisor that must not race start-up sets ``CKSPACE_TEST_READY_FD`` to an inherited
file descriptor: ``main`` writes ``ready`` to it and closes it once its handlers are installed.
"""

import os
import signal
import sys

from ckspace import __version__

# No `from __future__ import annotations` either: it imports the __future__ module before main;
# annotations that name what loads later are strings.
TYPE_CHECKING = False  # not typing's: importing typing before main would widen the window above
if TYPE_CHECKING:
    import argparse
    from collections.abc import Sequence

READY_FD = "CKSPACE_TEST_READY_FD"
"""Environment variable naming the descriptor :func:`main` reports readiness on (see above)."""


class _Terminated(BaseException):
    """SIGTERM, raised where the process is, so cleanup handlers (temporary files) run."""


def _on_sigterm(signum: int, frame: object) -> None:
    raise _Terminated()


def _parser() -> "tuple[argparse.ArgumentParser, dict]":
    """The parser of every command, and the command modules by name. The commands are imported
    here, not at the top, so that :func:`main` has its signal handlers before they load."""
    import argparse
    import importlib

    from ckspace.commands import COMMANDS
    from ckspace.commands.common import format_choices, help_epilog
    from ckspace.commands.parsing import StrictParser

    parser = StrictParser(
        prog="ckspace",
        description="The space of AMD CK Tile grouped-convolution kernels.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"ckspace {__version__}")
    _add_globals(parser, argparse.SUPPRESS)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=StrictParser)
    modules = {}
    for name in COMMANDS:
        module = importlib.import_module(f"ckspace.commands.{name}")
        command = sub.add_parser(module.NAME, help=module.HELP, description=module.HELP)
        _add_globals(command, argparse.SUPPRESS)
        module.configure(command)
        modules[module.NAME] = module
    parser.epilog = help_epilog(
        {name: choices for name, command in sub.choices.items() if (choices := format_choices(command))}
    )
    return parser, modules


def _add_globals(parser: "argparse.ArgumentParser", default: object) -> None:
    """-v and --cache-dir, accepted before or after the subcommand (SUPPRESS: a subcommand's
    parser does not reset what the main parser read)."""
    parser.add_argument("-v", "--verbose", action="count", default=default, help="log progress (-vv: debug)")
    parser.add_argument(
        "--cache-dir",
        metavar="DIR",
        default=default,
        help="cache directory for this run (default: $CKSPACE_CACHE_DIR, ~/.cache/ckspace)",
    )


def _write(text: str) -> None:
    """Write the command's output to stdout. A character stdout's encoding cannot represent
    (``PYTHONIOENCODING=ascii``, a Latin-1 locale) is written as its backslash escape (``\\xfc``)
    rather than failing the command: the JSON, CSV and name outputs are ASCII whatever the input
    (JSON escapes, kernel names, field values), so such a character is in a text or markdown report
    (a path the user gave, a rule's prose), which reads well enough escaped, while failing would hide
    the report of work already done (emit's files are written) behind a status that says it failed."""
    from ckspace.core.errors import CkspaceError

    try:
        encoding = sys.stdout.encoding or "utf-8"
        sys.stdout.write(text.encode(encoding, "backslashreplace").decode(encoding))
        sys.stdout.flush()
    except (AttributeError, ValueError):  # stdout closed (no file, or closed file object)
        raise CkspaceError("stdout is closed") from None


def main(argv: "Sequence[str] | None" = None) -> int:
    """Run ``ckspace argv`` (default: the process's arguments); returns the exit status.

    Once its handlers are installed (its first lines), Ctrl-C ends the command with 130 and
    SIGTERM with 143, quietly, while the commands load too; the handlers in place before are
    restored on return (``main`` is also called in-process, by tests and scripts). A signal before
    Python runs this function is beyond its reach (see the module's docstring)."""
    previous = signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)
    try:
        signal.signal(signal.SIGTERM, _on_sigterm)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        return _main(argv)
    except KeyboardInterrupt:
        return _fail("ckspace: interrupted", 130)
    except _Terminated:
        return _fail("ckspace: terminated", 143)
    finally:
        signal.signal(signal.SIGTERM, previous[0])
        signal.signal(signal.SIGINT, previous[1])


def _tell_ready() -> None:
    """Write ``ready`` to the descriptor ``$CKSPACE_TEST_READY_FD`` names, and close it: from now
    on a signal ends the command quietly. The variable is removed, so the report is made once and
    no process ckspace starts inherits it."""
    from ckspace.core.errors import InvalidInputError

    value = os.environ.pop(READY_FD, None)
    if value is None:
        return
    try:
        fd = int(value)
        os.write(fd, b"ready\n")
        os.close(fd)
    except (ValueError, OverflowError, OSError):  # OverflowError: a number no descriptor has
        raise InvalidInputError(
            f"{READY_FD} is {value!r}; give the number of a file descriptor open for writing, or unset it"
        ) from None


def _main(argv: "Sequence[str] | None") -> int:
    import io
    import logging

    from ckspace.core.errors import CkspaceError, InvalidInputError, NoKernelError

    try:
        _tell_ready()
        parser, modules = _parser()
        tokens = list(sys.argv[1:] if argv is None else argv)
        if sum(t == "--cache-dir" or t.startswith("--cache-dir=") for t in tokens) > 1:
            # the main parser and the subcommand's each see it once: count it over the whole line
            raise InvalidInputError("--cache-dir is given twice; it takes one value")
        args = parser.parse_args(tokens)
        if args.command is None:
            sys.stdout.write(parser.format_help())
            return 0
        from ckspace.environment.progress import NOTICE  # a compile of seconds is said without -v

        logging.basicConfig(
            level=[NOTICE, logging.INFO, logging.DEBUG][min(getattr(args, "verbose", 0), 2)],
            format="ckspace: %(levelname)s: %(message)s",
            force=True,
        )
        if getattr(args, "cache_dir", None) is not None:
            if not args.cache_dir.strip():
                raise CkspaceError("--cache-dir is empty; give a directory")
            os.environ["CKSPACE_CACHE_DIR"] = args.cache_dir
        buffer = io.StringIO()
        status = modules[args.command].run(args, buffer)
        _write(buffer.getvalue())
        return status
    except NoKernelError as exc:  # a valid question with a negative answer
        return _fail(f"ckspace: {exc}", 1)
    except CkspaceError as exc:
        return _fail(f"ckspace: error: {exc}", 2)
    except BrokenPipeError:
        _silence_stdout()
        return 0
    except OSError as exc:  # the file system said no: a full disk, a read-only directory, a closed stdout
        where = f": {exc.filename!r}" if exc.filename else ""
        return _fail(f"ckspace: error: {exc.strerror or exc}{where}", 2)


def _fail(line: str, status: int) -> int:
    from contextlib import suppress

    with suppress(OSError, ValueError, AttributeError):  # no stderr to say it on: the status says it
        print(" ".join(line.split("\n")), file=sys.stderr)
    return status


def _silence_stdout() -> None:
    """After EPIPE, point stdout at /dev/null so the interpreter's final flush cannot fail again."""
    from contextlib import suppress

    with suppress(OSError, ValueError, AttributeError):
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


if __name__ == "__main__":
    sys.exit(main())
