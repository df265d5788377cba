"""Where a kernel's operands live and how its time is taken: an AMD GPU through AMD's HIP Python
bindings, or host memory for stand-in libraries.

A bench worker talks to one :class:`Device`: allocate, upload, zero, download, time a call, and
say beforehand whether a problem's bytes fit in the memory free now (:meth:`Device.shortfall`). The
GPU device uses ``hip-python`` (``from hip import hip``, the official bindings) for memory, a stream
and events; it is created only inside the worker process that runs kernels, never in the process
that starts workers, so a GPU is never initialised before a fork and a faulting kernel takes down
only its worker. The host device serves libraries whose ``ckspace_run`` computes on host memory
(the test stand-ins): the same worker code runs them, with wall-clock timing.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from typing import Any, Literal, Protocol

import numpy as np
from pydantic import BaseModel

from ckspace.core.errors import CkspaceError

log = logging.getLogger(__name__)

Backend = Literal["hip", "host"]
BACKENDS: tuple[str, ...] = ("hip", "host")
HIP_MISSING = (
    "ckspace bench needs AMD's HIP Python bindings and a ROCm runtime: "
    "pip install 'ckspace[hip]' on a machine with ROCm and an AMD GPU"
)


class DeviceInfo(BaseModel):
    """What a measurement records about where it ran."""

    index: int
    name: str
    clock_mhz: float | None


class Device(Protocol):
    info: DeviceInfo

    def alloc(self, nbytes: int) -> int: ...
    def upload(self, pointer: int, data: np.ndarray) -> None: ...
    def zero(self, pointer: int, nbytes: int) -> None: ...
    def download(self, pointer: int, nbytes: int) -> bytes: ...
    def free(self, pointer: int) -> None: ...
    @property
    def stream(self) -> int | None: ...
    def time_ms(self, call: Callable[[], int]) -> tuple[int, float]: ...
    def shortfall(self, host: int, device: int) -> str | None: ...


def host_available_bytes() -> int:
    """The host memory that can be allocated now without swapping: Linux's ``MemAvailable``
    estimate (free pages and the page cache it can drop); elsewhere the free physical pages."""
    try:
        with open("/proc/meminfo", encoding="ascii") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")


def _host_shortfall(nbytes: int, what: str = "") -> str | None:
    available = host_available_bytes()
    return None if nbytes <= available else f"{nbytes} bytes of host memory needed{what}, {available} available"


def hip_module() -> Any:
    """``hip.hip`` of hip-python, or the one-line reason it cannot be had."""
    try:
        from hip import hip  # type: ignore[import-not-found]
    except ImportError as exc:
        raise CkspaceError(f"{HIP_MISSING} ({exc})") from None
    return hip


def _check(hip: Any, result: Any, what: str) -> Any:
    """Unwrap hip-python's ``(hipError_t, value...)`` tuples; an error names the call."""
    err, *values = result if isinstance(result, tuple) else (result,)
    if err != hip.hipError_t.hipSuccess:
        _, text = hip.hipGetErrorString(err)
        raise CkspaceError(f"{what} failed: {getattr(err, 'name', err)} ({text})")
    return values[0] if len(values) == 1 else values


def hip_devices() -> list[DeviceInfo]:
    """The AMD GPUs the HIP runtime sees (initialises HIP in the calling process: call it only in a
    process that will not fork, such as the probe subprocess of ``ckspace bench``)."""
    hip = hip_module()
    err, count = hip.hipGetDeviceCount()
    if err == hip.hipError_t.hipErrorNoDevice or (err == hip.hipError_t.hipSuccess and count == 0):
        raise CkspaceError(
            "no AMD GPU: the HIP runtime reports no device (hipErrorNoDevice); ckspace bench "
            "needs a ROCm machine with an AMD GPU (/dev/kfd)"
        )
    _check(hip, (err, count), "hipGetDeviceCount")
    return [_describe(hip, i) for i in range(count)]


def _describe(hip: Any, index: int) -> DeviceInfo:
    props = _check(hip, hip.hipGetDeviceProperties(index), "hipGetDeviceProperties")
    name, arch = (v.decode() if isinstance(v, bytes) else str(v) for v in (props.name, props.gcnArchName))
    return DeviceInfo(index=index, name=f"{name} ({arch})", clock_mhz=props.clockRate / 1000.0)


class HipDevice:
    """One AMD GPU: device memory, one stream, events for timing."""

    def __init__(self, index: int) -> None:
        self._hip = hip = hip_module()
        _check(hip, hip.hipSetDevice(index), f"hipSetDevice({index})")
        self.info = _describe(hip, index)
        self._stream = _check(hip, hip.hipStreamCreate(), "hipStreamCreate")
        self._start = _check(hip, hip.hipEventCreate(), "hipEventCreate")
        self._stop = _check(hip, hip.hipEventCreate(), "hipEventCreate")
        self._buffers: dict[int, Any] = {}
        log.info("device %d: %s", index, self.info.name)

    def alloc(self, nbytes: int) -> int:
        pointer = _check(self._hip, self._hip.hipMalloc(max(nbytes, 1)), f"hipMalloc({nbytes})")
        self._buffers[int(pointer)] = pointer
        return int(pointer)

    def upload(self, pointer: int, data: np.ndarray) -> None:
        data = np.ascontiguousarray(data)
        _check(
            self._hip,
            self._hip.hipMemcpy(
                self._buffers[pointer], data, data.nbytes, self._hip.hipMemcpyKind.hipMemcpyHostToDevice
            ),
            "hipMemcpy to device",
        )

    def zero(self, pointer: int, nbytes: int) -> None:
        _check(self._hip, self._hip.hipMemsetAsync(self._buffers[pointer], 0, nbytes, self._stream), "hipMemsetAsync")

    def download(self, pointer: int, nbytes: int) -> bytes:
        host = bytearray(nbytes)
        _check(self._hip, self._hip.hipStreamSynchronize(self._stream), "hipStreamSynchronize")
        _check(
            self._hip,
            self._hip.hipMemcpy(host, self._buffers[pointer], nbytes, self._hip.hipMemcpyKind.hipMemcpyDeviceToHost),
            "hipMemcpy to host",
        )
        return bytes(host)

    def free(self, pointer: int) -> None:
        _check(self._hip, self._hip.hipFree(self._buffers.pop(pointer)), "hipFree")

    @property
    def stream(self) -> int | None:
        return int(self._stream)

    def time_ms(self, call: Callable[[], int]) -> tuple[int, float]:
        """Run ``call`` (a kernel launch on this device's stream) between two events; its status and
        the device time between them."""
        hip = self._hip
        _check(hip, hip.hipEventRecord(self._start, self._stream), "hipEventRecord")
        status = call()
        _check(hip, hip.hipEventRecord(self._stop, self._stream), "hipEventRecord")
        _check(hip, hip.hipEventSynchronize(self._stop), "hipEventSynchronize")
        return status, float(_check(hip, hip.hipEventElapsedTime(self._start, self._stop), "hipEventElapsedTime"))

    def shortfall(self, host: int, device: int) -> str | None:
        """Why ``device`` bytes on this GPU (its free memory now, ``hipMemGetInfo``) and ``host``
        bytes on the host do not fit, or None when they do."""
        free, _total = _check(self._hip, self._hip.hipMemGetInfo(), "hipMemGetInfo")
        if device > free:
            return f"{device} bytes of device memory needed, {free} free on {self.info.name}"
        return _host_shortfall(host)


class HostDevice:
    """Host memory for libraries whose ``ckspace_run`` computes on the CPU (stand-ins): numpy buffers
    and wall-clock time."""

    def __init__(self, index: int) -> None:
        self.info = DeviceInfo(index=index, name=f"host stand-in {index}", clock_mhz=None)
        self._buffers: dict[int, np.ndarray] = {}

    def alloc(self, nbytes: int) -> int:
        buffer = np.zeros(max(nbytes, 1), dtype=np.uint8)
        pointer = buffer.ctypes.data
        self._buffers[pointer] = buffer
        return pointer

    def upload(self, pointer: int, data: np.ndarray) -> None:
        raw = np.ascontiguousarray(data).view(np.uint8).reshape(-1)
        self._buffers[pointer][: raw.size] = raw

    def zero(self, pointer: int, nbytes: int) -> None:
        self._buffers[pointer][:nbytes] = 0

    def download(self, pointer: int, nbytes: int) -> bytes:
        return self._buffers[pointer][:nbytes].tobytes()

    def free(self, pointer: int) -> None:
        del self._buffers[pointer]

    @property
    def stream(self) -> int | None:
        return None

    def time_ms(self, call: Callable[[], int]) -> tuple[int, float]:
        start = time.perf_counter()
        status = call()
        return status, (time.perf_counter() - start) * 1e3

    def shortfall(self, host: int, device: int) -> str | None:
        """Why ``host`` plus ``device`` bytes do not fit in the host's available memory (this
        device's buffers are host memory too), or None when they do."""
        return _host_shortfall(host + device, " (the device's buffers are host memory)")


def open_device(backend: Backend, index: int) -> Device:
    """The worker's device (the only place a GPU is initialised)."""
    if backend == "hip":
        return HipDevice(index)
    return HostDevice(index)
