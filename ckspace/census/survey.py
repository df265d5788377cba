"""``hipdnn census``: which of a workload's convolutions a hipDNN plugin would serve, asked of the
plugin itself.

For each layer of a problems CSV (its ``bias`` column too) the census builds the graphs PyTorch
sends (:mod:`ckspace.emit.pytorch_graphs`: forward, backward-data and backward-weight by default,
what one training step sends per layer), serializes them with the schema ckspace renders
(:mod:`ckspace.census.hipdnn_wire`) and asks the plugin through hipDNN's C API, in a child process
(:mod:`ckspace.census.plugin_probe`): a plugin that crashes costs the graph it crashed on, which is
recorded as such, never the census. Identical graphs are asked once.

The device: a plugin declines every graph unless the current device is of its arch. A plugin
linked with HIP runs over a stand-in HIP runtime (:mod:`ckspace.census.standin_hip`) that reports one
device of ``arch`` (default: the arch in the plugin's engine names), so the census needs no GPU and
answers for that arch on any machine. A plugin that still reports no device (one linked over
another host runtime, or a stand-in that cannot help it) is refused in one line with the plugin's
own reason: every graph, and a call with no graph at all, is declined for that one reason.
"""

from __future__ import annotations

import csv
import io
import json
import logging
import os
import re
import selectors
import subprocess
import sys
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path

from ckspace.census.hip_imports import read_imports
from ckspace.census.hipdnn_wire import serialize
from ckspace.census.standin_hip import ARCH_VARIABLE
from ckspace.census.standin_hip import build as build_standin
from ckspace.core.errors import CkspaceError, InvalidInputError
from ckspace.core.vocab import Dtype, Variant
from ckspace.emit.pytorch_graphs import Layer, MemoryFormat, graph
from ckspace.environment.inputs import read_input_text
from ckspace.workloads.problem_columns import ProblemColumns

log = logging.getLogger(__name__)

TIMEOUT = 120.0
"""Seconds the plugin may take over one graph before the census calls it hung."""
STARTUP = 60.0
"""Seconds more for the probe's first answer: Python's start and the plugin's loading."""
_DEPTH_NEUTRAL = {"Di": 1, "Z": 1, "stride_d": 1, "pad_d": 0, "dil_d": 1}


class Verdict(StrEnum):
    SERVED = "served"
    DECLINED = "declined"
    CRASHED = "crashed"


@dataclass(frozen=True)
class Answer:
    """The plugin's answer to one graph: the engines it offers (names), or why it offers none."""

    verdict: Verdict
    engines: tuple[str, ...] = ()
    reason: str = ""


@dataclass(frozen=True)
class NamedLayer:
    line: int
    name: str
    layer: Layer


@dataclass
class Census:
    """Everything one census found: the plugin's engines, the device it ran on, and per layer and
    direction the answer."""

    plugin: str
    engines: dict[int, str]
    arch: str | None
    standin: bool
    dtype: Dtype
    memory_format: MemoryFormat
    variants: tuple[Variant, ...]
    layers: list[NamedLayer]
    answers: list[dict[Variant, Answer]] = field(default_factory=list)
    documents: list[dict[Variant, dict]] = field(default_factory=list)


def read_layers(path: Path) -> list[NamedLayer]:
    """The layers of a problems CSV, row by row (repeats kept: a model's identical blocks are
    layers of their own). Columns are read by :class:`ProblemColumns`, ``bias`` too; a ``layer``
    column names each row (else ``line N``). A 2D list's neutral depth cells are dropped, as plan
    reads problem lists."""
    reader = csv.DictReader(io.StringIO(read_input_text(path, "--problems"), newline=""))
    try:
        columns = ProblemColumns.of_problems_header(reader.fieldnames, path)
        names = {n.strip().lower(): n for n in reader.fieldnames or ()}
        layers = []
        for line, row in enumerate(reader, start=2):
            try:
                problem = columns.problem(row, line, _ndim_of)
            except InvalidInputError as exc:
                raise CkspaceError(f"{path}: line {line}: {str(exc).rpartition(': ')[2]}") from None
            label = (row.get(names["layer"]) or "").strip() if "layer" in names else ""
            layers.append(NamedLayer(line, label or f"line {line}", Layer(problem, columns.bias(row, line))))
    except csv.Error as exc:
        raise InvalidInputError(f"--problems {str(path)!r} is not a CSV file ({exc})") from None
    if not layers:
        raise CkspaceError(f"{path}: no problems")
    return layers


def _ndim_of(values: dict[str, int]) -> int:
    """As plan reads a problem list row without ``ndim``: 3D when a depth cell is not neutral."""
    if any(values.get(k, neutral) != neutral for k, neutral in _DEPTH_NEUTRAL.items()):
        return 3
    for key in _DEPTH_NEUTRAL:
        values.pop(key, None)
    return 2


def run_census(
    plugin: Path,
    layers: list[NamedLayer],
    variants: tuple[Variant, ...],
    dtype: Dtype,
    memory_format: MemoryFormat,
    arch: str | None = None,
    timeout: float = TIMEOUT,
) -> Census:
    """Ask ``plugin`` about every layer's graphs (see the module docstring)."""
    imports = read_imports(plugin)
    preload = build_standin(imports) if imports.hip_soname is not None else None
    documents = [{v: graph(item.layer, v, dtype, memory_format) for v in variants} for item in layers]
    unique: dict[str, int] = {}
    order: list[dict] = []
    for per_layer in documents:
        for document in per_layer.values():
            key = json.dumps(document, sort_keys=True)
            if key not in unique:
                unique[key] = len(order)
                order.append(document)
    with tempfile.TemporaryDirectory(prefix="ckspace-census-") as scratch:
        folder = Path(scratch)
        serialize(order, folder)
        engines, used_arch, device, raw = _ask(plugin, folder, len(order), preload, arch, timeout)
    census = Census(str(plugin), engines, used_arch, preload is not None, dtype, memory_format, variants, layers)
    answers = [_answer(r, engines) for r in raw]
    _refuse_without_device(device, answers)
    for per_layer in documents:
        census.documents.append(per_layer)
        census.answers.append({v: answers[unique[json.dumps(d, sort_keys=True)]] for v, d in per_layer.items()})
    return census


def _answer(record: dict, engines: dict[int, str]) -> Answer:
    if record.get("kind") == "crashed":
        return Answer(Verdict.CRASHED, reason=record["reason"])
    ids = record.get("engines", [])
    if ids and record.get("status") == 0:
        return Answer(Verdict.SERVED, tuple(engines.get(i, str(i)) for i in ids))
    reason = record.get("reason", "")
    if record.get("status") not in (0, None):
        reason = f"status {record['status']}: {reason}"
    return Answer(Verdict.DECLINED, reason=reason)


def _refuse_without_device(device: dict, answers: list[Answer]) -> None:
    """The device check is the plugin's first: when a call with no graph and every graph are
    declined for one and the same reason, that reason is the device's, not the graphs'."""
    reason = device.get("reason", "")
    if answers and all(a.verdict is Verdict.DECLINED and a.reason == reason for a in answers):
        raise CkspaceError(f"the plugin reports no device: {reason}")


def _ask(
    plugin: Path, graphs: Path, count: int, preload: Path | None, arch: str | None, timeout: float
) -> tuple[dict[int, str], str | None, dict, list[dict]]:
    """Run :mod:`ckspace.census.plugin_probe` over the graphs, again after each crash or hang, from the
    graph after the one that ended it."""
    records: list[dict] = []
    engines: dict[int, str] = {}
    device: dict = {}
    used: str | None = None
    start = 0
    while start < count or not engines:
        # the stand-in's device is the probe's to set (ARCH below), never a stray one of the caller's
        environment = {k: v for k, v in os.environ.items() if k != ARCH_VARIABLE}
        command = [
            sys.executable,
            "-m",
            "ckspace.census.plugin_probe",
            str(plugin),
            str(graphs),
            str(start),
            str(count),
        ]
        command.append(arch or "-")
        if preload is not None:
            command.append(str(preload))
        lines, failure = _run(command, environment, timeout)
        answered = 0
        for record in lines:
            kind = record.get("kind")
            if kind == "engines":
                engines = {int(k): v for k, v in record["engines"].items()}
            elif kind == "device":
                device = record
                used = record.get("arch") or None
            elif kind == "graph":
                records.append(record)
                answered += 1
            elif kind == "failed":
                raise CkspaceError(f"{plugin}: {record['reason']}")
        if not engines:
            raise CkspaceError(f"{plugin}: the plugin failed before listing its engines ({failure or 'no answer'})")
        start += answered
        if start < count:
            if failure is None:
                raise CkspaceError(f"{plugin}: the plugin stopped answering after graph {start} of {count}")
            records.append({"kind": "crashed", "index": start, "reason": failure})
            start += 1
    return engines, used, device, records


def _run(command: list[str], environment: dict[str, str], timeout: float) -> tuple[list[dict], str | None]:
    """The probe's JSON lines, and why it ended early (None: it finished). Each line must come
    within ``timeout`` seconds of the one before (the first within ``timeout`` plus the plugin's
    loading): a graph the plugin takes longer over is a hang, and the probe is killed."""
    lines: list[dict] = []
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=environment)
    failure = None
    stderr = b""
    try:
        assert process.stdout is not None
        fd = process.stdout.fileno()  # read raw: a buffered reader would hold lines select() cannot see
        pending = b""
        with selectors.DefaultSelector() as selector:
            selector.register(fd, selectors.EVENT_READ)
            wait = timeout + STARTUP
            while True:
                if not selector.select(wait):
                    failure = f"no answer within {timeout:g} s"
                    process.kill()
                    break
                chunk = os.read(fd, 1 << 16)
                if not chunk:
                    break
                pending += chunk
                *complete, pending = pending.split(b"\n")
                for text in complete:
                    try:
                        lines.append(json.loads(text))
                    except (json.JSONDecodeError, UnicodeDecodeError):
                        continue  # the plugin's own prints
                    wait = timeout
        _, stderr = process.communicate()
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    if failure is None and process.returncode != 0:
        said = stderr.decode(errors="replace").strip()
        last = said.splitlines()[-1] if said else ""
        failure = f"the plugin's process ended with {_status(process.returncode)}" + (f": {last}" if last else "")
    if failure is None and not any(r.get("kind") == "done" for r in lines):
        failure = "the plugin's process ended without finishing"
    return lines, failure


def _status(code: int) -> str:
    if code < 0:
        import signal

        try:
            return f"signal {signal.Signals(-code).name}"
        except ValueError:
            return f"signal {-code}"
    return f"exit status {code}"


def reason_kind(reason: str) -> str:
    """A decline's reason with its numbers and lists folded (``strides [...]``, ``uid N``), so that
    the totals count kinds of reasons, not shapes; an engine's name before ``: not applicable``
    is dropped (the engine is the direction's, which the totals say)."""
    text = re.sub(r"^CKSPACE_\w+: ", "", reason)
    text = re.sub(r"\[[^\]]*\]", "[...]", text)
    return re.sub(r"-?\d+", "N", text)


def totals(census: Census) -> dict:
    """Per direction, how many layers the plugin serves, declines and crashed on; the declines by
    kind of reason with a full example of each."""
    counts = {v.value: Counter() for v in census.variants}
    reasons: dict[str, dict] = {}
    for answers in census.answers:
        for variant, answer in answers.items():
            counts[variant.value][answer.verdict.value] += 1
            if answer.verdict is not Verdict.SERVED:
                kind = reason_kind(answer.reason) if answer.verdict is Verdict.DECLINED else "crashed"
                entry = reasons.setdefault(
                    kind, {"reason": kind, "count": 0, "example": answer.reason, "by": Counter()}
                )
                entry["count"] += 1
                entry["by"][variant.value] += 1
    by_reason = sorted(reasons.values(), key=lambda e: (-e["count"], e["reason"]))
    for entry in by_reason:
        entry["by"] = dict(entry["by"])
    return {
        "directions": {v: {k: c[k] for k in (x.value for x in Verdict)} for v, c in counts.items()},
        "declined_by_reason": by_reason,
    }
