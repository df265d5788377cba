"""The shipped data: the upstream rule tables and the hardware spec sheet.

The JSON files under ``ckspace/data/tables/`` are the facts of the upstream generator (arch facts,
rule-set tables, sampling parameters) and, in ``revisions.json``, the later upstream states as deltas
on them (:mod:`ckspace.core.revisions`); ``ckspace/data/hardware.json`` holds spec-sheet facts the
selector needs. The installed package reads only these copies. The rule tables' combined hash is
part of every cache key, so editing a table invalidates cached enumerations.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from functools import cache
from importlib import resources
from typing import Any

TABLE_NAMES = ("arch", "common", "default", "depthwise", "full", "rdna", "sampling", "validity", "revisions")


@cache
def table(name: str) -> dict[str, Any]:
    """Return the parsed rule table ``name`` (one of :data:`TABLE_NAMES`)."""
    if name not in TABLE_NAMES:
        raise KeyError(f"no rule table {name!r}; tables: {', '.join(TABLE_NAMES)}")
    return json.loads(_raw("tables", f"{name}.json"))


@cache
def tables_hash() -> str:
    """sha256 over all rule tables, in a fixed order: the data part of every cache key."""
    digest = hashlib.sha256()
    for name in TABLE_NAMES:
        digest.update(name.encode())
        digest.update(_raw("tables", f"{name}.json"))
    return digest.hexdigest()


@cache
def hardware_table() -> dict[str, Any]:
    """The parsed spec-sheet facts of ``hardware.json`` (not part of the cache key: they do not
    change which kernels exist)."""
    return json.loads(_raw("hardware.json"))


def shape_key(values: Iterable[int]) -> str:
    """``MxNxK``: how the tables key a tile (``"256x128x64"``), and how kernel names and rule
    words write tiles, wave splits and warp tiles."""
    return "x".join(map(str, values))


def _raw(*parts: str) -> bytes:
    return resources.files("ckspace").joinpath("data", *parts).read_bytes()
