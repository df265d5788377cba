"""Package data: the upstream rule tables, shipped with ckspace.

The JSON files under ``tables/`` are the facts of the upstream generator (arch facts, rule-set
tables, sampling parameters). The installed package reads only these copies; their combined hash
is part of every cache key, so editing a table invalidates cached enumerations.
"""

from __future__ import annotations

import hashlib
import json
from functools import cache
from importlib import resources
from typing import Any

TABLE_NAMES = ("arch", "common", "default", "depthwise", "full", "sampling", "validity")


@cache
def table(name: str) -> dict[str, Any]:
    """Return the parsed JSON table ``name`` (one of :data:`TABLE_NAMES`)."""
    if name not in TABLE_NAMES:
        raise KeyError(f"no rule table {name!r}; tables: {', '.join(TABLE_NAMES)}")
    return json.loads(_raw(name))


@cache
def tables_hash() -> str:
    """sha256 over all tables, in a fixed order: the data part of every cache key."""
    digest = hashlib.sha256()
    for name in TABLE_NAMES:
        digest.update(name.encode())
        digest.update(_raw(name))
    return digest.hexdigest()


def _raw(name: str) -> bytes:
    return resources.files(__package__).joinpath("tables", f"{name}.json").read_bytes()
