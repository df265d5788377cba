"""``ckspace diff``: what one space has that another lacks (two rule sets, rule revisions, archs or
cells)."""

from __future__ import annotations

import argparse
from typing import TextIO

from ckspace.commands.common import (
    add_format_argument,
    add_space_arguments,
    request_from_args,
    space_from_args,
    write_report,
)
from ckspace.core.cells import Request
from ckspace.core.errors import CkspaceError
from ckspace.core.fields import FIELD_INDEX
from ckspace.space.listing import Kernel

NAME = "diff"
HELP = "compare the kernels of two rule sets, two rule revisions, two archs or two cells"
FORMATS = ("text", "json")
_SIDES = ("arch", "rule_set", "rules_revision", "variant", "ndim", "dtype")
_TAGGED = FIELD_INDEX["tagged"]


def configure(parser: argparse.ArgumentParser) -> None:
    add_space_arguments(parser)
    parser.add_argument("--against-arch", help="the other side's arch (default: the same)")
    parser.add_argument("--against-rule-set", help="the other side's rule set")
    parser.add_argument(
        "--against-rules-revision",
        metavar="R",
        help="the other side's rules revision (what a revision changes: diff it against its parent)",
    )
    parser.add_argument("--against-variant", nargs="+", action="extend", help="the other side's variants")
    parser.add_argument("--against-ndim", nargs="+", action="extend", help="the other side's ndims")
    parser.add_argument("--against-dtype", nargs="+", action="extend", help="the other side's dtypes")
    parser.add_argument(
        "--against-rules-only",
        action="store_true",
        help="the other side is the upstream rule space (what the target leaves out of it)",
    )
    add_format_argument(parser, FORMATS)


def run(args: argparse.Namespace, out: TextIO) -> int:
    other = argparse.Namespace(**vars(args))
    for side in _SIDES:
        value = getattr(args, f"against_{side}")
        if value is not None:
            setattr(other, side, value)
    if args.against_rules_only:
        other.rules_only, other.ck_root = True, None
    left_request, right_request = request_from_args(args), request_from_args(other)
    left_space, right_space = space_from_args(args), space_from_args(other)
    if left_request == right_request and left_space.target == right_space.target:
        raise CkspaceError(
            "both sides are the same space: give --against-arch, --against-rule-set, "
            "--against-rules-revision, --against-variant, --against-ndim, --against-dtype or "
            "--against-rules-only"
        )
    # Cell dimensions that differ between the sides (one value each) are left out of the key, so
    # that e.g. 2D and 3D kernels of the same config match.
    ignore = {
        dim
        for dim, a, b in (
            ("variant", left_request.variants, right_request.variants),
            ("ndim", left_request.ndims, right_request.ndims),
            ("dtype", left_request.dtypes, right_request.dtypes),
        )
        if a != b and len(a) == len(b) == 1
    }

    def key(k: Kernel) -> tuple:
        cell = tuple(getattr(k.cell, dim) for dim in ("variant", "ndim", "dtype") if dim not in ignore)
        # the dtype tag records which rule set proposed a config, not what the kernel is
        row = k.row if k.depthwise else k.row[:_TAGGED] + k.row[_TAGGED + 1 :]
        return (k.depthwise, cell, row)

    left = {key(k): k.name for k in left_space.kernels()}
    right = {key(k): k.name for k in right_space.kernels()}
    only_left = sorted(left[k] for k in left.keys() - right.keys())
    only_right = sorted(right[k] for k in right.keys() - left.keys())
    report = {
        "left": _describe(left_request),
        "right": _describe(right_request),
        "left_count": len(left),
        "right_count": len(right),
        "common": len(left.keys() & right.keys()),
        "only_left": only_left,
        "only_right": only_right,
        "left_target": left_space.target.record(),
        "right_target": right_space.target.record(),
    }
    write_report(out, args.format, report, _text, indent=1)
    return 0


def _text(report: dict) -> str:
    lines = [
        f"left:  {report['left']}: {report['left_count']} kernels (target: {report['left_target']['note']})",
        f"right: {report['right']}: {report['right_count']} kernels (target: {report['right_target']['note']})",
        f"common {report['common']}, only left {len(report['only_left'])}, only right {len(report['only_right'])}",
    ]
    lines += [f"- {name}" for name in report["only_left"]]
    lines += [f"+ {name}" for name in report["only_right"]]
    return "".join(f"{line}\n" for line in lines)


def _describe(request: Request) -> str:
    return (
        f"{request.arch} {request.rule_set} (rules {request.rules_revision}) "
        f"{','.join(v.value for v in request.variants)} "
        f"ndim {','.join(map(str, request.ndims))} {','.join(d.value for d in request.dtypes)}"
    )
