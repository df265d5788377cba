"""``ckspace cache``: where the caches are and how big, and clearing them.

A damaged cell entry is rebuilt on its own (it never needs clearing); ``clear`` is for reclaiming
space or starting cold, and removes only the caches' own entries, nothing else in the directory.
"""

from __future__ import annotations

import argparse
import json
from typing import TextIO

from ckspace.core.errors import InvalidChoiceError

NAME = "cache"
HELP = "show the cell and object caches (info) or empty them (clear)"
ACTIONS = ("info", "clear")
FORMATS = ("text", "json")


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("action", help="info or clear")
    parser.add_argument("--objects", action="store_true", help="clear: also the compiled-object cache of build")
    parser.add_argument("--format", default="text", help="info: text or json (default: text)")


def run(args: argparse.Namespace, out: TextIO) -> int:
    from ckspace.constraints import cellcache
    from ckspace.hip_runtime import objcache

    if args.action not in ACTIONS:
        raise InvalidChoiceError("cache action", args.action, ACTIONS)
    if args.format not in FORMATS:
        raise InvalidChoiceError("format", args.format, FORMATS)
    if args.action == "clear":
        cells = cellcache.clear()
        objects = objcache.clear() if args.objects else 0
        out.write(f"removed {cells} cell entries" + (f" and {objects} objects\n" if args.objects else "\n"))
        return 0
    report = {"cells": cellcache.info(), "objects": objcache.info()}
    if args.format == "json":
        out.write(json.dumps(report) + "\n")
        return 0
    for name, facts in report.items():
        out.write(f"{name}: {facts['directory']}: {facts['entries']} entries, {facts['bytes']} bytes\n")
    return 0
