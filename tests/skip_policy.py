"""Which skips a test run may have, and the hooks that hold CI to it.

Every test data file ships with the checkout and every Python dependency with ``.[test]``, so a
test may skip for two reasons only: the machine has no AMD GPU, or it has no compiler (for which
the reasons name the script that installs one). With ``CKSPACE_ONLY_GPU_SKIPS=1`` (.ci/run sets
it; CI installs the toolchain) any skip but the no-AMD-GPU one is a failure: a skip that creeps in
with a new reason fails the run instead of quietly hiding a test. tests/conftest.py registers the
hooks; tests/test_skip_policy.py runs them on a generated test file.
"""

from __future__ import annotations

import os

import pytest

NO_AMD_GPU = "no AMD GPU"
"""The start of the one skip reason ``CKSPACE_ONLY_GPU_SKIPS=1`` lets through."""
NO_HIP_COMPILER = "no HIP compiler for gfx942 (scripts/install-toolchain-gfx942.sh installs one)"
NO_C_COMPILER = (
    "no host C compiler: no $CC, cc, gcc or clang (scripts/install-toolchain-gfx942.sh installs clang-19: CC=clang-19)"
)
STRICT = "CKSPACE_ONLY_GPU_SKIPS"


def _hold(report: pytest.CollectReport | pytest.TestReport) -> None:
    """Turn a skip whose reason does not start with :data:`NO_AMD_GPU` into a failure, when
    ``$CKSPACE_ONLY_GPU_SKIPS`` is 1 (an expected failure, ``xfail``, is not a skip)."""
    if os.environ.get(STRICT) != "1" or not report.skipped or hasattr(report, "wasxfail"):
        return
    reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
    if reason.removeprefix("Skipped: ").startswith(NO_AMD_GPU):
        return
    report.outcome = "failed"
    report.longrepr = f"{STRICT}=1: the only skip allowed is '{NO_AMD_GPU}', but this one says: {reason}"


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    report = yield
    _hold(report)
    return report


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(collector: pytest.Collector):
    """A module that skips itself as a whole (``allow_module_level``, a module-level
    ``importorskip``) is held to the same rule."""
    report = yield
    _hold(report)
    return report
