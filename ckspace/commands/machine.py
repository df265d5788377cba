"""What this machine offers a framework integrator before building, for ``ckspace info``: the HIP
compiler for each arch the project's toolchain scripts cover, the CK headers found, the GPUs
visible, the shipped selection models and what builds a hipDNN plugin (flatc), as typed facts
(:class:`Machine`).

A probe that fails is a fact too: its one-line reason (which names the variable or the script that
would fix it) is reported in place of the answer, never a traceback. Probes that run other programs
are bounded in time: a compiler or a HIP runtime that hangs must not hang ``info``. The compilers
are asked in throwaway processes (``python -m ckspace.commands.machine ARCH``), each in a session of
its own, so a probe that does not answer in time is killed with every compiler it started; the GPUs
are asked the way ``bench`` asks them (:func:`ckspace.run.gpus.probe_devices`), with a timeout.
Reading the CK headers and the model cards is file reading, as every command does.

Kept apart from :mod:`ckspace.commands.info` because the typed facts need pydantic, and every
command module is imported to build the parser: a cached listing must start without pydantic.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
import sys
import time

from pydantic import BaseModel

from ckspace.core.errors import CkspaceError
from ckspace.run.device import DeviceInfo

log = logging.getLogger(__name__)

PROBE_SECONDS = 30.0
"""How long the compiler and GPU probes may take (they run side by side) before each that has not
answered is stopped and reported as such."""


class HipCompiler(BaseModel):
    """The HIP compiler ``ckspace build`` would use for an arch, or why there is none."""

    arch: str
    kind: str | None = None
    """``rocm`` (amdclang++/hipcc) or ``clang`` (a system or wrapped clang); None: none found."""
    path: str | None = None
    version: str | None = None
    """First line of its ``--version``."""
    reason: str | None = None
    """Why none was found (what was tried, and the variable or script that provides one)."""


class CkHeadersFound(BaseModel):
    """The CK Tile headers the commands answer for, or why none were found."""

    include_dir: str | None = None
    label: str | None = None
    """The revision's label (``unknown CK (...)`` for headers never compiled against)."""
    fingerprint: str | None = None
    """sha256 of the grouped-convolution and GEMM headers: what tells two CK trees apart."""
    verified: bool | None = None
    """Whether the emitted code has been compiled against this revision."""
    reason: str | None = None


class Gpus(BaseModel):
    """The AMD GPUs the HIP runtime sees; with none, why (no runtime, no device, a hung probe)."""

    devices: list[DeviceInfo] = []
    reason: str | None = None


class ShippedModel(BaseModel):
    """A selection model the package ships, as its card names its cell."""

    arch: str
    variant: str
    dtype: str
    directory: str


class ShippedModels(BaseModel):
    """The shipped models, or why their cards could not be read."""

    models: list[ShippedModel] = []
    reason: str | None = None


class FlatBuffersFound(BaseModel):
    """What ``ckspace build`` generates a hipDNN plugin's graph reader with (flatc and the headers of
    its version), or why there is none."""

    flatc: str | None = None
    version: str | None = None
    include_dir: str | None = None
    reason: str | None = None


class Machine(BaseModel):
    """What ``ckspace info`` reports about this machine."""

    compilers: list[HipCompiler]
    ck: CkHeadersFound
    gpus: Gpus
    models: ShippedModels
    flatbuffers: FlatBuffersFound


def probe_machine(ck_root: str | None = None, seconds: float = PROBE_SECONDS) -> Machine:
    """Every fact of :class:`Machine`. The compiler probes start first and run while the others are
    asked; ``ck_root``: the CK headers to report (None: where every command looks)."""
    from ckspace.compiling.toolchain import TOOLCHAIN_SCRIPTS

    deadline = time.monotonic() + seconds
    started: dict[str, subprocess.Popen[str]] = {}
    try:
        for arch in TOOLCHAIN_SCRIPTS:
            started[arch] = _start_compiler_probe(arch)
        gpus, ck, models, flatbuffers = _gpus(seconds), _ck_headers(ck_root), _shipped_models(), _flatbuffers()
        compilers = [_compiler(arch, probe, deadline, seconds) for arch, probe in started.items()]
    finally:
        for probe in started.values():
            _stop(probe)
    return Machine(compilers=compilers, ck=ck, gpus=gpus, models=models, flatbuffers=flatbuffers)


def _start_compiler_probe(arch: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", __name__, arch],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own process group: stopping it stops the compilers it runs
    )


def _stop(probe: subprocess.Popen[str]) -> None:
    """Kill a compiler probe that is still running, with everything it started."""
    if probe.poll() is None:
        with contextlib.suppress(ProcessLookupError):  # it ended in between
            os.killpg(probe.pid, signal.SIGKILL)
        probe.communicate()


def _compiler(arch: str, probe: subprocess.Popen[str], deadline: float, seconds: float) -> HipCompiler:
    from ckspace.compiling.toolchain import Toolchain

    try:
        out, err = probe.communicate(timeout=max(deadline - time.monotonic(), 0.0))
    except subprocess.TimeoutExpired:
        _stop(probe)
        return HipCompiler(
            arch=arch,
            reason=f"the compiler probe gave no answer within {seconds:g} s and was stopped (a compiler that "
            "hangs? CKSPACE_CXX, ROCM_PATH and the clang++ on PATH are what it runs)",
        )
    lines = err.strip().splitlines()
    if probe.returncode != 0:
        log.debug("compiler probe for %s: %s", arch, err)  # a traceback's last line is the reason
        return HipCompiler(arch=arch, reason=lines[-1] if lines else f"the probe exited with status {probe.returncode}")
    try:
        found = Toolchain.model_validate_json(out)
    except ValueError as exc:  # something else printed on stdout
        return HipCompiler(arch=arch, reason=f"the compiler probe answered no toolchain: {exc}")
    for line in lines:  # what discover warned about (CKSPACE_CLANG read as CKSPACE_CXX)
        log.warning("compiler probe for %s: %s", arch, line)
    return HipCompiler(arch=arch, kind=found.kind, path=found.compiler, version=found.version)


def _gpus(seconds: float) -> Gpus:
    from ckspace.run.gpus import probe_devices

    try:
        return Gpus(devices=probe_devices(timeout=seconds))
    except (CkspaceError, OSError, ValueError) as exc:  # ValueError: the probe printed no JSON
        return Gpus(reason=str(exc))


def _ck_headers(ck_root: str | None) -> CkHeadersFound:
    from ckspace.environment.ck_header_cache import identity_at
    from ckspace.environment.ck_locate import locate_ck

    try:
        include = locate_ck(ck_root)
        fingerprint, label, verified, _ = identity_at(include)
    except (CkspaceError, OSError) as exc:
        return CkHeadersFound(reason=str(exc))
    return CkHeadersFound(include_dir=str(include), label=label, fingerprint=fingerprint, verified=verified)


def _flatbuffers() -> FlatBuffersFound:
    from ckspace.compiling.plugin_build import flatbuffers

    try:
        found = flatbuffers()
    except (CkspaceError, OSError) as exc:
        return FlatBuffersFound(reason=str(exc))
    return FlatBuffersFound(flatc=found.flatc, version=found.version, include_dir=found.include)


def _shipped_models() -> ShippedModels:
    from ckspace.select.store import shipped_model_dir, shipped_models

    try:
        cards = shipped_models().values()
    except (CkspaceError, OSError) as exc:
        return ShippedModels(reason=str(exc))
    return ShippedModels(
        models=[
            ShippedModel(
                arch=c.arch,
                variant=c.variant,
                dtype=c.dtype,
                directory=str(shipped_model_dir(c.arch, c.variant, c.dtype)),
            )
            for c in cards
        ]
    )


def main(argv: list[str]) -> int:
    """The throwaway process of one compiler probe: the toolchain found for ``argv[0]`` (an arch)
    as JSON on stdout, or the one-line reason there is none on stderr and status 1."""
    from ckspace.compiling.toolchain import discover

    try:
        found = discover(argv[0])
    except CkspaceError as exc:
        print(exc, file=sys.stderr)
        return 1
    print(found.model_dump_json())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
