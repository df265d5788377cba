"""Items 11, 12 and 14 of the third contract round: caches remove and trust only what is theirs, configs hold their
fields to the fields' domains.

* Item 11: ``cache clear`` (every flavour, ``--objects`` included) removes only files whose names
  prove them ckspace's (an entry's name or its writer's temporary); ``cache info`` counts only those.
* Item 12: a cell-cache entry with a good checksum but rows of the wrong shape (length, codes, flags
  out of their domains) is a miss, rebuilt with a warning naming it; a target's flags entry too.
* Item 14: a value outside a field's declared domain is refused on every way of making a config, in
  one line naming the field, the value and the domain.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from functools import cache
from pathlib import Path

import pytest
from fuzz_world import run_cli
from hypothesis import given, settings
from hypothesis import strategies as st

from ckspace.compiling import objcache
from ckspace.core.config import DepthwiseConfig, GemmConfig
from ckspace.core.errors import InvalidInputError
from ckspace.core.fields import (
    DEPTHWISE_BOUNDS,
    DEPTHWISE_DEFAULTS,
    DEPTHWISE_FIELDS,
    FIELD_INDEX,
    FIELD_KIND,
    GEMM_BOUNDS,
    GEMM_FIELD_NAMES,
    int_domain,
)
from ckspace.core.naming import depthwise_name, gemm_name
from ckspace.space.space import Space

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


# -- item 14: configs refuse values outside their fields' domains ---------------------------------------


@cache
def _configs() -> tuple[GemmConfig, DepthwiseConfig]:
    kernels = Space("gfx942", "forward", 2, "fp16", "full", ck=None).kernels()
    gemm = next(k for k in kernels if not k.depthwise).config()
    depthwise = next(k for k in kernels if k.depthwise).config()
    assert isinstance(gemm, GemmConfig) and isinstance(depthwise, DepthwiseConfig)
    return gemm, depthwise


def _with(row: tuple[int, ...], field: str, value: int) -> tuple[int, ...]:
    """``row`` with GEMM ``field`` set to ``value``."""
    changed = list(row)
    changed[FIELD_INDEX[field]] = value
    return tuple(changed)


def _outside(low: int, high: int) -> st.SearchStrategy[int]:
    """Any integer outside [low, high], near its ends and far (2**80 included)."""
    return st.one_of(
        st.integers(max_value=low - 1),
        st.integers(min_value=high + 1),
        st.sampled_from([low - 1, high + 1, 2**80, -(2**80), 2**63]),
    )


@st.composite
def _out_of_domain(draw: st.DrawFn) -> tuple[bool, str, int]:
    """(depthwise?, an integer field, a value outside its domain)."""
    depthwise = draw(st.booleans())
    bounds = DEPTHWISE_BOUNDS if depthwise else GEMM_BOUNDS
    fields = DEPTHWISE_FIELDS if depthwise else [f for f in GEMM_FIELD_NAMES if FIELD_KIND[f] is int]
    field = draw(st.sampled_from(sorted(fields)))
    return depthwise, field, draw(_outside(*bounds[field]))


def _refused(make: Callable[[], object], field: str, value: int, bounds: tuple[int, int]) -> None:
    """``make`` raises InvalidInputError in one line naming ``field``, ``value`` and its domain."""
    with pytest.raises(InvalidInputError) as refused:
        make()
    line = str(refused.value)
    assert "\n" not in line and field in line and str(value) in line and int_domain(*bounds) in line, line


@settings(max_examples=300, deadline=None)
@given(_out_of_domain())
def test_issue_36_item_14_any_int_outside_a_fields_domain_is_refused_on_every_path(case: tuple[bool, str, int]) -> None:
    """``GemmConfig.replace(tile_m=2**80)`` was accepted, and ``violated_rules`` then raised
    OverflowError. Every way of making a config refuses it: the constructor, ``replace``,
    ``from_fields`` (GEMM), ``from_row`` and ``from_name`` (a negative value has no name: refused
    as a name; a depthwise name carries no ``block_size`` nor ``dilation``)."""
    depthwise, field, value = case
    gemm, dw = _configs()
    config: GemmConfig | DepthwiseConfig = dw if depthwise else gemm
    bounds = (DEPTHWISE_BOUNDS if depthwise else GEMM_BOUNDS)[field]
    kind = type(config)
    values = {**config.model_dump(), field: value}
    if depthwise:
        row = tuple(values[f] for f in DEPTHWISE_FIELDS)
        _refused(lambda: DepthwiseConfig.from_row(dw.arch, dw.dtype, row), field, value, bounds)
        name = depthwise_name(dw.dtype, dw.ndim, row, dw.layout)
    else:
        row = _with(gemm.row(), field, value)
        _refused(lambda: GemmConfig.from_row(gemm.arch, gemm.variant, gemm.ndim, gemm.dtype, row), field, value, bounds)
        _refused(lambda: GemmConfig.from_fields(values), field, value, bounds)
        name = gemm_name(gemm.variant, gemm.dtype, gemm.ndim, row)
    _refused(lambda: kind(**values), field, value, bounds)
    _refused(lambda: config.replace(**{field: value}), field, value, bounds)
    if depthwise and field in DEPTHWISE_DEFAULTS:
        return  # a depthwise name leaves out the fields every config shares
    if value >= 0:
        _refused(lambda: kind.from_name(name, config.arch), field, value, bounds)
    else:
        with pytest.raises(InvalidInputError):
            kind.from_name(name, config.arch)


@pytest.mark.parametrize("field", [f for f in GEMM_FIELD_NAMES if FIELD_KIND[f] is not int])
def test_issue_36_item_14_a_row_code_outside_an_enum_or_bool_domain_is_refused(field: str) -> None:
    """A row's enum and boolean codes have domains too: -1 picked the last pipeline, 2 read as true,
    99 failed with an IndexError."""
    gemm, _ = _configs()
    low, high = GEMM_BOUNDS[field]
    for value in (low - 1, high + 1, 99):
        row = _with(gemm.row(), field, value)
        _refused(
            lambda row=row: GemmConfig.from_row(gemm.arch, gemm.variant, gemm.ndim, gemm.dtype, row),
            field,
            value,
            (low, high),
        )


def test_issue_36_item_14_the_reported_case_is_one_line() -> None:
    """The issue's own example: ``replace(tile_m=2**80)``, in the words a user reads."""
    gemm, _ = _configs()
    with pytest.raises(
        InvalidInputError, match=r"^GemmConfig tile_m=\d+: out of range; valid: an integer from 1 to 1024$"
    ):
        gemm.replace(tile_m=2**80)
