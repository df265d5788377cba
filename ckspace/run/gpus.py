"""Which AMD GPUs this machine has, asked in a throwaway process.

Asking the HIP runtime initialises it, and a process that has initialised a GPU must not start the
workers that run kernels (nor should a crash in the driver take ``ckspace bench`` down), so the
question is asked by ``python -m ckspace.run.gpus`` and its answer read back as JSON.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys

from ckspace.core.errors import CkspaceError
from ckspace.run.device import HIP_MISSING, DeviceInfo, hip_devices

PROBE_SECONDS = 120.0
"""How long ``bench`` lets the probe run: HIP's initialisation takes seconds even on a node of many
GPUs, and a wedged driver can hang it for good."""


def probe_devices(timeout: float = PROBE_SECONDS) -> list[DeviceInfo]:
    """The GPUs, or a one-line :class:`CkspaceError` saying what is missing and how to get it.
    ``timeout``: seconds the probe may take before it is killed and that is the error (a wedged
    driver can hang HIP's initialisation; a command must answer anyway)."""
    if importlib.util.find_spec("hip") is None:
        raise CkspaceError(HIP_MISSING)
    try:
        done = subprocess.run(
            [sys.executable, "-m", __name__], capture_output=True, text=True, check=False, timeout=timeout
        )
    except subprocess.TimeoutExpired:
        raise CkspaceError(
            f"the GPU probe gave no answer within {timeout:g} s (a hung HIP runtime or driver)"
        ) from None
    if done.returncode != 0:
        lines = (done.stderr or done.stdout).strip().splitlines()
        raise CkspaceError(lines[-1] if lines else f"the GPU probe exited with status {done.returncode}")
    return [DeviceInfo(**d) for d in json.loads(done.stdout)]


def main() -> int:
    try:
        devices = hip_devices()
    except CkspaceError as exc:
        print(exc, file=sys.stderr)
        return 1
    print(json.dumps([d.model_dump() for d in devices]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
