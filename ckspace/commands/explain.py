"""``ckspace explain``: why a kernel (a name, or a partial config) is or is not in the space."""

from __future__ import annotations

import argparse
from typing import TextIO

from ckspace.commands.common import add_format_argument, add_space_arguments, write_report
from ckspace.core.errors import CkspaceError

NAME = "explain"
HELP = (
    "say why a kernel name or a partial config is or is not a kernel of the space, naming a minimal set of "
    "rules (exit 0 a kernel of the space, 1 not valid, 3 valid but not proposed by the rule set)"
)
EXIT = {"member": 0, "invalid": 1, "not_proposed": 3}
"""explain's exit status per verdict (:data:`ckspace.space.explain.VERDICTS`)."""
FORMATS = ("text", "json")


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("name", nargs="?", help="a kernel name (its variant, ndim and dtype are taken from it)")
    add_space_arguments(parser, variant_required=False)
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="FIELD=VALUE",
        help="a field of a partial config, e.g. --set pipeline=compv4 --set tile_k=32 (repeatable)",
    )
    add_format_argument(parser, FORMATS)


def _partial(pairs: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for pair in pairs:
        field, sep, value = pair.partition("=")
        if not sep or not field.strip() or not value.strip():
            raise CkspaceError(f"--set {pair!r}: expected FIELD=VALUE, e.g. --set tile_k=32")
        if field.strip() in out:
            raise CkspaceError(f"--set {field.strip()} is given twice ({out[field.strip()]!r} and {value.strip()!r})")
        out[field.strip()] = value.strip()
    return out


def run(args: argparse.Namespace, out: TextIO) -> int:
    from ckspace.commands.common import space_from_args

    if args.name and args.set:
        raise CkspaceError("give a kernel name or --set fields, not both")
    if args.name:
        from ckspace.core.naming import is_benchmark_name, parse_benchmark_name, parse_kernel_name

        if is_benchmark_name(args.name.strip()):  # a tile-engine benchmark name: its cell, then its config
            cell = parse_benchmark_name(args.name.strip())
            space = space_from_args(args, [cell["variant"]], [cell["ndim"]], [cell["dtype"]])
            explanation = space.explain(args.name)
        else:
            fields = parse_kernel_name(args.name)  # once: its cell picks the space, its fields the configs
            space = space_from_args(
                args, [fields.get("variant", "forward")], [fields.get("ndim", 2)], [fields["dtype"]]
            )
            explanation = space.explain(args.name, fields=fields)
    else:
        if not args.variant:
            raise CkspaceError("explain needs a kernel name, or --variant with --set fields")
        if not args.set:
            raise CkspaceError("explain needs a kernel name or at least one --set FIELD=VALUE")
        explanation = space_from_args(args).explain(_partial(args.set))
    write_report(out, args.format, explanation, lambda e: e.text() + "\n", indent=1)
    return EXIT[explanation.verdict]
