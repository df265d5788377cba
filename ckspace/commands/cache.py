"""``ckspace cache``: where the caches are and how big, and clearing them.

A damaged entry is rebuilt on its own (it never needs clearing); ``clear`` is for reclaiming space
or starting cold, and removes the caches' own entries (cells, CK revisions, compiled selectors, the
census's stand-in HIP runtimes, and with ``--objects`` the compiled objects of ``build``, which
take hours to make again), nothing else in the directory: a file is the caches' when its name is
one a cache gives its entries (or their temporaries), so a ``results.json`` or a ``mylib.o`` kept
there stays.
"""

from __future__ import annotations

import argparse
from typing import TextIO

from ckspace.commands.common import add_format_argument, one_of, write_report

NAME = "cache"
HELP = (
    "show the caches (info: cells, CK revisions, compiled selectors, stand-in HIP runtimes, objects) "
    "or empty them (clear)"
)
ACTIONS = ("info", "clear")
FORMATS = ("text", "json")


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "action",
        type=one_of("cache action", ACTIONS),
        choices=ACTIONS,
        help="show the caches (info) or empty them (clear)",
    )
    parser.add_argument("--objects", action="store_true", help="clear: also the compiled-object cache of build")
    add_format_argument(parser, FORMATS, "; for info")


def run(args: argparse.Namespace, out: TextIO) -> int:
    from ckspace.census import standin_hip
    from ckspace.compiling import objcache
    from ckspace.constraints.enumeration import cellcache
    from ckspace.environment import ck_header_cache
    from ckspace.select import compiled

    if args.action == "clear":
        cells, revisions, selectors = cellcache.clear(), ck_header_cache.clear_cache(), compiled.clear_cache()
        runtimes = standin_hip.clear_cache()
        objects = objcache.clear() if args.objects else 0
        out.write(
            f"removed {cells} cell entries, {revisions} CK revision entries, {selectors} compiled selectors, "
            f"{runtimes} stand-in HIP runtimes" + (f" and {objects} objects\n" if args.objects else "\n")
        )
        return 0
    report = {
        "cells": cellcache.info(),
        "ck_revisions": ck_header_cache.cache_info(),
        "compiled_selectors": compiled.cache_info(),
        "standin_hip_runtimes": standin_hip.cache_info(),
        "objects": objcache.info(),
    }
    write_report(out, args.format, report, _text)
    return 0


def _text(report: dict) -> str:
    return "".join(
        f"{name}: {facts['directory']}: {facts['entries']} entries, {facts['bytes']} bytes\n"
        for name, facts in report.items()
    )
