"""Arguments shared by every command that works on a part of the space, and the strict parser
every command's arguments go through."""

from __future__ import annotations

import argparse

from ckspace.constraints.rulesets import get_rule_set, rule_set_names
from ckspace.core.cells import Request
from ckspace.core.errors import CkspaceError
from ckspace.core.revisions import default_rules_revision, rules_revision_names
from ckspace.core.vocab import Dtype, Variant, arch_names

ENVIRONMENT = {
    "CKSPACE_CACHE_DIR": "cache directory (cells, compiled objects); default $XDG_CACHE_HOME/ckspace or "
                         "~/.cache/ckspace; --cache-dir overrides it",
    "CKSPACE_BUILD_CACHE": "object cache of ckspace build (default: objects/ in the cache directory)",
    "CKSPACE_CXX": "HIP compiler or wrapper for ckspace build (default: amdclang++, hipcc, clang++ of ROCm)",
    "CKSPACE_DEVICE_LIBS": "ROCm device-library directory passed to the compiler",
    "CKSPACE_HIP_FLAGS": "extra compiler flags for ckspace build (shell words)",
    "CK_ROOT": "CK tree or include directory (default: ROCm, then the amd-aiter wheel)",
    "CC": "host C compiler of the dispatcher's host part and the compiled selector trees",
    "CKSPACE_CLANG": "read as CKSPACE_CXX when that is unset (what older toolchain scripts exported)",
    "RAY_ADDRESS": "the Ray cluster of --executor ray when --address is not given",
    "CKSPACE_TEST_READY_FD": "a file descriptor main writes 'ready' to once its signal handlers are in place "
                             "(for tests and supervisors that must not signal it during start-up)",
}
"""Every environment variable ckspace reads, with what it means (``ckspace --help`` lists them)."""


def help_epilog() -> str:
    """What ``ckspace --help`` shows below the commands: the valid values and the environment."""
    lines = [f"archs: {', '.join(arch_names())}",
             f"variants: {', '.join(v.value for v in Variant)}; ndims: 1, 2, 3; dtypes: {', '.join(d.value for d in Dtype)}",
             f"rule sets: {', '.join(rule_set_names())}",
             f"rules revisions: {', '.join(rules_revision_names())} (default {default_rules_revision()})",
             "formats: enumerate names|json|jsonl|csv; explain, lint, diff, select, evaluate text|json; "
             "rules markdown|json",
             "exit status: 0 done, 1 a valid question with a negative answer (not valid, no kernel, "
             "findings with --strict, kernels emit cannot write), 2 bad input, 3 explain: valid but not proposed "
             "by the rule set, 130/143 interrupted",
             "target: every command answers for the CK headers it finds (--ck-root, CK_ROOT, ROCm, the amd-aiter "
             "wheel) less the kernels upstream documents as wrong; --rules-only for the upstream rule space",
             "environment:"]
    lines += [f"  {name}: {meaning}" for name, meaning in ENVIRONMENT.items()]
    return "\n".join(lines)


class _StoreOnce(argparse.Action):
    """``store`` that refuses a second value: a repeated single-valued option is a mistake, not
    "the last one wins"."""

    def __call__(self, parser, namespace, values, option_string=None):
        seen = namespace.__dict__.setdefault("_given", set())
        if self.dest in seen:
            raise CkspaceError(f"{option_string or self.dest} is given twice; it takes one value "
                               "(options that take several say so in --help)")
        seen.add(self.dest)
        setattr(namespace, self.dest, values)


class StrictParser(argparse.ArgumentParser):
    """argparse, but errors are the one line the rest of the CLI prints, single-valued options may
    be given once, and no option takes an empty string (an empty value is not "unset")."""

    def __init__(self, *args, **kwargs) -> None:
        kwargs.setdefault("allow_abbrev", False)  # --arc is not --arch
        super().__init__(*args, **kwargs)
        self.register("action", None, _StoreOnce)
        self.register("action", "store", _StoreOnce)

    def error(self, message: str) -> None:  # type: ignore[override]
        raise CkspaceError(message)

    def _get_values(self, action, arg_strings):  # noqa: ANN001 - argparse's own hook
        if not isinstance(action, argparse._SubParsersAction):
            for value in arg_strings if isinstance(arg_strings, list) else [arg_strings]:
                if isinstance(value, str) and not value.strip():
                    name = "/".join(action.option_strings) or action.metavar or action.dest
                    raise CkspaceError(f"{name}: empty value {value!r}; give a value (see --help)")
        return super()._get_values(action, arg_strings)


def add_rules_revision_argument(parser: argparse.ArgumentParser) -> None:
    """--rules-revision: which upstream state of the validity rules (default: the newest)."""
    parser.add_argument("--rules-revision", metavar="R",
                        help=f"upstream state of the validity rules: {', '.join(rules_revision_names())} "
                             f"(default: {default_rules_revision()}, the newest; `ckspace rules` lists them)")


def add_space_arguments(parser: argparse.ArgumentParser, *, variant_required: bool = True) -> None:
    """--arch, --variant, --ndim, --dtype, --rule-set, --rules-revision, --no-cache, --where, --problem,
    --ck-root / --rules-only."""
    parser.add_argument("--arch", required=True, help=f"GPU target: {', '.join(arch_names())}")
    parser.add_argument("--variant", required=variant_required, nargs="+", action="extend",
                        help="forward, bwd_data, bwd_weight or all (one or more)")
    parser.add_argument("--ndim", nargs="+", action="extend", help="spatial dims (default: 1 2 3)")
    parser.add_argument("--dtype", nargs="+", action="extend", help="fp16, bf16, fp32 (default: all)")
    parser.add_argument("--rule-set", default="full",
                        help=f"one of {', '.join(rule_set_names())} (default: full)")
    add_rules_revision_argument(parser)
    parser.add_argument("--no-cache", action="store_true", help="recompute instead of reading the cache")
    parser.add_argument("--where", action="append", default=[], metavar="EXPR",
                        help="filter on config fields, e.g. 'tile_m * tile_n >= 8192 and pipeline in [compv3, "
                             "compv4]' (repeatable: all must hold)")
    parser.add_argument("--problem", metavar="TEXT",
                        help="only kernels that can run this convolution, e.g. "
                             "'N=1,G=1,C=64,K=128,Hi=56,Wi=56,Y=3,X=3,stride=1,pad=1'")
    add_target_arguments(parser)


def variants(values: list[str] | None) -> list[str] | None:
    """Expand ``all``; None stays None (all variants)."""
    if values is None:
        return None
    out: list[str] = []
    for value in values:
        out += [v.value for v in Variant] if value.strip().lower() == "all" else [value]
    return out


def request_from_args(args: argparse.Namespace) -> Request:
    """The upstream-style request the space arguments describe (validated)."""
    return Request.build(args.arch, get_rule_set(args.rule_set).name, variants(args.variant), args.ndim, args.dtype,
                         args.rules_revision)


def add_target_arguments(parser: argparse.ArgumentParser) -> None:
    """--ck-root PATH / --rules-only: the target the command answers for (default: the CK headers
    ckspace finds; see :mod:`ckspace.core.target`)."""
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--ck-root", metavar="PATH",
                       help="the CK headers of the target (default: CK_ROOT, ROCm, the amd-aiter wheel): only "
                            "kernels they can build, less the ones upstream documents as wrong")
    which.add_argument("--rules-only", action="store_true",
                       help="the upstream rule space, whatever CK is installed (known-wrong kernels included)")


def target_from_args(args: argparse.Namespace):
    """The :class:`~ckspace.core.target.Target` the options ask for: ``--rules-only``, ``--ck-root
    PATH``, else the CK headers found."""
    from ckspace.core.target import AUTO, resolve_target

    if getattr(args, "rules_only", False):
        return resolve_target(None)
    return resolve_target(getattr(args, "ck_root", None) or AUTO)


def space_from_args(args: argparse.Namespace, variant=None, ndim=None, dtype=None):
    """The :class:`~ckspace.Space` the arguments describe, for their target, with its filters and
    problem. ``variant``/``ndim``/``dtype`` override the arguments (explain takes them from a name).
    Without filters it lists from the cell cache without loading pydantic, numpy or the solver."""
    from ckspace.space.space import Space

    space = Space(args.arch, variant if variant is not None else variants(args.variant),
                  ndim if ndim is not None else args.ndim, dtype if dtype is not None else args.dtype,
                  args.rule_set, where=args.where, use_cache=not args.no_cache, rules_revision=args.rules_revision,
                  ck=target_from_args(args))
    return space.for_problem(args.problem) if args.problem else space
