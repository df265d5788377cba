"""CI's skip policy (tests/skip_policy.py) on a generated test run: with CKSPACE_ONLY_GPU_SKIPS=1 a
skip for any reason but "no AMD GPU" fails, wherever it is raised (test body, fixture, skipif mark,
a module skipping itself); without it every skip stays a skip; an expected failure is no skip."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from skip_policy import NO_AMD_GPU, STRICT

TESTS = Path(__file__).resolve().parent
GENERATED = f'''
import pytest

@pytest.fixture
def device():
    pytest.skip("{NO_AMD_GPU}: a fixture that needs one")

def test_without_gpu_in_the_body():
    pytest.skip("{NO_AMD_GPU}")

def test_without_gpu_in_a_fixture(device):
    pass

def test_other_reason():
    pytest.skip("../shared is absent")

@pytest.mark.skipif(True, reason="a mark's reason")
def test_other_reason_by_mark():
    pass

@pytest.mark.xfail(reason="known")
def test_expected_failure():
    assert False

def test_passes():
    pass
'''
SKIPPED_MODULE = 'import pytest\npytest.skip("not this module", allow_module_level=True)\n'


def _outcomes(folder: Path, strict: bool) -> dict[str, int]:
    """Run pytest on ``folder`` with the policy's hooks; the counts of its summary line."""
    env = {k: v for k, v in os.environ.items() if k != STRICT} | {"PYTHONPATH": str(TESTS)}
    if strict:
        env[STRICT] = "1"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "skip_policy",
            "-p",
            "no:cacheprovider",
            "-q",
            "--continue-on-collection-errors",
            "-o",
            "addopts=",
            str(folder),
        ],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    summary = done.stdout.strip().splitlines()[-1]
    return {word: int(count) for count, word in re.findall(r"(\d+) (\w+)", summary)}


@pytest.mark.slow
def test_only_the_no_gpu_skip_passes_the_policy(tmp_path: Path) -> None:
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    (tmp_path / "test_generated.py").write_text(GENERATED)
    (tmp_path / "test_skipped_module.py").write_text(SKIPPED_MODULE)
    assert _outcomes(tmp_path, strict=False) == {"passed": 1, "skipped": 5, "xfailed": 1}
    # the body's skip fails its test; the mark's (at setup) and the module's (at collection) are errors
    assert _outcomes(tmp_path, strict=True) == {"failed": 1, "errors": 2, "passed": 1, "skipped": 2, "xfailed": 1}


@pytest.mark.parametrize("reason", [NO_AMD_GPU, f"{NO_AMD_GPU}: bench needs one", f"Skipped: {NO_AMD_GPU}"])
def test_the_allowed_reason_is_matched_at_its_start(reason: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from skip_policy import _hold

    report = pytest.TestReport("t", ("f", 1, "t"), {}, "skipped", ("f", 1, reason), "call")
    monkeypatch.setenv(STRICT, "1")
    _hold(report)
    assert report.skipped
