"""``ckspace info``: what this ckspace knows, in one place: the archs with their facts, the rule
sets, the rules revisions, the config fields with their domains, and the environment it reads."""

from __future__ import annotations

import argparse
import json
from typing import TextIO

from ckspace.commands.common import add_target_arguments, target_from_args
from ckspace.core.errors import InvalidChoiceError

NAME = "info"
HELP = "list the archs (with their facts), rule sets, rules revisions, config fields and environment variables"
FORMATS = ("text", "json")


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--format", default="text", help="text or json (default: text)")
    add_target_arguments(parser)


def facts(target=None) -> dict:
    """Everything ``info`` reports, as plain data (``target``: the default one when None)."""
    from ckspace import __version__
    from ckspace.commands.common import ENVIRONMENT
    from ckspace.constraints.rulesets import get_rule_set, rule_set_names
    from ckspace.core.arch import arch_facts
    from ckspace.core.fields import GEMM_BOUNDS, GEMM_FIELDS
    from ckspace.core.revisions import default_rules_revision, rules_revision_names
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
        archs[name] = {"family": arch.family, "warp_size": arch.warp_size, "lds_kb": arch.lds_capacity_kb,
                       "dtypes": sorted(d.value for d in arch.warp_tiles)}
    from ckspace.core.target import resolve_target

    target = target if target is not None else resolve_target()
    return {"version": __version__, "target": target.record(), "archs": archs,
            "rule_sets": {name: get_rule_set(name).summary for name in rule_set_names()},
            "rules_revisions": list(rules_revision_names()), "default_rules_revision": default_rules_revision(),
            "fields": {spec.name: {"domain": domain(spec), "doc": spec.doc} for spec in GEMM_FIELDS},
            "environment": ENVIRONMENT}


def run(args: argparse.Namespace, out: TextIO) -> int:
    if args.format not in FORMATS:
        raise InvalidChoiceError("format", args.format, FORMATS)
    report = facts(target_from_args(args))
    if args.format == "json":
        out.write(json.dumps(report, indent=1) + "\n")
        return 0
    out.write(f"ckspace {report['version']}\ntarget: {report['target']['note']}\narchs:\n")
    for name, arch in report["archs"].items():
        out.write(f"  {name}: {arch['family']}, wave{arch['warp_size']}, LDS {arch['lds_kb']} KiB, "
                  f"dtypes {', '.join(arch['dtypes']) or 'none'}\n")
    out.write("rule sets:\n")
    out.writelines(f"  {name}: {summary}\n" for name, summary in report["rule_sets"].items())
    out.write(f"rules revisions: {', '.join(report['rules_revisions'])} "
              f"(default {report['default_rules_revision']})\nconfig fields:\n")
    out.writelines(f"  {name}: {f['domain']} ({f['doc']})\n" for name, f in report["fields"].items())
    out.write("environment:\n")
    out.writelines(f"  {name}: {meaning}\n" for name, meaning in report["environment"].items())
    return 0
