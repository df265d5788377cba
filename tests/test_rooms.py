"""The package is arranged in rooms a newcomer can find things in: no room but ``commands/`` holds
more than a dozen modules directly, no two modules outside ``commands/`` share a basename,
every package is a row of docs/architecture.md's table and a layer of the ``package layers``
contract, and every room of ``constraints/`` is ordered by the ``constraints rooms`` contract."""

from __future__ import annotations

import re
import tomllib
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "ckspace"
MOST_MODULES = 12
"""Modules one room may hold directly (``commands/`` holds one per subcommand and is exempt)."""


def _packages() -> list[Path]:
    return sorted(p.parent for p in PACKAGE.rglob("__init__.py") if "__pycache__" not in p.parts)


def _modules(folder: Path) -> list[Path]:
    return sorted(p for p in folder.glob("*.py") if p.name != "__init__.py")


def _contracts() -> dict[str, dict]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    return {c["name"]: c for c in config["tool"]["importlinter"]["contracts"]}


def test_no_room_but_commands_holds_more_than_a_dozen_modules() -> None:
    crowded = {
        str(p.relative_to(ROOT)): len(_modules(p))
        for p in _packages()
        if p.name != "commands" and len(_modules(p)) > MOST_MODULES
    }
    assert not crowded


def test_no_two_modules_outside_commands_share_a_basename() -> None:
    """``commands/`` is named for the subcommands (``plan``, ``lint``, ``explain``) whose work lives
    in the rooms under the same word; elsewhere a module's name finds it."""
    modules = [p for p in PACKAGE.rglob("*.py") if p.name not in {"__init__.py", "__main__.py"}]
    modules = [p for p in modules if p.parent.name != "commands"]
    shared = {name for name, n in Counter(p.stem for p in modules).items() if n > 1}
    assert not shared, sorted(str(p.relative_to(ROOT)) for p in modules if p.stem in shared)


def test_every_top_level_package_is_a_layer_and_a_row_of_the_architecture_page() -> None:
    top = {p.name for p in _packages() if p.parent == PACKAGE}
    layers = _contracts()["package layers"]["layers"]
    named = {m.removeprefix("ckspace.") for layer in layers for m in re.split(r"\s*\|\s*", layer)}
    assert top <= named, top - named
    page = (ROOT / "docs" / "architecture.md").read_text()
    table = "\n".join(row for row in page.splitlines() if row.startswith("| `"))
    rows = set(re.findall(r"`ckspace/([a-z_]+)/`", table))
    assert top <= rows, top - rows


def test_every_room_of_constraints_is_ordered_and_each_room_orders_its_modules() -> None:
    contracts = _contracts()
    rooms = {p.name for p in _packages() if p.parent == PACKAGE / "constraints"}
    assert rooms == set(contracts["constraints rooms"]["layers"])
    for room in rooms:
        modules = {p.stem for p in _modules(PACKAGE / "constraints" / room)}
        if len(modules) < 2:
            continue
        contract = contracts.get(f"constraints.{room} modules")
        if contract is None:  # a room of one-module-each families (rule sets, generators) is ordered by imports
            continue
        layered = {m for layer in contract["layers"] for m in re.split(r"\s*\|\s*", layer)}
        assert modules == layered, (room, modules ^ layered)
