"""The ``ckspace`` command line.

Bad input is one line on stderr naming the bad value and the valid choices, and exit status 2.
Output is assembled first and written at the end, so a failing command prints nothing half-done.
Answers served from the cache load neither numpy, pydantic nor the solver.
"""

from __future__ import annotations

import argparse
import importlib
import io
import logging
import sys
from collections.abc import Sequence

from ckspace import __version__
from ckspace.commands import COMMANDS
from ckspace.core.errors import CkspaceError, NoKernelError


class _Parser(argparse.ArgumentParser):
    """argparse, but errors are the one line the rest of the CLI prints too."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise CkspaceError(message)


def _parser() -> tuple[argparse.ArgumentParser, dict]:
    parser = _Parser(prog="ckspace", description="The space of AMD CK Tile grouped-convolution kernels.")
    parser.add_argument("--version", action="version", version=f"ckspace {__version__}")
    parser.add_argument("-v", "--verbose", action="count", default=0, help="log progress (-vv: debug)")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    modules = {}
    for name in COMMANDS:
        module = importlib.import_module(f"ckspace.commands.{name}")
        module.configure(sub.add_parser(module.NAME, help=module.HELP, description=module.HELP))
        modules[module.NAME] = module
    return parser, modules


def main(argv: Sequence[str] | None = None) -> int:
    try:
        parser, modules = _parser()
        args = parser.parse_args(argv)
        logging.basicConfig(level=[logging.WARNING, logging.INFO, logging.DEBUG][min(args.verbose, 2)],
                            format="ckspace: %(message)s")
        buffer = io.StringIO()
        status = modules[args.command].run(args, buffer)
        sys.stdout.write(buffer.getvalue())
        sys.stdout.flush()
        return status
    except NoKernelError as exc:  # a valid question with a negative answer
        print(f"ckspace: {exc}", file=sys.stderr)
        return 1
    except CkspaceError as exc:
        print(f"ckspace: error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
