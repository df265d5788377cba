"""On-disk cache of enumerated cells: the seam between the enumerator and everything that lists.

One JSON file per cell and rule set. The key lists everything that can change the answer: the
ckspace version, the hash of the rule tables (revision deltas included), the rules revision, the
arch, the rule set, the cell, and for rule sets
whose cells depend on the whole request (the sampling ones) the request itself. Files are written
atomically; an entry that does not parse, belongs to another key or fails its checksum is rebuilt,
never trusted. Reading the cache imports neither the solver nor numpy.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from ckspace.constraints.rulesets import get_rule_set
from ckspace.core.cells import Cell, CellResult, Request
from ckspace.core.files import cache_dir, sha256, write_atomic
from ckspace.core.tables import tables_hash

log = logging.getLogger(__name__)

FORMAT = 1


def cell_key(request: Request, cell: Cell) -> dict[str, Any]:
    from ckspace import __version__

    rule_set = get_rule_set(request.rule_set)
    return {
        "format": FORMAT,
        "ckspace": __version__,
        "tables": tables_hash(),
        "rules_revision": request.rules_revision,
        "arch": request.arch,
        "rule_set": request.rule_set,
        "cell": cell.label(),
        "request": request.key() if rule_set.request_wide else None,
    }


def _path(key: dict[str, Any]) -> Path:
    return cache_dir() / "cells" / f"{sha256(json.dumps(key, sort_keys=True).encode())[:40]}.json"


def load(request: Request, cell: Cell) -> CellResult | None:
    """The cached result, or None when absent, stale or corrupt."""
    key = cell_key(request, cell)
    path = _path(key)
    try:
        text = path.read_text()
    except FileNotFoundError:
        return None
    except OSError as exc:
        log.warning("cache entry %s unreadable (%s): rebuilding", path, exc)
        return None
    try:
        entry = json.loads(text)
        if entry["key"] != key or entry["checksum"] != sha256(entry["payload"].encode()):
            raise ValueError("key or checksum mismatch")
        data = json.loads(entry["payload"])
        return CellResult(
            gemm=[tuple(r) for r in data["gemm"]],
            gemm_valid=[bool(v) for v in data["gemm_valid"]],
            depthwise=[tuple(r) for r in data["depthwise"]],
            depthwise_valid=[bool(v) for v in data["depthwise_valid"]],
        )
    except (ValueError, KeyError, TypeError) as exc:
        log.warning("cache entry %s is stale or corrupt (%s): rebuilding", path, exc)
        return None


def store(request: Request, cell: Cell, result: CellResult) -> None:
    """Write one cell atomically (temporary file in the same folder, then rename)."""
    key = cell_key(request, cell)
    path = _path(key)
    payload = json.dumps({
        "gemm": result.gemm, "gemm_valid": [int(v) for v in result.gemm_valid],
        "depthwise": result.depthwise, "depthwise_valid": [int(v) for v in result.depthwise_valid],
    }, separators=(",", ":"))
    text = json.dumps({"key": key, "checksum": sha256(payload.encode()), "payload": payload})
    try:
        write_atomic(path, text.encode())
    except OSError as exc:
        log.warning("could not write cache entry %s (%s); continuing without it", path, exc)
