"""``ckspace enumerate``: count or list the kernels a rule set emits.

A rule set without a table (``open``) is counted exactly without listing, and its listing is
streamed to stdout as it is produced, in rank order (not sorted by name), with constant memory:
it can be far larger than memory, so it is the one output not assembled before it is written.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import sys
import textwrap
from typing import TextIO

from ckspace.commands.common import add_format_argument, add_space_arguments, space_from_args, write_report
from ckspace.core.vocab import NDIMS, Dtype, Variant, csv_cell

NAME = "enumerate"
HELP = "count or list the kernels a rule set emits"
FORMATS = ("names", "json", "jsonl", "csv")
ORDER = (
    "The order of the --variant, --ndim and --dtype values does not matter. The sampling rule sets "
    "(full-tests, tiny) select from the emission order of the whole request, which upstream's "
    "generator takes in the order its caller gives; ckspace always asks in the order of upstream's "
    f"command line ({', '.join(v.value for v in Variant)}; {', '.join(map(str, NDIMS))}; "
    f"{', '.join(d.value for d in Dtype)}), so every order lists the same kernels. Which cells are "
    "asked together still matters: --variant all gives other subsets per cell than one variant."
)
"""Why a sampling rule set's answer depends on the cells asked but not on their order (the order
itself is :class:`~ckspace.core.cells.Request`'s)."""


def configure(parser: argparse.ArgumentParser) -> None:
    parser.description = f"{HELP}.\n\n{textwrap.fill(ORDER, 100, break_on_hyphens=False)}"
    add_space_arguments(parser)
    what = parser.add_mutually_exclusive_group(required=True)
    what.add_argument("--count", action="store_true", help="print the number of kernels")
    what.add_argument("--list", action="store_true", help="print the kernels")
    add_format_argument(
        parser,
        FORMATS,
        "; with --count, json prints the count and the target as an object, any other format the bare number",
    )
    parser.add_argument(
        "--raw", action="store_true", help="the rule set's proposals before the validity filter (with a 'valid' field)"
    )


def run(args: argparse.Namespace, out: TextIO) -> int:
    space = space_from_args(args)
    _say_target(space)
    if args.count:
        count = len(space.kernels(raw=True)) if args.raw else space.count()
        write_report(
            out,
            args.format,
            {"count": count, "raw": bool(args.raw), "target": space.target.record()},
            lambda report: f"{report['count']}\n",
        )
        return 0
    if space.open and not args.raw:
        _stream(space, args.format, sys.stdout)
        return 0
    kernels = space.kernels(raw=args.raw)
    if args.format == "names":
        out.writelines(f"{name}\n" for name in sorted(k.name for k in kernels))
        return 0
    records = sorted((k.record() for k in kernels), key=lambda r: r["name"])
    if not args.raw:
        for record in records:
            del record["valid"]
    write_report(out, args.format, records, _jsonl if args.format == "jsonl" else _csv, indent=1)
    return 0


def _jsonl(records: list[dict]) -> str:
    return "".join(json.dumps(r) + "\n" for r in records)


def _csv(records: list[dict], columns: list[str] | None = None, header: bool = True) -> str:
    """The CSV rows of ``records`` (values as every ckspace CSV spells them), after the header line
    when ``header``; ``columns`` None: every key of the records, in order of first appearance."""
    text = io.StringIO()
    columns = columns if columns is not None else list(dict.fromkeys(key for r in records for key in r))
    writer = csv.DictWriter(text, fieldnames=columns, lineterminator="\n")
    if header:
        writer.writeheader()
    writer.writerows({key: csv_cell(value) for key, value in r.items()} for r in records)
    return text.getvalue()


def _say_target(space) -> None:
    """The target on stderr (stdout is data), and once what the CK leaves out of the rule set's
    kernels: both cached listings, so it costs no computation beyond the answer's."""
    sys.stderr.write(space.target.describe() + "\n")
    if space.target.rules_only or space.open:
        return
    rule_space = space.for_ck(None)
    whole, here = rule_space.count(), space.count()
    if here < whole:
        why = (
            f"need a newer CK than the one at {space.target.ck.include_dir} or are known to give wrong results"
            if space.target.ck
            else "are known to give wrong results"
        )
        sys.stderr.write(f"{whole - here} of the rule set's {whole} kernels {why}; --rules-only counts them\n")


def _stream(space, fmt: str, sink: TextIO, chunk: int = 4096) -> None:
    """Write an ``open`` listing as it is produced, ``chunk`` kernels per write, with a rich progress
    bar on stderr when it is a terminal."""
    from itertools import islice

    from rich.progress import Progress

    kernels = space.iter_kernels()
    total = space.count()
    columns = None
    with Progress(transient=True, disable=not sys.stderr.isatty()) as progress:
        task = progress.add_task("listing", total=total)
        if fmt == "json":
            sink.write("[")
        first = True
        while batch := list(islice(kernels, chunk)):
            if fmt == "names":
                sink.write("".join(f"{k.name}\n" for k in batch))
            else:
                records = [{key: v for key, v in k.record().items() if key != "valid"} for k in batch]
                if fmt == "jsonl":
                    sink.write(_jsonl(records))
                elif fmt == "json":
                    sink.write(("" if first else ",") + ",".join("\n" + json.dumps(r) for r in records))
                else:
                    header, columns = columns is None, columns or list(records[0])
                    sink.write(_csv(records, columns, header))
            first = False
            progress.advance(task, len(batch))
        if fmt == "json":
            sink.write("\n]\n")
