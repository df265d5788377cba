"""On-disk cache of enumerated cells: the seam between the enumerator and everything that lists.

One JSON file per cell and rule set. The key lists everything that can change the answer: the
ckspace version, the hash of the rule tables (revision deltas included), the rules revision, the
arch, the rule set, the cell, and for rule sets
whose cells depend on the whole request (the sampling ones) the request itself. Files are written
atomically; an entry that does not parse, belongs to another key or fails its checksum, holds
rows outside the fields' domains (a row of the wrong length, a code of no member) or flags other
than 0 and 1, or anything but a file in its place, is rebuilt with a warning naming it, never
trusted (:mod:`ckspace.environment.cachefiles`).
Reading the cache imports neither the solver nor numpy.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from ckspace.constraints.rulesets import get_rule_set
from ckspace.core.cells import Cell, CellResult, Request
from ckspace.core.fields import DEPTHWISE_BOUNDS, DEPTHWISE_FIELDS, GEMM_BOUNDS, GEMM_FIELD_NAMES, check_rows
from ckspace.core.tables import tables_hash
from ckspace.environment.cachefiles import clear_folder, entry_path, folder_info, read_entry, write_entry
from ckspace.environment.files import cache_dir, sha256

log = logging.getLogger(__name__)

FORMAT = 1


def cell_key(request: Request, cell: Cell, target: str | None = None) -> dict[str, Any]:
    """The entry's key; ``target`` is a target's :attr:`~ckspace.environment.target.Target.cache_key` for a
    listing narrowed to that target (None: the rule space)."""
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
        "target": target,
    }


def _path(key: dict[str, Any]) -> Path:
    return entry_path(cache_dir() / "cells", sha256(json.dumps(key, sort_keys=True).encode()))


_read: dict[Path, tuple[tuple[int, int, int], CellResult]] = {}
"""Entries read in this process, by path and the file's mtime, size and inode: a command that lists
the rule space and a target of it (``enumerate``'s note on what the CK leaves out) parses each
entry once, and a changed file is read again."""


def load(request: Request, cell: Cell) -> CellResult | None:
    """The cached result, or None when absent, stale or corrupt (bad bytes, bad JSON, another key,
    a wrong checksum or a payload of the wrong shape): a bad entry is rebuilt, never fatal."""
    key = cell_key(request, cell)
    path = _path(key)
    try:
        stat = path.stat()
    except OSError:
        stat = None
    seen = (stat.st_mtime_ns, stat.st_size, stat.st_ino) if stat is not None else None
    if seen is not None and _read.get(path, (None,))[0] == seen:
        return _read[path][1]
    try:
        payload = _payload(path, key)
        if payload is None:
            return None
        result = CellResult(
            gemm=_rows(payload["gemm"], GEMM_FIELD_NAMES, GEMM_BOUNDS),
            gemm_valid=_flags(payload["gemm_valid"]),
            depthwise=_rows(payload["depthwise"], DEPTHWISE_FIELDS, DEPTHWISE_BOUNDS),
            depthwise_valid=_flags(payload["depthwise_valid"]),
        )
        if len(result.gemm) != len(result.gemm_valid) or len(result.depthwise) != len(result.depthwise_valid):
            raise ValueError("rows and validity flags differ in length")
        if seen is not None:
            _read[path] = (seen, result)
        return result
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        log.warning("cache entry %s is stale or corrupt (%s): rebuilding", path, exc)
        return None


def _payload(path: Path, key: dict[str, Any]) -> Any:
    """The checked payload of the entry at ``path`` (None when absent or unreadable here); ValueError
    and its kin for an entry of another key, a wrong checksum, bad bytes or JSON (nested too deeply
    included), or anything but a file in its place."""
    data = read_entry(path)
    if data is None:
        return None
    try:
        entry = json.loads(data.decode("utf-8"))
        if entry["key"] != key or entry["checksum"] != sha256(entry["payload"].encode()):
            raise ValueError("key or checksum mismatch")
        return json.loads(entry["payload"])
    except RecursionError:
        raise ValueError("JSON nested too deeply") from None


def load_flags(
    request: Request, cell: Cell, target: str, sizes: tuple[int, int]
) -> tuple[list[bool], list[bool]] | None:
    """A target's validity flags of a cell (GEMM, depthwise), cached under the target's key
    (:attr:`~ckspace.environment.target.Target.cache_key`); the rows are the rule space's entry's, so a
    target listing reads its rows once. None when absent, stale, corrupt or not of ``sizes``."""
    key = cell_key(request, cell, target)
    path = _path(key)
    try:
        payload = _payload(path, key)
        if payload is None:
            return None
        gemm, depthwise = _flags(payload["gemm_valid"]), _flags(payload["depthwise_valid"])
        if (len(gemm), len(depthwise)) != sizes:
            raise ValueError("flags and rows differ in length")
        return gemm, depthwise
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        log.warning("cache entry %s is stale or corrupt (%s): rebuilding", path, exc)
        return None


def store_flags(request: Request, cell: Cell, target: str, gemm: list[bool], depthwise: list[bool]) -> None:
    """Write a target's validity flags of a cell (see :func:`load_flags`)."""
    _write(
        cell_key(request, cell, target),
        {"gemm_valid": [int(v) for v in gemm], "depthwise_valid": [int(v) for v in depthwise]},
    )


def _flags(values: object) -> list[bool]:
    """Validity flags as stored (a list of 0 and 1), or ValueError: a hand-edited or foreign entry
    whose 7 or -1 would otherwise read as valid."""
    if not isinstance(values, list) or not set(map(type, values)) <= {int} or not set(values) <= {0, 1}:
        raise ValueError("expected a list of 0 and 1")
    return list(map(bool, values))


def _rows(values: object, names: tuple[str, ...], bounds: dict[str, tuple[int, int]]) -> list[tuple[int, ...]]:
    """A list of rows as tuples, each one plain integer per field of ``names`` within its domain
    (:func:`~ckspace.core.fields.check_rows`), or ValueError naming the field and value: a row of
    the wrong length or an unknown code would otherwise be used, and fail far from here (a name
    indexes the row by field) or mean another config."""
    if not isinstance(values, list) or not set(map(type, values)) <= {list}:
        raise ValueError("expected a list of rows")
    check_rows(names, bounds, values)
    return list(map(tuple, values))


def info() -> dict[str, object]:
    """Where the cell cache is, how many entries it holds and their size in bytes."""
    return folder_info(cache_dir() / "cells")


def clear() -> int:
    """Delete the cell cache's entries (only ``cells/<hex>.json`` and their writers' temporaries,
    :func:`~ckspace.environment.cachefiles.clear_folder`); returns how many were removed."""
    return clear_folder(cache_dir() / "cells")


def store(request: Request, cell: Cell, result: CellResult) -> None:
    """Write one cell atomically (temporary file in the same folder, then rename)."""
    _write(
        cell_key(request, cell),
        {
            "gemm": result.gemm,
            "gemm_valid": [int(v) for v in result.gemm_valid],
            "depthwise": result.depthwise,
            "depthwise_valid": [int(v) for v in result.depthwise_valid],
        },
    )


def _write(key: dict[str, Any], content: dict[str, Any]) -> None:
    """Write an entry; a cache that cannot be written costs speed, not the answer (said once)."""
    payload = json.dumps(content, separators=(",", ":"))
    text = json.dumps({"key": key, "checksum": sha256(payload.encode()), "payload": payload})
    write_entry(cache_dir(), _path(key), text.encode())
