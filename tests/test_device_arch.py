"""Which device a library's kernels run on: ``ckspace_arch``, ``ckspace_arch_matches`` (host code,
compiled here with the host C compiler) and ``ckspace_device_supported`` (the HIP half, here the
stand-in's: the device's gcnArchName comes from ``CKSPACE_STANDIN_DEVICE_ARCH``), and the bench
worker that refuses a GPU of another arch before it runs a pair.

A kernel launched on a device of another arch fails at launch; a caller asks first, and the
hipDNN plugin declines every graph on such a device (tests/test_hipdnn.py)."""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from standin_library import build_standin
from test_dispatcher import compiled

from ckspace.core.errors import CkspaceError
from ckspace.emit.dispatcher import Library
from ckspace.run import worker
from ckspace.run.device import HostDevice
from ckspace.run.library import KernelLibrary
from ckspace.space.space import Space
from ckspace.workloads.problem import ConvProblem

DEVICE_VARIABLE = "CKSPACE_STANDIN_DEVICE_ARCH"


@cache
def host_part(arch: str) -> KernelLibrary:
    """The host dispatcher of a few of ``arch``'s forward kernels."""
    configs = [c for c in Space(arch, "forward", [2], ["bf16"], "default", ck=None) if c.kind == "gemm"][:3]
    return compiled(Library.build(configs), arch)


def base_arch(device_arch: str) -> str:
    """A gcnArchName's arch: what comes before its first feature flag (``gfx942:sramecc+:xnack-``)."""
    return device_arch.split(":", 1)[0]


@pytest.mark.slow
def test_the_library_names_its_arch_and_matches_device_names() -> None:
    for arch in ("gfx942", "gfx950"):
        library = host_part(arch)
        assert library.arch == arch
        assert library.runs_on(arch) and library.runs_on(f"{arch}:sramecc+:xnack-") and library.runs_on(f"{arch}:")
        for other in ("", arch[:-1], f"{arch}0", f"{arch}a:xnack+", f"x{arch}", arch.upper(), "gfx1201"):
            assert not library.runs_on(other), other
    assert host_part("gfx942")._lib.ckspace_arch_matches(None) == 0


@settings(deadline=None)  # the first example builds the host part's selector (seconds on a busy machine)
@given(st.text(alphabet="gfx0123456789a:+-", max_size=24))
@pytest.mark.slow
def test_arch_matching_equals_its_statement(device_arch: str) -> None:
    for arch in ("gfx942", "gfx950"):
        assert host_part(arch).runs_on(device_arch) == (base_arch(device_arch) == arch), (arch, device_arch)


@pytest.fixture(scope="module")
def standin(tmp_path_factory: pytest.TempPathFactory) -> KernelLibrary:
    tree = build_standin(tmp_path_factory.mktemp("device"))
    return KernelLibrary(tree / "build" / "gfx950" / "libckspace_kernels_gfx950.so")


def test_the_current_device_is_asked(standin: KernelLibrary, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(DEVICE_VARIABLE, raising=False)
    assert standin.device_supported() == (True, "gfx950:sramecc+:xnack-")
    monkeypatch.setenv(DEVICE_VARIABLE, "gfx942:sramecc+:xnack-")
    assert standin.device_supported() == (False, "gfx942:sramecc+:xnack-")
    monkeypatch.setenv(DEVICE_VARIABLE, "")
    with pytest.raises(CkspaceError, match=r"^ckspace_device_supported: HIP reports no current device$"):
        standin.device_supported()


def test_the_bench_worker_refuses_a_gpu_of_another_arch(
    standin: KernelLibrary, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before any pair (the supervisor reports a worker that stops then with its last line)."""
    monkeypatch.setattr(worker, "open_device", lambda backend, index: HostDevice(index))  # no GPU here
    monkeypatch.setenv(DEVICE_VARIABLE, "gfx942:sramecc+:xnack-")
    problem = ConvProblem.parse("N=1,G=1,C=16,K=16,Hi=6,Wi=6,Y=3,X=3,pad=1")
    name = standin.names[0]
    pair = worker.PairSpec(kernel=0, name=name, variant="bwd_weight", dtype="bf16", problem_idx=0, problem=problem)
    job = worker.BatchJob(
        library=str(standin.path), backend="hip", device=1, pairs=[pair], warmup=0, repeat=1, verify=False, seed=0
    )
    sent: list[dict] = []
    expected = f"GPU 1 is gfx942:sramecc+:xnack-; {Path(standin.path).name} holds kernels for gfx950"
    with pytest.raises(CkspaceError, match=f"^{re.escape(expected)}$"):
        worker.serve(job, sent.append)
    assert [next(iter(message)) for message in sent] == ["device"]  # no pair started
    monkeypatch.setenv(DEVICE_VARIABLE, "gfx950:sramecc+:xnack-")
    worker.serve(job, sent.append)
    # the worker says which problem it prepares before it allocates (a worker dying there costs that problem only)
    assert [next(iter(message)) for message in sent] == ["device", "device", "prepare", "start", "done"]
