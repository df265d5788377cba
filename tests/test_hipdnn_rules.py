"""``hipdnn census --hipdnn-rules FILE``: hipDNN's heuristic config (``HIPDNN_HEUR_CONFIG_PATH``).

The independent statement is a reader written here from hipDNN's own statement of the format
(ROCm/rocm-libraries: the keys and ops of ``hipdnn_data_sdk/detail/AutotuneConfigNames.hpp``, the
parsing and matching of ``backend/src/heuristics/config/EngineOverrideConfig.hpp``, the inputs each
convolution offers in ``ConfigBuiltIn.cpp``): it parses the file as that code does (refusing what
it would refuse), and matches a serialized graph's convolution node against the rules in file order,
-1 matching any value, the engine name resolved by its FNV-1a hash. Each graph the plugin served
must select the engine that served it; no rule may select an engine for a graph it did not serve.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ckspace.core.vocab import Dtype, Variant
from ckspace.emit import hipdnn_rules
from ckspace.emit.pytorch_graphs import Layer, MemoryFormat, graph
from ckspace.workloads.problem import ConvProblem

CONV_INPUTS = {
    "conv_fprop": ("ConvolutionFwdAttributes", ("x_tensor_uid", "w_tensor_uid")),
    "conv_dgrad": ("ConvolutionBwdAttributes", ("dy_tensor_uid", "w_tensor_uid")),
    "conv_wgrad": ("ConvolutionWrwAttributes", ("x_tensor_uid", "dy_tensor_uid")),
}
WILDCARD = -1


def fnv1a(name: str) -> int:
    h = 14695981039346656037
    for byte in name.encode():
        h = ((h ^ byte) * 1099511628211) % 2**64
    return h - 2**64 if h >= 2**63 else h


def parse(text: str) -> list[dict]:
    """The rules as EngineOverrideConfig::parseJson reads them: ``engine_overrides`` required; per
    entry ``op`` and ``engine_name`` strings, optional ``criteria`` object of integers, ``tensors``
    a list of objects with an integer list ``dim``, optional ``stride`` and, from version 2,
    ``tensor_id``. Anything else it reads refuses the file (ValueError here)."""
    document = json.loads(text)
    version = document.get("version", 1)
    if not isinstance(version, int):
        raise ValueError("version is not an integer")
    rules = []
    for entry in document["engine_overrides"]:
        if not isinstance(entry["op"], str) or not isinstance(entry["engine_name"], str):
            raise ValueError("op and engine_name are strings")
        criteria = entry.get("criteria", {})
        if not isinstance(criteria, dict) or not all(isinstance(v, int) for v in criteria.values()):
            raise ValueError("criteria must be an object of integers")
        tensors = []
        for t in entry["tensors"]:
            dim, stride = t["dim"], t.get("stride", [])
            if not all(isinstance(v, int) for v in [*dim, *stride]):
                raise ValueError("dim and stride are integer lists")
            tensors.append({"dim": dim, "stride": stride, "tensor_id": t.get("tensor_id")})
        rules.append(
            {
                "op": entry["op"],
                "engine": fnv1a(entry["engine_name"]),
                "criteria": dict(sorted(criteria.items())),
                "tensors": tensors,
                "named": version >= 2,
            }
        )
    return rules


def pattern_matches(pattern: dict, dims: list[int], strides: list[int]) -> bool:
    if len(pattern["dim"]) != len(dims):
        return False
    if any(p not in (WILDCARD, d) for p, d in zip(pattern["dim"], dims, strict=True)):
        return False
    if pattern["stride"]:
        if len(pattern["stride"]) != len(strides):
            return False
        if any(p not in (WILDCARD, s) for p, s in zip(pattern["stride"], strides, strict=True)):
            return False
    return True


def preferred(rules: list[dict], document: dict) -> int | None:
    """The engine id SelectionHeuristic::Config puts first for ``document``, or None (it declines)."""
    by_uid = {t["uid"]: t for t in document["tensors"]}
    for node in document["nodes"]:
        op = next((o for o, (kind, _) in CONV_INPUTS.items() if kind == node["attributes_type"]), None)
        if op is None:
            continue
        inputs = [by_uid[node["attributes"][f]] for f in CONV_INPUTS[op][1]]
        for rule in rules:
            if rule["op"] != op or rule["criteria"] or len(rule["tensors"]) != len(inputs) or rule["named"]:
                continue
            if all(pattern_matches(p, t["dims"], t["strides"]) for p, t in zip(rule["tensors"], inputs, strict=True)):
                return rule["engine"]
    return None


ENGINES = {
    Variant.FORWARD: "CKSPACE_GFX942_CONV_FWD",
    Variant.BWD_DATA: "CKSPACE_GFX942_CONV_BWD_DATA",
    Variant.BWD_WEIGHT: "CKSPACE_GFX942_CONV_BWD_WEIGHT",
}


@st.composite
def layers(draw) -> Layer:
    g = draw(st.sampled_from([1, 2]))
    text = (
        f"N={draw(st.integers(1, 4))},G={g},C={g * draw(st.integers(1, 8))},K={g * draw(st.integers(1, 8))},"
        f"Hi={draw(st.integers(3, 12))},Wi={draw(st.integers(3, 12))},Y=3,X={draw(st.sampled_from([1, 3]))},"
        f"stride={draw(st.integers(1, 2))},pad={draw(st.integers(0, 1))}"
    )
    return Layer(ConvProblem.parse(text), draw(st.booleans()))


@settings(max_examples=60, deadline=None)
@given(
    served=st.lists(
        st.tuples(layers(), st.sampled_from(list(Variant)), st.sampled_from(list(MemoryFormat))), min_size=1
    ),
    others=st.lists(st.tuples(layers(), st.sampled_from(list(Variant)), st.sampled_from(list(MemoryFormat)))),
)
def test_issue_37_item_4_each_served_graph_selects_its_engine_and_nothing_else_is_routed(served, others) -> None:
    documents = [(v, graph(layer, v, Dtype.BF16, fmt)) for layer, v, fmt in served]
    config = hipdnn_rules.heuristic_config((v, ENGINES[v], d) for v, d in documents)
    text = hipdnn_rules.render(config).decode()
    assert json.loads(text) == config  # the bytes are the config
    rules = parse(text)
    for variant, document in documents:
        assert preferred(rules, document) == fnv1a(ENGINES[variant])
    served_keys = {json.dumps(hipdnn_rules.rule(v, "", d)["tensors"]) + v.value for v, d in documents}
    for layer, variant, fmt in others:
        document = graph(layer, variant, Dtype.BF16, fmt)
        key = json.dumps(hipdnn_rules.rule(variant, "", document)["tensors"]) + variant.value
        expected = fnv1a(ENGINES[variant]) if key in served_keys else None
        assert preferred(rules, document) == expected


def test_issue_37_item_4_one_rule_per_distinct_convolution_in_first_seen_order() -> None:
    a = Layer(ConvProblem.parse("N=2,C=8,K=16,Hi=9,Wi=9,Y=3,X=3,pad=1"))
    b = Layer(ConvProblem.parse("N=2,C=16,K=16,Hi=9,Wi=9,Y=1,X=1"), bias=True)
    entries = [(v, ENGINES[v], graph(layer, v, Dtype.FP16)) for layer in (a, b, a) for v in Variant]
    config = hipdnn_rules.heuristic_config(entries)
    assert config["version"] == 1
    assert [r["op"] for r in config["engine_overrides"]] == ["conv_fprop", "conv_dgrad", "conv_wgrad"] * 2
    first = config["engine_overrides"][0]["tensors"]
    assert first == [{"dim": [2, 8, 9, 9], "stride": [648, 81, 9, 1]}, {"dim": [16, 8, 3, 3], "stride": [72, 9, 3, 1]}]


@pytest.mark.parametrize(
    "text",
    [
        '{"version": 1}',
        '{"engine_overrides": [{"op": "conv_fprop", "tensors": []}]}',
        '{"engine_overrides": [{"op": "conv_fprop", "engine_name": "E", "tensors": [{"dim": ["a"]}]}]}',
    ],
)
def test_issue_37_item_4_the_test_reader_refuses_what_hipdnn_refuses(text: str) -> None:
    with pytest.raises((KeyError, ValueError)):
        parse(text)


@pytest.mark.slow
def test_issue_37_item_4_the_census_writes_the_rules_of_what_it_served(tmp_path: Path, capsys) -> None:
    """Through the command, over a census-only plugin: the file names the plugin's engines, and each
    served graph of the report selects the engine that served it, each declined one none."""
    from ckspace.census.survey import read_layers
    from ckspace.cli import main
    from ckspace.workloads.datasets import DATASETS

    tree = tmp_path / "tree"
    argv = ["emit", "--arch", "gfx950", "--rule-set", "default", "--variant", "all", "--ndim", "2", "--dtype", "bf16"]
    assert main([*argv, "--hipdnn-plugin", "--out", str(tree)]) == 0
    capsys.readouterr()
    rules_file = tmp_path / "rules.json"
    command = ["hipdnn", "census", str(tree), "--problems", "torchvision-resnet50", "--format", "json"]
    assert main([*command, "--hipdnn-rules", str(rules_file)]) == 0
    report = json.loads(capsys.readouterr().out)
    rules = parse(rules_file.read_text())
    assert report["hipdnn_rules"]["rules"] == len(rules) > 0
    layers = read_layers(DATASETS["torchvision-resnet50"].path)
    for item, row in zip(layers, report["layers"], strict=True):
        for variant in Variant:
            answer = row["graphs"][variant.value]
            chosen = preferred(rules, graph(item.layer, variant, Dtype.BF16))
            if answer["verdict"] == "served":
                assert chosen == int(report["engines"][answer["engines"][0]])
            else:
                assert chosen is None
