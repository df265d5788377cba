"""The layer contracts of pyproject.toml hold, and they bite: an upward import or a circle fails."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LINT_IMPORTS = shutil.which("lint-imports", path=str(Path(sys.executable).parent)) or shutil.which("lint-imports")


def _lint(package_parent: Path) -> subprocess.CompletedProcess[str]:
    """Run lint-imports with the repo's contracts on the ``ckspace`` found in ``package_parent``."""
    env = {**os.environ, "PYTHONPATH": str(package_parent)}
    return subprocess.run(
        [LINT_IMPORTS, "--config", str(ROOT / "pyproject.toml"), "--no-cache"],
        capture_output=True,
        text=True,
        env=env,
        cwd=package_parent,
        check=False,
    )


@pytest.fixture(scope="module")
def lint_available() -> None:
    if LINT_IMPORTS is None:
        pytest.fail("lint-imports is not installed (pip install '.[test]' installs import-linter)")


def test_the_package_keeps_its_layers_and_has_no_circles(lint_available) -> None:
    result = _lint(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


@pytest.mark.parametrize(
    "module,injected,contract",
    [
        ("core/vocab.py", "import ckspace.space.space", "package layers"),  # upward across packages
        (
            "constraints/language/expr.py",
            "import ckspace.constraints.language.rule",
            "constraints.language modules",
        ),  # upward inside a room
        (
            "constraints/language/rule.py",
            "import ckspace.constraints.rulebook.validity",
            "constraints rooms",
        ),  # upward between rooms
        ("core/fields.py", "import ckspace.core.config", "no circles"),  # config -> fields -> config
        ("compiling/builder.py", "import ckspace.run.sweep", "package layers"),  # compiling below run
        ("verify/reference.py", "import ckspace.compiling.builder", "package layers"),  # siblings in a layer
        ("features/matrix.py", "import ckspace.select.selector", "package layers"),  # features below select
        ("planning/plan.py", "import ckspace.training.metrics", "package layers"),  # planning below training
    ],
)
def test_an_upward_import_or_a_circle_breaks_a_contract(
    lint_available, tmp_path: Path, module: str, injected: str, contract: str
) -> None:
    copy = tmp_path / "ckspace"
    shutil.copytree(ROOT / "ckspace", copy, ignore=shutil.ignore_patterns("__pycache__", "models", "data"))
    target = copy / module
    target.write_text(target.read_text() + f"\n{injected}  # injected by the test\n")
    result = _lint(tmp_path)
    assert result.returncode != 0
    assert f"{contract} BROKEN" in result.stdout, result.stdout
