"""The on-disk cache: hits are exact and light, bad entries are rebuilt, writes are atomic."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ckspace.constraints.enumeration import cellcache as cache
from ckspace.constraints.enumeration.enumerator import enumerate_cells
from ckspace.core.cells import Request

REQUEST = ("gfx942", "full", ["bwd_weight"], [2], ["fp16"])


@pytest.fixture()
def cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("CKSPACE_CACHE_DIR", str(tmp_path))
    return tmp_path


def _entries(root: Path) -> list[Path]:
    return sorted((root / "cells").glob("*.json"))


def test_hit_equals_fresh_computation(cache_dir: Path) -> None:
    request = Request.build(*REQUEST)
    fresh = enumerate_cells(request, use_cache=False)
    assert not _entries(cache_dir)
    first = enumerate_cells(request)
    assert len(_entries(cache_dir)) == 1
    assert enumerate_cells(request) == first == fresh


@pytest.mark.parametrize("target", [["--rules-only"], []], ids=["rules-only", "default-target"])
def test_cache_hit_imports_neither_solver_nor_numpy_nor_pydantic(cache_dir: Path, target: list[str]) -> None:
    args = ["enumerate", "--arch", "gfx950", "--variant", "bwd_weight", "--count", *target]
    env = {**os.environ, "CKSPACE_CACHE_DIR": str(cache_dir)}
    subprocess.run([sys.executable, "-m", "ckspace", *args], check=True, env=env, capture_output=True)
    probe = (
        f"import sys; from ckspace.cli import main; main({args!r}); "
        "heavy = [m for m in ('ortools', 'numpy', 'pydantic') if m in sys.modules]; "
        "assert not heavy, heavy"
    )
    out = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    if target:  # the upstream rule space
        assert out.stdout.split()[-1] == "4464"
    else:  # the CK headers found (always, in tests) narrow it
        assert 0 < int(out.stdout.split()[-1]) < 4464
    assert out.stderr.startswith("target: ")


@pytest.mark.parametrize("damage", ["garbage", "stale_key", "bad_checksum", "truncated"])
def test_bad_entries_are_rebuilt(cache_dir: Path, damage: str, caplog: pytest.LogCaptureFixture) -> None:
    request = Request.build(*REQUEST)
    good = enumerate_cells(request)
    (path,) = _entries(cache_dir)
    text = path.read_text()
    entry = json.loads(text)
    if damage == "garbage":
        path.write_text("not json at all")
    elif damage == "stale_key":
        entry["key"]["tables"] = "0" * 64
        path.write_text(json.dumps(entry))
    elif damage == "bad_checksum":
        entry["payload"] = entry["payload"].replace("[", "[1,", 1)
        path.write_text(json.dumps(entry))
    else:
        path.write_text(text[: len(text) // 2])
    with caplog.at_level("WARNING"):
        assert enumerate_cells(request) == good
    assert "rebuilding" in caplog.text
    assert json.loads(path.read_text())["key"] == cache.cell_key(request, request.cells[0])


def test_writes_leave_no_temporary_files(cache_dir: Path) -> None:
    enumerate_cells(Request.build("gfx950", "default"))
    files = list((cache_dir / "cells").iterdir())
    assert files and all(f.suffix == ".json" and not f.name.startswith(".") for f in files)


def _single(request: Request, cell) -> Request:
    return Request.build(request.arch, request.rule_set, [cell.variant], [cell.ndim], [cell.dtype])


def test_sampling_rule_sets_key_on_the_whole_request(cache_dir: Path) -> None:
    whole = Request.build("gfx942", "tiny")
    single = _single(whole, whole.cells[0])
    assert cache.cell_key(whole, whole.cells[0]) != cache.cell_key(single, single.cells[0])
    full_whole = Request.build("gfx942", "full")
    full_single = _single(full_whole, full_whole.cells[0])
    assert cache.cell_key(full_whole, full_whole.cells[0]) == cache.cell_key(full_single, full_single.cells[0])
    a = enumerate_cells(whole)[whole.cells[0]]
    b = enumerate_cells(single)[single.cells[0]]
    assert a != b  # full-tests and tiny sample the whole request's emission order, not each cell's


def test_cache_info_and_clear_cover_the_census_standin_hip_runtimes_and_nothing_else(
    cache_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``hipdnn census`` builds a stand-in HIP runtime into the cache (``census-hip/<key>/``):
    ``cache info`` counts it and ``cache clear`` removes it with what a killed build left, while
    files of others in that folder (a note, a folder of one's own, a name that is no key) stay."""
    from conftest import c_compiler

    from ckspace.census import standin_hip
    from ckspace.census.hip_imports import Imports
    from ckspace.cli import main

    c_compiler()
    soname = "libamdhip64.so.6"
    imports = Imports((soname,), (("hipGetDevice", "hip_6.0", soname), ("hipMalloc", "hip_6.0", soname)))
    library = standin_hip.build(imports)
    folder = cache_dir / standin_hip.CACHE_FOLDER
    assert library.parent.parent == folder and library.name == soname and library.is_file()
    leftover = folder / f".{library.parent.name}.{'a' * 12}.tmp"  # a build killed while staging
    leftover.mkdir()
    (folder / "mine").mkdir()
    kept = [folder / "notes.txt", folder / "mine" / soname, folder / "0123abc"]
    for path in kept:
        path.write_text("not ckspace's")

    def info() -> dict:
        assert main(["cache", "info", "--format", "json"]) == 0
        return json.loads(capsys.readouterr().out)["standin_hip_runtimes"]

    before = info()
    assert before["directory"] == str(folder) and before["entries"] == 1 and before["bytes"] > library.stat().st_size
    assert main(["cache", "clear"]) == 0
    assert "1 stand-in HIP runtimes" in capsys.readouterr().out
    assert not library.parent.exists() and not leftover.exists()
    assert all(path.read_text() == "not ckspace's" for path in kept)
    assert info()["entries"] == 0
    assert standin_hip.build(imports) == library and library.is_file()  # built again on the next census
