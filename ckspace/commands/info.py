"""``ckspace info``: what this ckspace knows, in one place: what this machine offers before a build
(the HIP compiler for each arch, the CK headers, the GPUs, the shipped models:
:mod:`ckspace.commands.machine`), the archs with their facts, the rule sets, the rules revisions,
the config fields with their domains, the shipped selection models with their training domains (a
kernel outside one is extrapolated), the shipped data sets (their names work where a command takes
a measurement or problems CSV), and the environment it reads. ``ckspace info DIR`` tells instead what
an emitted tree holds (:func:`tree_facts`), per arch for a library of several: a fleet's library is
read by what each arch gets from it, which its manifest records kernel by kernel."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TextIO

from ckspace.commands.common import add_format_argument, add_target_arguments, target_from_args, write_report
from ckspace.core.errors import CkspaceError

NAME = "info"
HELP = (
    "tell what this machine has (HIP compiler per arch, CK headers, GPUs, shipped models, flatc) and list the archs "
    "(with their facts), rule sets, rules revisions, config fields, shipped models (with their training domains), "
    "shipped data sets and environment variables; or, given an emitted tree, what it holds per arch"
)
FORMATS = ("text", "json")


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "tree",
        nargs="?",
        type=Path,
        metavar="DIR",
        help="a tree ckspace emit wrote (built or not): what it holds instead, per arch for a library of several: "
        "its kernels per cell, what ranks each cell, the kernels several archs share, the libraries built",
    )
    add_format_argument(parser, FORMATS)
    add_target_arguments(parser)


def facts(target=None, ck_root: str | None = None) -> dict:
    """Everything ``info`` reports, as plain data (``target``: the default one when None; ``ck_root``:
    the CK headers this machine's part reports, None: where every command looks)."""
    from ckspace import __version__
    from ckspace.commands.common import ENVIRONMENT
    from ckspace.commands.machine import probe_machine
    from ckspace.constraints.rulesets import get_rule_set, rule_set_names
    from ckspace.core.arch import arch_facts
    from ckspace.core.fields import GEMM_BOUNDS, GEMM_FIELDS
    from ckspace.core.revisions import default_rules_revision, rules_revision, rules_revision_names
    from ckspace.core.vocab import arch_names

    def domain(spec) -> str:
        if spec.kind is bool:
            return "true, false"
        if spec.kind is int:
            return "{} to {}".format(*GEMM_BOUNDS[spec.name])
        return ", ".join(m.value for m in spec.kind)

    archs = {}
    for name in arch_names():
        arch = arch_facts(name)
        archs[name] = {
            "family": arch.family,
            "warp_size": arch.warp_size,
            "lds_kb": arch.lds_capacity_kb,
            "dtypes": sorted(d.value for d in arch.warp_tiles),
        }
    machine = probe_machine(ck_root)
    return {
        "version": __version__,
        "target": _target_record(target),
        "machine": machine.model_dump(mode="json"),
        "archs": archs,
        "rule_sets": {name: get_rule_set(name).summary for name in rule_set_names()},
        "rules_revisions": list(rules_revision_names()),
        "default_rules_revision": default_rules_revision(),
        "unmerged_rules_revisions": [n for n in rules_revision_names() if not rules_revision(n).merged],
        "fields": {spec.name: {"domain": domain(spec), "doc": spec.doc} for spec in GEMM_FIELDS},
        "models": _models(),
        "datasets": _datasets(),
        "environment": ENVIRONMENT,
    }


def _target_record(target) -> dict:
    """The target's JSON field; the default target's CK headers, when ``CK_ROOT`` names none, are
    reported rather than refused (every other command refuses them): ``info`` is where one looks to
    find out why."""
    from ckspace.environment.target import resolve_target

    if target is not None:
        return target.record()
    try:
        return resolve_target().record()
    except CkspaceError as exc:
        return {
            "ck": None,
            "ck_root": None,
            "rules_only": False,
            "known_wrong_excluded": True,
            "note": f"none: {exc} (every command that answers for a target refuses to run)",
        }


def _models() -> dict[str, dict]:
    """The shipped models: what each is, how it did in cross-validation, and its training domain."""
    from ckspace.select.store import shipped_models

    out = {}
    for cell, card in shipped_models().items():
        cv = card.cross_validation.get("model", {})
        out[cell] = {
            "objective": card.objective,
            "kernels": len(card.kernels),
            "problems": card.problems,
            "cv_mean": cv.get("mean"),
            "cv_p10": cv.get("p10"),
            "data": sorted(card.data),
            "domain": card.domain.model_dump(mode="json") if card.domain else None,
        }
    return out


def _datasets() -> dict[str, dict]:
    """The shipped data sets: what each is, its rows, source and sha256, and where it is installed."""
    from ckspace.workloads.datasets import DATASETS

    return {
        name: {
            "kind": d.kind.value,
            "rows": d.rows,
            "what": d.what,
            "source": d.source,
            "sha256": d.sha256,
            "path": str(d.path),
        }
        for name, d in DATASETS.items()
    }


def tree_facts(tree: Path) -> dict:
    """What an emitted tree holds, as plain data: its archs, and for each its kernels per cell
    (``variant ndim dtype``), what ranks each of its dispatcher's cells (a model, by the sha256 of its
    ranker file, or the analytical model), whether ckspace ships a model for the cell and whether
    that model is the one ranking it (``emit --model`` gives another); the kernels
    several archs share (each compiled for all of them); the libraries built from it."""
    from collections import Counter

    from ckspace.emit.manifest import built_libraries, read_manifest
    from ckspace.select.store import shipped_models

    manifest = read_manifest(tree)
    shipped = shipped_models()
    fallback_only = set(manifest.dispatcher.fallback_only) if manifest.dispatcher is not None else set()
    models = manifest.arch_models()
    archs = {}
    for arch, kernels in manifest.arch_kernels().items():
        cells = Counter(_cell_of(k.config) for k in kernels)
        archs[arch] = {
            "kernels": len(kernels),
            "fallback_only": sum(k.name in fallback_only for k in kernels),
            "cells": dict(sorted(cells.items())),
            "models": {
                cell: {
                    "ranked_by": source,
                    "shipped_model": f"{arch} {cell}" in shipped,
                    "is_the_shipped_model": source == _shipped_source(shipped.get(f"{arch} {cell}")),
                }
                for cell, source in models[arch].items()
            },
        }
    return {
        "tree": str(tree),
        "ckspace_version": manifest.ckspace_version,
        "archs": archs,
        "library": manifest.label,
        "kernels": len(manifest.kernels),
        "target": manifest.request.get("target", {}).get("note"),
        "shared": {k.name: list(k.archs or ()) for k in manifest.shared_kernels()},
        "dispatcher": manifest.dispatcher is not None,
        "hipdnn_plugin": manifest.hipdnn.plugin if manifest.hipdnn is not None else None,
        "built": [str(p.relative_to(tree)) for p in built_libraries(tree)],
    }


def _shipped_source(card) -> str | None:
    """How a manifest names the shipped model of a cell (``dispatcher.models``), None without one."""
    from ckspace.emit.manifest import ranked_by_model
    from ckspace.select.store import RANKER_FILE

    return ranked_by_model(card.files[RANKER_FILE]) if card is not None else None


def _cell_of(config: dict) -> str:
    """A kernel's cell as its manifest record's config says it: ``variant ndimD dtype``."""
    return f"{config['variant']} {config['ndim']}D {config['dtype']}"


def _tree_text(report: dict) -> str:
    several = len(report["archs"]) > 1
    lines = [
        f"{report['tree']}: {report['kernels']} kernels for {' '.join(report['archs'])}"
        + (f", one library ({report['library']})" if several else "")
        + f", emitted by ckspace {report['ckspace_version']}",
        f"target: {report['target']}",
    ]
    for arch, held in report["archs"].items():
        fallbacks = f", {held['fallback_only']} of them vector-width fallbacks only" if held["fallback_only"] else ""
        lines.append(f"{arch}: {held['kernels']} kernels{fallbacks}")
        lines += [f"  {cell}: {count}" for cell, count in held["cells"].items()]
        for cell, model in held["models"].items():
            if model["is_the_shipped_model"]:
                shipped = "the model ckspace ships for it"
            elif model["shipped_model"]:
                shipped = "ckspace ships another model for it"
            else:
                shipped = "ckspace ships no model for it"
            lines.append(f"  {cell} ranked by {_ranker(model['ranked_by'])} ({shipped})")
        if not held["models"]:
            lines.append("  no dispatcher (emitted without --with-selector)")
    if several:
        if report["shared"]:
            lines.append(f"{len(report['shared'])} kernels serve several archs (emitted once, compiled for each):")
            lines += [f"  {name}: {' '.join(archs)}" for name, archs in report["shared"].items()]
        else:
            lines.append("no kernel serves several archs")
    if report["hipdnn_plugin"]:
        lines.append(f"hipDNN plugin: {report['hipdnn_plugin']}")
    lines.append(
        "built: " + (", ".join(report["built"]) if report["built"] else f"nothing yet (ckspace build {report['tree']})")
    )
    return "".join(f"{line}\n" for line in lines)


def _ranker(source: str) -> str:
    """A dispatcher cell's ranking in words: a model by the first 12 digits of its ranker's sha256."""
    from ckspace.emit.manifest import RANKED_BY_MODEL

    if source.startswith(RANKED_BY_MODEL):
        return f"a trained model (ranker.txt sha256 {source.removeprefix(RANKED_BY_MODEL)[:12]})"
    return "the analytical performance model"


def run(args: argparse.Namespace, out: TextIO) -> int:
    if args.tree is not None:
        if args.ck_root or args.rules_only:
            raise CkspaceError(
                f"info {args.tree} reports the target the tree was emitted for: not with --ck-root or --rules-only"
            )
        write_report(out, args.format, tree_facts(args.tree), _tree_text, indent=1)
        return 0
    # the default target is resolved by facts, which reports a CK_ROOT without headers; an explicit
    # --ck-root without them is bad input
    target = target_from_args(args) if args.ck_root or args.rules_only else None
    write_report(out, args.format, facts(target, args.ck_root), _text, indent=1)
    return 0


def _text(report: dict) -> str:
    lines = [f"ckspace {report['version']}", f"target: {report['target']['note']}", *_machine_lines(report["machine"])]
    lines.append("archs:")
    lines += [
        f"  {name}: {arch['family']}, wave{arch['warp_size']}, LDS {arch['lds_kb']} KiB, "
        f"dtypes {', '.join(arch['dtypes']) or 'none'}"
        for name, arch in report["archs"].items()
    ]
    lines.append("rule sets:")
    lines += [f"  {name}: {summary}" for name, summary in report["rule_sets"].items()]
    lines += [
        "rules revisions: "
        + ", ".join(
            f"{name} (unmerged upstream, opt-in)" if name in report["unmerged_rules_revisions"] else name
            for name in report["rules_revisions"]
        )
        + f" (default {report['default_rules_revision']})",
        "config fields:",
    ]
    lines += [f"  {name}: {f['domain']} ({f['doc']})" for name, f in report["fields"].items()]
    lines.append(
        "models (every other cell ranks by the analytical performance model; a kernel or problem outside a "
        "model's domain is extrapolated):"
    )
    for cell, model in report["models"].items():
        lines += _model_lines(cell, model)
    lines.append(
        "data sets (a name works where a command takes a CSV: train/evaluate --data for measurements, "
        "plan/bench --problems for problems; an existing file of the same name is read instead):"
    )
    for name, data in report["datasets"].items():
        lines += [f"  {name}: {data['kind']}, {data['rows']:,} rows: {data['what']}", f"    source: {data['source']}"]
    lines.append("environment:")
    lines += [f"  {name}: {meaning}" for name, meaning in report["environment"].items()]
    return "".join(f"{line}\n" for line in lines)


def _model_lines(cell: str, model: dict) -> list[str]:
    """A shipped model: what it is, how it did, and its training domain."""
    lines = [
        f"  {cell}: {model['objective']} on {model['problems']} problems x {model['kernels']} kernels "
        f"({', '.join(model['data'])}), cross-validated mean {model['cv_mean']:.2f} %, "
        f"P10 {model['cv_p10']:.2f} %"
    ]
    domain = model["domain"]
    if domain is None:
        return [*lines, "    no training domain recorded: retrain it"]
    seen = [f"{name} {'/'.join(str(v) for v in values)}" for name, values in domain["categorical"].items()]
    ranges = [f"{name} {low}..{high}" for name, (low, high) in domain["numeric"].items()]
    sizes = [f"{name} {low}..{high}" for name, (low, high) in domain["problems"].items()]
    return [*lines, f"    kernels: {'; '.join(seen + ranges)}", f"    problems: {'; '.join(sizes)}"]


def _machine_lines(machine: dict) -> list[str]:
    """This machine's part: found or, in its place, why not."""
    lines = ["this machine:"]
    for c in machine["compilers"]:
        found = f"{c['path']} ({c['kind']}: {c['version'] or 'no --version'})" if c["reason"] is None else None
        lines.append(f"  HIP compiler for {c['arch']}: {found or 'none (' + c['reason'] + ')'}")
    ck = machine["ck"]
    if ck["reason"] is None:
        verified = "" if ck["verified"] else " (unverified)"
        lines.append(f"  CK headers: {ck['include_dir']}: {ck['label']}{verified}, fingerprint {ck['fingerprint']}")
    else:
        lines.append(f"  CK headers: none ({ck['reason']})")
    gpus = machine["gpus"]
    shown = "; ".join(
        f"{d['index']}: {d['name']}" + (f", {d['clock_mhz']:g} MHz" if d["clock_mhz"] else "") for d in gpus["devices"]
    )
    lines.append(f"  GPUs: {shown or 'none visible (' + (gpus['reason'] or 'the HIP runtime lists none') + ')'}")
    models = machine["models"]
    cells = ", ".join(f"{m['arch']} {m['variant']} {m['dtype']}" for m in models["models"])
    lines.append(f"  shipped models: {cells or 'none (' + (models['reason'] or 'no model cards') + ')'}")
    fb = machine["flatbuffers"]
    found = f"flatc {fb['version']} ({fb['flatc']}), headers in {fb['include_dir']}" if fb["reason"] is None else None
    lines.append(f"  hipDNN plugin builds: {found or 'no (' + fb['reason'] + ')'}")
    return lines
