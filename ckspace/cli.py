"""The ``ckspace`` command line.

Bad input is one line on stderr naming the bad value and the valid choices, and exit status 2.
Answers served from the cache load neither numpy, pydantic nor the solver.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import logging
import sys
from collections.abc import Sequence

from ckspace import __version__
from ckspace.constraints.request import Request
from ckspace.constraints.rulesets import rule_set_names
from ckspace.errors import CkspaceError
from ckspace.space.listing import iter_kernels
from ckspace.space.vocab import Variant

log = logging.getLogger(__name__)

FORMATS = ("names", "json", "jsonl", "csv")


class _Parser(argparse.ArgumentParser):
    """argparse, but errors are the one line the rest of the CLI prints too."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise CkspaceError(message)


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="ckspace", description="The space of AMD CK Tile grouped-convolution kernels.")
    parser.add_argument("--version", action="version", version=f"ckspace {__version__}")
    parser.add_argument("-v", "--verbose", action="count", default=0, help="log progress (-vv: debug)")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    enum = commands.add_parser("enumerate", help="count or list the kernels a rule set emits")
    enum.add_argument("--arch", required=True, help="GPU target, e.g. gfx950")
    enum.add_argument("--variant", required=True, nargs="+", action="extend",
                      help="forward, bwd_data, bwd_weight or all (one or more)")
    enum.add_argument("--ndim", nargs="+", action="extend", help="spatial dims (default: 1 2 3)")
    enum.add_argument("--dtype", nargs="+", action="extend", help="fp16, bf16, fp32 (default: all)")
    enum.add_argument("--rule-set", default="full", help=f"one of {', '.join(rule_set_names())} (default: full)")
    what = enum.add_mutually_exclusive_group(required=True)
    what.add_argument("--count", action="store_true", help="print the number of kernels")
    what.add_argument("--list", action="store_true", help="print the kernels")
    enum.add_argument("--format", default="names", help=f"list format: {', '.join(FORMATS)} (default: names)")
    enum.add_argument("--raw", action="store_true",
                      help="the rule set's proposals before the validity filter (with a 'valid' field)")
    enum.add_argument("--no-cache", action="store_true", help="recompute instead of reading the cache")
    return parser


def _variants(values: Sequence[str]) -> list[str]:
    out: list[str] = []
    for value in values:
        out += [v.value for v in Variant] if value.strip().lower() == "all" else [value]
    return out


def _enumerate(args: argparse.Namespace, out: io.TextIOBase) -> None:
    if args.format not in FORMATS:
        raise CkspaceError(f"unknown format {args.format!r}; valid: {', '.join(FORMATS)}")
    request = Request.build(args.arch, args.rule_set, _variants(args.variant), args.ndim, args.dtype)
    kernels = iter_kernels([request], raw=args.raw, use_cache=not args.no_cache)
    if args.count:
        out.write(f"{sum(1 for _ in kernels)}\n")
        return
    if args.format == "names":
        out.writelines(f"{name}\n" for name in sorted(k.name for k in kernels))
        return
    records = sorted((k.record() for k in kernels), key=lambda r: r["name"])
    if not args.raw:
        for record in records:
            del record["valid"]
    if args.format == "json":
        json.dump(records, out, indent=1)
        out.write("\n")
    elif args.format == "jsonl":
        out.writelines(json.dumps(r) + "\n" for r in records)
    else:
        columns = list(dict.fromkeys(key for r in records for key in r))
        writer = csv.DictWriter(out, fieldnames=columns, lineterminator="\n")
        writer.writeheader()
        writer.writerows(records)


def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = _parser().parse_args(argv)
        logging.basicConfig(level=[logging.WARNING, logging.INFO, logging.DEBUG][min(args.verbose, 2)],
                            format="ckspace: %(message)s")
        buffer = io.StringIO()
        if args.command == "enumerate":
            _enumerate(args, buffer)
        sys.stdout.write(buffer.getvalue())
        sys.stdout.flush()
    except CkspaceError as exc:
        print(f"ckspace: error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        return 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
