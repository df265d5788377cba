"""The checked-in mutation-testing configuration stays usable: scripts/mutation.py is opt-in and
slow, so a config or an equivalent-mutant list that no longer matches the code would otherwise be
found only by the next person who runs it."""

from __future__ import annotations

import importlib.util
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _script():
    spec = importlib.util.spec_from_file_location("mutation_script", ROOT / "scripts" / "mutation.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look themselves up there
    spec.loader.exec_module(module)
    return module


def test_every_module_and_test_file_of_the_config_exists() -> None:
    config = tomllib.loads((ROOT / "tests" / "mutation" / "config.toml").read_text())
    modules = config["modules"]
    assert modules
    for name, settings in modules.items():
        assert (ROOT / name).is_file(), name
        for test in settings["tests"]:
            assert (ROOT / test).is_file(), test
        for node in settings.get("deselect", ()):  # a test function of one of the module's files
            path, _, function = node.partition("::")
            assert path in settings["tests"] and f"def {function}(" in (ROOT / path).read_text(), node


def test_every_listed_equivalent_mutant_names_a_line_of_its_module() -> None:
    equivalents = _script().read_equivalents()
    assert equivalents
    for entry in equivalents.values():
        source = (ROOT / entry.module).read_text()
        assert entry.line in source, (entry.module, entry.line)
        assert len(entry.reason.split()) >= 5, entry  # a reason, not a label
