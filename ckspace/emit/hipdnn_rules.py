"""A hipDNN heuristic config that routes a workload's convolutions to ckspace's engines.

hipDNN picks an engine for a graph by running its heuristic policies in turn; the built-in
``SelectionHeuristic::Config`` (first in the default order) reads the JSON rule file named by
``HIPDNN_HEUR_CONFIG_PATH`` and, for the first rule matching a convolution node of the graph, puts
that rule's engine first among the engines that applied. The format, as hipDNN states it:

* hipDNN's environment page (ROCm/rocm-libraries, ``projects/hipdnn/docs/``, page "Environment",
  section ``HIPDNN_HEUR_CONFIG_PATH``; written there as a page name, since a file of another
  repository is cited by its folder here): ``HIPDNN_HEUR_CONFIG_PATH`` maps
  "convolution op + tensor-shape patterns to a preferred engine name"; a missing or unreadable
  file, no matching rule, or a matched engine that is not among the candidates makes the policy
  decline, and the next policy (static ordering, ``HIPDNN_HEUR_FALLBACK_ENGINE_ORDER``) decides;
* ``projects/hipdnn/data_sdk/include/hipdnn_data_sdk/detail/AutotuneConfigNames.hpp``: the keys
  (``version``, ``engine_overrides``, ``op``, ``engine_name``, ``tensors``, ``dim``, ``stride``,
  ``criteria``, ``tensor_id``), the ops ``conv_fprop``, ``conv_dgrad``, ``conv_wgrad``, and the
  versions (1: tensors matched by position; 2: by ``tensor_id``);
* ``projects/hipdnn/backend/src/heuristics/config/EngineOverrideConfig.hpp`` and
  ``ConfigBuiltIn.cpp``: rules are tried in file order; a rule matches an op when its criteria
  equal the node's (convolutions have none) and its tensors match the node's inputs one by one,
  ``dim`` and, when given, ``stride`` equal slot by slot (-1 matches any value); the inputs of a
  convolution are, in this order, (x, w) for ``conv_fprop``, (dy, w) for ``conv_dgrad`` and
  (x, dy) for ``conv_wgrad``; the engine name resolves to its id by the same FNV-1a hash engines
  are identified by.

ckspace writes version 1 (positional tensors), which every hipDNN that reads the file reads the
same way, one rule per distinct (op, tensors) the plugin served, with the dims and strides of the
graph PyTorch sends (:mod:`ckspace.emit.pytorch_graphs`), so a rule matches exactly the graphs the
census asked about and nothing the plugin was not shown.
"""

from __future__ import annotations

import json
from collections.abc import Iterable

from ckspace.core.vocab import Variant

FORMAT_SOURCE = (
    "ROCm/rocm-libraries: projects/hipdnn/docs/ (page Environment, HIPDNN_HEUR_CONFIG_PATH), "
    "projects/hipdnn/backend/src/heuristics/config/EngineOverrideConfig.hpp"
)
VERSION = 1
"""The rule file's version: tensors matched by position."""
OPS = {Variant.FORWARD: "conv_fprop", Variant.BWD_DATA: "conv_dgrad", Variant.BWD_WEIGHT: "conv_wgrad"}
"""hipDNN's op name of each direction."""
INPUTS = {
    Variant.FORWARD: ("x_tensor_uid", "w_tensor_uid"),
    Variant.BWD_DATA: ("dy_tensor_uid", "w_tensor_uid"),
    Variant.BWD_WEIGHT: ("x_tensor_uid", "dy_tensor_uid"),
}
"""The convolution node's input tensors a rule's ``tensors`` match, in order."""
_ATTRIBUTES = {"ConvolutionFwdAttributes", "ConvolutionBwdAttributes", "ConvolutionWrwAttributes"}


def rule(variant: Variant, engine: str, document: dict) -> dict:
    """The rule preferring ``engine`` for the convolution of ``document`` (a Graph as
    :func:`ckspace.emit.pytorch_graphs.graph` gives it)."""
    node = next(n for n in document["nodes"] if n["attributes_type"] in _ATTRIBUTES)
    by_uid = {t["uid"]: t for t in document["tensors"]}
    tensors = [by_uid[node["attributes"][field]] for field in INPUTS[variant]]
    return {
        "op": OPS[variant],
        "engine_name": engine,
        "tensors": [{"dim": list(t["dims"]), "stride": list(t["strides"])} for t in tensors],
    }


def heuristic_config(served: Iterable[tuple[Variant, str, dict]]) -> dict:
    """The rule file for graphs a plugin served, each ``(direction, engine name, graph)``: one
    rule per distinct (op, tensors), in first-seen order."""
    rules: dict[str, dict] = {}
    for variant, engine, document in served:
        made = rule(variant, engine, document)
        key = json.dumps({"op": made["op"], "tensors": made["tensors"]})
        rules.setdefault(key, made)
    return {"version": VERSION, "engine_overrides": list(rules.values())}


def render(config: dict) -> bytes:
    """The file's bytes: JSON, one rule a line (a diff shows the rules that changed)."""
    rules = ",\n".join(f"  {json.dumps(r)}" for r in config["engine_overrides"])
    head = {k: v for k, v in config.items() if k != "engine_overrides"}
    opening = json.dumps(head)[:-1] + (", " if head else "")
    return f'{opening}"engine_overrides": [\n{rules}\n]}}\n'.encode()
