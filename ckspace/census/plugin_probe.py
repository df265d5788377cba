"""The child process of ``hipdnn census``: a hipDNN engine plugin asked about graphs, as hipDNN asks.

Run as ``python -m ckspace.census.plugin_probe PLUGIN GRAPHS_DIR START COUNT ARCH [PRELOAD]`` by
:mod:`ckspace.census.survey`, never in the census's own process: a plugin that crashes on a graph
takes this process down, and the census records that graph as a crash and asks about the rest in a
new one. It loads ``PRELOAD`` first when given (the stand-in HIP runtime, global, so that the
plugin's ``DT_NEEDED`` on the HIP runtime is met by it), then the plugin (``RTLD_LOCAL``, as
hipDNN loads plugins), lists its engines (``hipdnnEnginePluginGetAllEngineIds`` and
``...GetEngineName``), creates a handle, asks ``hipdnnEnginePluginGetApplicableEngineIds`` once
with no graph (the plugin checks the device before the graph, so that answer is its device check)
and once per graph file ``GRAPHS_DIR/<i>.bin`` from ``START`` on, reading
``hipdnnPluginGetLastErrorString`` when no engine applies, and destroys the handle. ``ARCH`` is the
device arch the stand-in reports (``-``: the one in the engine names), passed to it in its
environment. Every answer is one JSON line on stdout, written as it is known. Imports nothing of
ckspace: it starts fast and loads nothing the plugin could meet.
"""

from __future__ import annotations

import ctypes
import json
import os
import re
import sys
from pathlib import Path

MAX_ENGINES = 64
SUCCESS = 0
ARCH_VARIABLE = "CKSPACE_CENSUS_DEVICE_ARCH"
"""The stand-in HIP runtime's device arch (:data:`ckspace.census.standin_hip.ARCH_VARIABLE`)."""
_ENGINE_ARCH = re.compile(r"^CKSPACE_(GFX[0-9A-Z]+)_CONV_")


class ConstData(ctypes.Structure):
    """hipDNN's ``hipdnnPluginConstData_t``."""

    _fields_ = [("ptr", ctypes.c_void_p), ("size", ctypes.c_size_t)]


def _emit(record: dict) -> None:
    sys.stdout.write(json.dumps(record) + "\n")
    sys.stdout.flush()


def _last_error(plugin: ctypes.CDLL) -> str:
    text = ctypes.c_char_p()
    plugin.hipdnnPluginGetLastErrorString(ctypes.byref(text))
    return (text.value or b"").decode(errors="replace")


def _applicable(plugin: ctypes.CDLL, handle: ctypes.c_void_p, data: bytes | None) -> dict:
    buffer = ctypes.create_string_buffer(data, len(data)) if data else None
    graph = ConstData(ctypes.cast(buffer, ctypes.c_void_p) if buffer is not None else None, len(data or b""))
    ids = (ctypes.c_int64 * MAX_ENGINES)()
    count = ctypes.c_uint32(0)
    status = plugin.hipdnnEnginePluginGetApplicableEngineIds(
        handle, ctypes.byref(graph), ids, MAX_ENGINES, ctypes.byref(count)
    )
    engines = [ids[i] for i in range(min(count.value, MAX_ENGINES))]
    reason = _last_error(plugin) if status != SUCCESS or not engines else ""
    return {"status": status, "engines": engines, "reason": reason}


def main(argv: list[str]) -> int:
    plugin_path, graphs, start, count, arch = argv[0], Path(argv[1]), int(argv[2]), int(argv[3]), argv[4]
    if len(argv) > 5:
        ctypes.CDLL(argv[5], mode=ctypes.RTLD_GLOBAL)
    plugin = ctypes.CDLL(plugin_path, mode=ctypes.RTLD_LOCAL)
    plugin.hipdnnEnginePluginGetAllEngineIds.argtypes = [ctypes.c_void_p, ctypes.c_uint32, ctypes.c_void_p]
    plugin.hipdnnEnginePluginGetEngineName.argtypes = [ctypes.c_int64, ctypes.POINTER(ctypes.c_char_p)]
    plugin.hipdnnEnginePluginCreate.argtypes = [ctypes.POINTER(ctypes.c_void_p)]
    plugin.hipdnnEnginePluginDestroy.argtypes = [ctypes.c_void_p]
    plugin.hipdnnEnginePluginGetApplicableEngineIds.argtypes = [
        ctypes.c_void_p,
        ctypes.POINTER(ConstData),
        ctypes.c_void_p,
        ctypes.c_uint32,
        ctypes.POINTER(ctypes.c_uint32),
    ]
    plugin.hipdnnPluginGetLastErrorString.argtypes = [ctypes.POINTER(ctypes.c_char_p)]
    plugin.hipdnnPluginGetLastErrorString.restype = None
    ids = (ctypes.c_int64 * MAX_ENGINES)()
    n = ctypes.c_uint32(0)
    if plugin.hipdnnEnginePluginGetAllEngineIds(ids, MAX_ENGINES, ctypes.byref(n)) != SUCCESS:
        _emit({"kind": "failed", "reason": f"hipdnnEnginePluginGetAllEngineIds failed: {_last_error(plugin)}"})
        return 1
    engines = {}
    for i in range(min(n.value, MAX_ENGINES)):
        name = ctypes.c_char_p()
        status = plugin.hipdnnEnginePluginGetEngineName(ids[i], ctypes.byref(name))
        engines[str(ids[i])] = (name.value or b"").decode() if status == SUCCESS else ""
    _emit({"kind": "engines", "engines": engines})
    if arch == "-":  # the arch in the engine names
        archs = {m.group(1).lower() for name in engines.values() if (m := _ENGINE_ARCH.match(name))}
        arch = archs.pop() if len(archs) == 1 else "-"
    if arch != "-":
        os.environ[ARCH_VARIABLE] = arch  # the stand-in HIP runtime reads it at each call
    handle = ctypes.c_void_p()
    if plugin.hipdnnEnginePluginCreate(ctypes.byref(handle)) != SUCCESS:
        _emit({"kind": "failed", "reason": f"hipdnnEnginePluginCreate failed: {_last_error(plugin)}"})
        return 1
    _emit({"kind": "device", "arch": None if arch == "-" else arch, **_applicable(plugin, handle, None)})
    for index in range(start, count):
        _emit({"kind": "graph", "index": index, **_applicable(plugin, handle, (graphs / f"{index}.bin").read_bytes())})
    plugin.hipdnnEnginePluginDestroy(handle)
    _emit({"kind": "done"})
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
