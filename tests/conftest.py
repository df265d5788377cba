"""Shared fixtures: the reference material in ../shared (optional) and an isolated cache."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
ORACLE = SHARED / "oracle"

sys.path.insert(0, str(Path(__file__).resolve().parent))


@pytest.fixture(scope="session", autouse=True)
def _isolated_cache(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Never read or write the developer's real cache from tests."""
    os.environ["CKSPACE_CACHE_DIR"] = str(tmp_path_factory.mktemp("ckspace-cache"))


def oracle_lines(name: str) -> list[dict]:
    path = ORACLE / f"{name}.jsonl"
    if not path.exists():
        pytest.skip(f"{path} is absent: the oracle fixtures live in ../shared, not in the package")
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def load_nested_loop():
    """The plain nested-loop enumerator of tests/ (an independent implementation of the rules)."""
    import nested_loop

    return nested_loop
