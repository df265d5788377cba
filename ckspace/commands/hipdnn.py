"""``ckspace hipdnn census``: before enabling hipDNN in PyTorch, which of a workload's
convolutions a ckspace plugin would serve, and why it declines the others, asked of the plugin
itself (:mod:`ckspace.census.survey`); with ``--hipdnn-rules FILE``, the hipDNN heuristic config that
routes the served ones to it (:mod:`ckspace.emit.hipdnn_rules`)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TextIO

from ckspace.commands.common import add_format_argument, data_set_help, one_of, problems_file, write_report
from ckspace.workloads.datasets import Kind
from ckspace.workloads.problem_keys import COLUMNS_HELP

NAME = "hipdnn"
HELP = "the hipDNN plugin: census asks it which of a workload's convolutions it serves, as PyTorch sends them"
ACTIONS = ("census",)
FORMATS = ("text", "json")
DIRECTIONS = ("forward", "bwd_data", "bwd_weight")
MEMORY_FORMATS = ("contiguous", "channels_last")
DEFAULT_DTYPE = "bf16"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("action", type=one_of("hipdnn action", ACTIONS), choices=ACTIONS, help="census")
    parser.add_argument(
        "plugin",
        type=Path,
        metavar="PLUGIN",
        help="the plugin ckspace build linked (build/<arch>/libckspace_hipdnn_<arch>.so), or a tree emitted "
        "--hipdnn-plugin, built or not: its plugin is linked without kernels for the census (seconds, no HIP "
        "compiler; the same answers, which the host decides)",
    )
    parser.add_argument(
        "--problems",
        required=True,
        type=problems_file,
        metavar="CSV",
        help=f"the workload, one row per layer: a problems CSV ({COLUMNS_HELP}; a 'layer' column names the rows), "
        + data_set_help(Kind.PROBLEMS),
    )
    parser.add_argument(
        "--variant",
        nargs="+",
        action="extend",
        metavar="V",
        help="the directions asked: forward, bwd_data, bwd_weight or all (default: all three, what one training "
        "step sends per layer; forward alone for inference)",
    )
    parser.add_argument(
        "--dtype",
        default=DEFAULT_DTYPE,
        help=f"the tensors' dtype: fp16, bf16 or fp32 (default: {DEFAULT_DTYPE}, what torch.autocast(dtype="
        "torch.bfloat16) sends; fp32 is PyTorch's own default)",
    )
    parser.add_argument(
        "--memory-format",
        type=one_of("memory format", MEMORY_FORMATS),
        choices=MEMORY_FORMATS,
        default=MEMORY_FORMATS[0],
        help="the layers' tensors: contiguous (PyTorch's default, NCHW) or channels_last (model and input "
        ".to(memory_format=torch.channels_last)) (default: contiguous)",
    )
    parser.add_argument(
        "--arch",
        help="the device the stand-in HIP runtime reports to a plugin linked with HIP (default: the arch in the "
        "plugin's engine names); no GPU is used",
    )
    parser.add_argument(
        "--hipdnn-rules",
        type=Path,
        metavar="FILE",
        help="also write hipDNN's heuristic config (HIPDNN_HEUR_CONFIG_PATH=FILE) preferring the plugin's engine "
        "for every graph it serves",
    )
    add_format_argument(parser, FORMATS)


def _variants(values: list[str] | None):
    from ckspace.core.vocab import Variant

    if not values:
        return tuple(Variant)
    if any(v.strip().lower() == "all" for v in values):
        return tuple(Variant)
    chosen = {Variant.parse(v) for v in values}
    return tuple(v for v in Variant if v in chosen)


def run(args: argparse.Namespace, out: TextIO) -> int:
    from ckspace.census.survey import read_layers, run_census
    from ckspace.core.vocab import Dtype, parse_arch
    from ckspace.emit.pytorch_graphs import MemoryFormat

    variants = _variants(args.variant)
    dtype = Dtype.parse(args.dtype)
    arch = parse_arch(args.arch) if args.arch is not None else None
    layers = read_layers(args.problems)
    plugin, built = _plugin(args.plugin)
    census = run_census(plugin, layers, variants, dtype, MemoryFormat(args.memory_format), arch)
    report = _report(args, census, variants, dtype, built)
    if args.hipdnn_rules is not None:
        report["hipdnn_rules"] = _write_rules(census, args.hipdnn_rules)
    write_report(out, args.format, report, _text, indent=1)
    return 0


def _plugin(path: Path) -> tuple[Path, str | None]:
    """The plugin library to survey, and what it was built from (None: given as a file). A tree lets
    the census run without compiling a single kernel, so the plugin is linked without them."""
    from ckspace.core.errors import CkspaceError

    if path.is_dir():
        from ckspace.census.census_plugin import census_plugin

        return census_plugin(path), f"{path}'s plugin, linked without kernels for the census"
    if path.is_file():
        return path, None
    raise CkspaceError(
        f"plugin {str(path)!r} is neither a plugin file (ckspace build links "
        "build/<arch>/libckspace_hipdnn_<arch>.so) nor a tree emitted --hipdnn-plugin"
    )


def _report(args: argparse.Namespace, census, variants, dtype, built: str | None) -> dict:
    """The census as one JSON-friendly record, the single source both formats render from."""
    from ckspace.census.survey import totals
    from ckspace.workloads.datasets import argument_text

    return {
        "plugin": census.plugin,
        "census_only_build_of": str(args.plugin) if built else None,
        "engines": {name: str(engine) for engine, name in census.engines.items()},
        "device": {"arch": census.arch, "stand_in_hip_runtime": census.standin},
        "problems": argument_text(args.problems),
        "dtype": dtype.value,
        "memory_format": census.memory_format.value,
        "variants": [v.value for v in variants],
        "layers": [
            {
                "line": item.line,
                "layer": item.name,
                "problem": item.layer.problem.text(),
                "bias": item.layer.bias,
                "graphs": {
                    v.value: {"verdict": a.verdict.value, "engines": list(a.engines), "reason": a.reason}
                    for v, a in answers.items()
                },
            }
            for item, answers in zip(census.layers, census.answers, strict=True)
        ],
        **totals(census),
    }


def _write_rules(census, path: Path) -> dict:
    """hipDNN's heuristic rules from the graphs the plugin served, so hipDNN prefers the engine that
    answered each; returns the report's record of the file written."""
    from ckspace.census.survey import Verdict
    from ckspace.emit.hipdnn_rules import heuristic_config, render
    from ckspace.environment.files import write_atomic

    served = [
        (v, a.engines[0], census.documents[i][v])
        for i, answers in enumerate(census.answers)
        for v, a in answers.items()
        if a.verdict is Verdict.SERVED
    ]
    config = heuristic_config(served)
    write_atomic(path, render(config), "--hipdnn-rules")
    return {"file": str(path), "rules": len(config["engine_overrides"])}


def _text(report: dict) -> str:
    lines = [
        f"plugin {report['plugin']}"
        + (f" ({report['census_only_build_of']}'s, linked without kernels)" if report["census_only_build_of"] else "")
        + f": engines {', '.join(report['engines'])}",
        (
            f"device {report['device']['arch']} (a stand-in HIP runtime: no GPU used)"
            if report["device"]["stand_in_hip_runtime"]
            else "device: the plugin's own (it does not link the HIP runtime)"
        ),
        f"workload {report['problems']}: {len(report['layers'])} layers, {report['dtype']}, {report['memory_format']}, "
        f"as PyTorch sends them: {' '.join(report['variants'])}",
        "",
    ]
    for layer in report["layers"]:
        lines.append(f"{layer['layer']}  {layer['problem']}" + ("  bias" if layer["bias"] else ""))
        for variant, answer in layer["graphs"].items():
            said = (
                f"served by {', '.join(answer['engines'])}"
                if answer["verdict"] == "served"
                else (f"{answer['verdict']}: {answer['reason']}")
            )
            lines.append(f"  {variant:<11} {said}")
    lines.append("")
    lines.append("totals (layers):")
    for variant, counts in report["directions"].items():
        lines.append(
            f"  {variant:<11} {counts['served']} served, {counts['declined']} declined"
            + (f", {counts['crashed']} crashed the plugin" if counts["crashed"] else "")
        )
    if report["declined_by_reason"]:
        lines.append("declined, by reason:")
        for entry in report["declined_by_reason"]:
            by = ", ".join(f"{v} {n}" for v, n in entry["by"].items())
            lines.append(f"  {entry['count']:>4}  {entry['reason']}  ({by})")
    if "hipdnn_rules" in report:
        rules = report["hipdnn_rules"]
        lines.append(f"wrote {rules['file']}: {rules['rules']} rules (export HIPDNN_HEUR_CONFIG_PATH={rules['file']})")
    return "\n".join(lines) + "\n"
