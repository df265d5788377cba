"""``ckspace enumerate``: count or list the kernels a rule set emits."""

from __future__ import annotations

import argparse
import csv
import json
from typing import TextIO

from ckspace.commands.common import (
    add_ck_argument,
    add_space_arguments,
    space_from_args,
)
from ckspace.core.errors import InvalidChoiceError

NAME = "enumerate"
HELP = "count or list the kernels a rule set emits"
FORMATS = ("names", "json", "jsonl", "csv")


def configure(parser: argparse.ArgumentParser) -> None:
    add_space_arguments(parser)
    add_ck_argument(parser)
    what = parser.add_mutually_exclusive_group(required=True)
    what.add_argument("--count", action="store_true", help="print the number of kernels")
    what.add_argument("--list", action="store_true", help="print the kernels")
    parser.add_argument("--format", default="names", help=f"list format: {', '.join(FORMATS)} (default: names)")
    parser.add_argument("--raw", action="store_true",
                        help="the rule set's proposals before the validity filter (with a 'valid' field)")


def run(args: argparse.Namespace, out: TextIO) -> int:
    if args.format not in FORMATS:
        raise InvalidChoiceError("format", args.format, FORMATS)
    kernels = space_from_args(args).kernels(raw=args.raw)
    if args.count:
        out.write(f"{sum(1 for _ in kernels)}\n")
        return 0
    if args.format == "names":
        out.writelines(f"{name}\n" for name in sorted(k.name for k in kernels))
        return 0
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
    return 0
