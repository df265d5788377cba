"""The caches remove and trust only what is theirs.

* ``cache clear`` (every flavour, ``--objects`` included) removes only files whose names prove them
  ckspace's (an entry's name or its writer's temporary); ``cache info`` counts only those.
* A cell-cache entry with a good checksum but rows of the wrong shape (length, codes, flags out of
  their domains) is a miss, rebuilt with a warning naming it; a target's flags entry too.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path

import pytest
from fuzz_world import run_cli

from ckspace.compiling import objcache
from ckspace.core.fields import FIELD_INDEX

SPACE = ["--arch", "gfx942", "--variant", "bwd_weight", "--ndim", "2", "--dtype", "fp16", "--rule-set", "full"]
"""A cell whose rule space has invalid proposals and which the CK found narrows further."""

# -- item 11: cache clear removes only ckspace's files ------------------------------------------------


def _hex(seed: str) -> str:
    return hashlib.sha256(seed.encode()).hexdigest()


def _foreign_files(cache: Path, objects: Path) -> dict[Path, bytes]:
    """Files a user keeps beside the caches' entries, each named almost as an entry is."""
    key = _hex("not an object ckspace stored")
    files = {
        cache / "cells" / "results.json": b'{"mine": 1}\n',
        cache / "cells" / f"{_hex('a')[:39]}.json": b"one digit short\n",
        cache / "cells" / ".notes.tmp": b"a hidden file of mine\n",
        cache / "cells" / f".results.json.{'0' * 12}.tmp": b"named as a temporary of results.json\n",
        cache / "ck" / "notes.json": b"{}\n",
        objects / "ab" / "mylib.o": b"\x7fELF my object\n",
        objects / "ab" / f"{'cd' + key[2:]}.o": b"an object name of another folder\n",
        objects / "xy" / "mine.o": b"not a hex folder\n",
        objects / "README.o": b"at the top\n",
    }
    for path, data in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    return files


def _our_files(cache: Path) -> list[Path]:
    """Entries and writers' temporaries ckspace made: a real listing's cells and CK revision, a
    stored object, and what killed writers of each would have left."""
    assert run_cli(["enumerate", *SPACE, "--count", "--cache-dir", str(cache)]).status == 0
    objcache.store_bytes(_hex("unit"), b"object bytes")
    ours = [*(cache / "cells").glob("*.json"), *(cache / "ck").glob("*.json"), *(cache / "objects").glob("??/*.o")]
    for entry in list(ours):
        temporary = entry.parent / f".{entry.name}.0123456789ab.tmp"
        temporary.write_bytes(b"half")
        ours.append(temporary)
    return ours


@pytest.mark.parametrize("objects_at", ["in_the_cache", "CKSPACE_BUILD_CACHE"])
def test_issue_36_item_11_cache_clear_removes_only_what_its_names_prove_ckspaces(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, objects_at: str
) -> None:
    """``cache clear --objects`` removed ``cells/results.json`` and ``objects/ab/mylib.o``; now every
    file a user keeps there stays, byte for byte, and ``cache info`` counts none of them."""
    cache = tmp_path / "cache"
    objects = cache / "objects" if objects_at == "in_the_cache" else tmp_path / "my-build-dir"
    if objects_at == "in_the_cache":
        monkeypatch.delenv("CKSPACE_BUILD_CACHE", raising=False)
    else:
        monkeypatch.setenv("CKSPACE_BUILD_CACHE", str(objects))
    monkeypatch.setenv("CKSPACE_CACHE_DIR", str(cache))
    ours = _our_files(cache) if objects_at == "in_the_cache" else []
    objcache.store_bytes(_hex("unit"), b"object bytes")
    foreign = _foreign_files(cache, objects)
    info = json.loads(run_cli(["cache", "info", "--format", "json", "--cache-dir", str(cache)]).stdout)
    assert info["objects"]["entries"] == 1 and info["objects"]["bytes"] == len(b"object bytes")
    if ours:
        cells = [path for path in ours if path.parent.name == "cells" and not path.name.startswith(".")]
        assert info["cells"]["entries"] == len(cells) > 0
        # the CK revision entry is written when this process first reads the headers: it may have
        # read them before this test (run_cli runs in-process), so count what is there
        revisions = [path for path in ours if path.parent.name == "ck" and not path.name.startswith(".")]
        assert info["ck_revisions"]["entries"] == len(revisions)
    cleared = run_cli(["cache", "clear", "--objects", "--cache-dir", str(cache)])
    assert cleared.status == 0 and cleared.stdout.endswith(" and 1 objects\n"), cleared
    assert {path: path.read_bytes() for path in foreign} == foreign
    assert not [path for path in ours if path.exists()]
    assert objcache.lookup(_hex("unit")) is None
    left = {path for path in tmp_path.rglob("*") if path.is_file()}
    assert left == set(foreign)


# -- item 12: a cell-cache entry of the wrong shape is a miss ------------------------------------------


def _rewrite(entry: Path, change: Callable[[dict], None]) -> None:
    """Change an entry's payload and give it the checksum of its new payload: only its shape is wrong."""
    text = json.loads(entry.read_text())
    payload = json.loads(text["payload"])
    change(payload)
    text["payload"] = json.dumps(payload, separators=(",", ":"))
    text["checksum"] = hashlib.sha256(text["payload"].encode()).hexdigest()
    entry.write_text(json.dumps(text))


def _set(field: str, value: int) -> Callable[[dict], None]:
    def change(payload: dict) -> None:
        payload["gemm"][0][FIELD_INDEX[field]] = value

    return change


def _first_invalid_flag(payload: dict) -> None:
    flags = payload["gemm_valid"]
    flags[flags.index(0)] = 7


ROW_DAMAGES: dict[str, Callable[[dict], None]] = {
    "short_row": lambda payload: payload["gemm"][0].pop(),
    "long_row": lambda payload: payload["gemm"][0].append(1),
    "unknown_pipeline_code": _set("pipeline", 99),
    "negative_enum_code": _set("pipeline", -1),
    "bool_field_2": _set("pad_m", 2),
    "tile_m_2_to_the_80": _set("tile_m", 2**80),
    "tile_m_0": _set("tile_m", 0),
    "valid_flag_7": _first_invalid_flag,
}


def _entries(cache: Path, target: bool) -> list[Path]:
    """The cell entries of the rule space (``target`` False) or of a target's flags."""
    return [
        path
        for path in sorted((cache / "cells").glob("*.json"))
        if (json.loads(path.read_text())["key"]["target"] is not None) == target
    ]


@pytest.mark.parametrize("damage", list(ROW_DAMAGES))
def test_issue_36_item_12_an_entry_of_the_wrong_shape_is_rebuilt(tmp_path: Path, damage: str) -> None:
    """A good checksum over rows of the wrong shape was used: ``enumerate --list`` crashed
    (IndexError) on a short row, a negative code named another pipeline, a flag of 7 listed an
    invalid kernel. Now the entry is a miss: the listing is the fresh one, a warning names the
    entry, and the entry is written anew."""
    cache = tmp_path / "cache"
    argv = ["enumerate", *SPACE, "--rules-only", "--list", "--cache-dir", str(cache)]
    fresh = run_cli(argv)
    (entry,) = _entries(cache, target=False)
    good = entry.read_bytes()
    _rewrite(entry, ROW_DAMAGES[damage])
    again = run_cli(argv)
    assert (again.status, again.stdout) == (0, fresh.stdout)
    assert f"cache entry {entry} is stale or corrupt" in again.stderr and "rebuilding" in again.stderr
    assert entry.read_bytes() == good


def test_issue_36_item_12_a_target_flags_entry_of_flags_other_than_0_and_1_is_rebuilt(tmp_path: Path) -> None:
    """A target's flags entry held any integers: a 7 where the CK rejects a kernel read as valid and
    counted it. Now only 0 and 1 are flags; the entry is rebuilt with a warning naming it."""
    cache = tmp_path / "cache"
    argv = ["enumerate", *SPACE, "--count", "--cache-dir", str(cache)]
    fresh = run_cli(argv)
    (entry,) = _entries(cache, target=True)
    good = entry.read_bytes()
    _rewrite(entry, _first_invalid_flag)
    again = run_cli(argv)
    assert (again.status, again.stdout) == (0, fresh.stdout)
    assert f"cache entry {entry} is stale or corrupt" in again.stderr
    assert entry.read_bytes() == good
