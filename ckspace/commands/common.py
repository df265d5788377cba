"""Arguments shared by every command that works on a part of the space, and the one way a command
writes its ``--format``. The strict parser every command's arguments go through is
:mod:`ckspace.commands.parsing`."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

from ckspace.commands.parsing import StrictParser
from ckspace.constraints.rulesets import get_rule_set, rule_set_names
from ckspace.core.cells import Request
from ckspace.core.errors import InvalidChoiceError, InvalidInputError
from ckspace.core.revisions import default_rules_revision, rules_revision, rules_revision_names
from ckspace.core.vocab import Dtype, Variant, arch_names
from ckspace.workloads.datasets import Kind, data_file, dataset_names

ENVIRONMENT = {
    "CKSPACE_CACHE_DIR": "cache directory (cells, CK revisions, compiled selectors, compiled objects); "
    "default $XDG_CACHE_HOME/ckspace or ~/.cache/ckspace; --cache-dir overrides it",
    "CKSPACE_BUILD_CACHE": "object cache of ckspace build (default: objects/ in the cache directory)",
    "CKSPACE_CXX": "HIP compiler or wrapper for ckspace build (default: amdclang++, hipcc, clang++ of ROCm)",
    "CKSPACE_DEVICE_LIBS": "ROCm device-library directory passed to the compiler",
    "CKSPACE_HIP_FLAGS": "extra compiler flags for ckspace build (shell words)",
    "CK_ROOT": "CK tree or include directory (default: ROCm, then the amd-aiter wheel)",
    "ROCM_PATH": "the ROCm installation, looked at before /opt/rocm: CK headers under include/, the HIP compiler "
    "under bin/",
    "CC": "host C compiler of the dispatcher's host part and the compiled selector trees",
    "CXX": "host C++ compiler of the hipDNN plugin's object (default: c++, g++ or clang++ from PATH)",
    "CKSPACE_CLANG": "read as CKSPACE_CXX when that is unset (what older toolchain scripts exported)",
    "RAY_ADDRESS": "the Ray cluster of --executor ray when --address is not given",
    "XDG_CACHE_HOME": "where the default cache directory is (XDG_CACHE_HOME/ckspace) when CKSPACE_CACHE_DIR is unset",
    "OMP_NUM_THREADS": "train and evaluate keep it when set, else set it to --threads (OpenMP's thread count)",
    "GOMP_SPINCOUNT": "train and evaluate keep it when set, else set it to 10000 (how long idle OpenMP threads spin)",
    "CKSPACE_TEST_READY_FD": "a file descriptor main writes 'ready' to once its signal handlers are in place "
    "(for tests and supervisors that must not signal it during start-up)",
    "CKSPACE_STANDIN_DEVICE_ARCH": "bench --backend host of a library of several archs: the arch of the stand-in's "
    "device, whose kernels it runs (default: the library's first arch)",
}
"""Every environment variable ckspace reads, with what it means (``ckspace --help`` lists them)."""


def help_epilog(formats: dict[str, tuple[str, ...]]) -> str:
    """What ``ckspace --help`` shows below the commands: the valid values (``formats``: each
    command's ``--format`` choices, read from its parser so none is left out) and the environment."""
    by_choices: dict[tuple[str, ...], list[str]] = {}
    for command, choices in formats.items():
        by_choices.setdefault(choices, []).append(command)
    listed = "; ".join(f"{', '.join(commands)} {'|'.join(choices)}" for choices, commands in by_choices.items())
    lines = [
        f"archs: {', '.join(arch_names())}",
        f"variants: {', '.join(v.value for v in Variant)}; ndims: 1, 2, 3; dtypes: {', '.join(d.value for d in Dtype)}",
        f"rule sets: {', '.join(rule_set_names())}",
        f"rules revisions: {revision_choices()} (default {default_rules_revision()}, the newest merged one)",
        f"formats (--format): {listed}",
        "exit status: 0 done, 1 a valid question with a negative answer (not valid, no kernel, "
        "findings with --strict, kernels emit cannot write), 2 bad input, 3 explain: valid but not proposed "
        "by the rule set, 130/143 interrupted",
        "target: every command answers for the CK headers it finds (--ck-root, CK_ROOT, ROCm, the amd-aiter "
        "wheel) less the kernels upstream documents as wrong; --rules-only for the upstream rule space",
        "environment:",
    ]
    lines += [f"  {name}: {meaning}" for name, meaning in ENVIRONMENT.items()]
    return "\n".join(lines)


def revision_choices() -> str:
    """The rule revisions, oldest first, an unmerged upstream state marked so that nobody takes an
    open pull request for upstream's rules."""
    return ", ".join(
        name if rules_revision(name).merged else f"{name} (unmerged upstream, opt-in)"
        for name in rules_revision_names()
    )


def add_rules_revision_argument(parser: argparse.ArgumentParser) -> None:
    """--rules-revision: which upstream state of the validity rules (default: the newest merged one)."""
    parser.add_argument(
        "--rules-revision",
        metavar="R",
        help=f"upstream state of the validity rules: {revision_choices()} "
        f"(default: {default_rules_revision()}, the newest merged; `ckspace rules` lists them)",
    )


def add_space_arguments(
    parser: argparse.ArgumentParser, *, variant_required: bool = True, several_archs: bool = False
) -> None:
    """--arch, --variant, --ndim, --dtype, --rule-set, --rules-revision, --no-cache, --where, --problem,
    --ck-root / --rules-only. ``several_archs``: --arch takes one or more (a library of several archs)."""
    if several_archs:
        parser.add_argument(
            "--arch",
            required=True,
            nargs="+",
            action="extend",
            help=f"GPU target(s), one library for several: {', '.join(arch_names())}",
        )
    else:
        parser.add_argument("--arch", required=True, help=f"GPU target: {', '.join(arch_names())}")
    parser.add_argument(
        "--variant",
        required=variant_required,
        nargs="+",
        action="extend",
        help="forward, bwd_data, bwd_weight or all (one or more)",
    )
    parser.add_argument("--ndim", nargs="+", action="extend", help="spatial dims (default: 1 2 3)")
    parser.add_argument("--dtype", nargs="+", action="extend", help="fp16, bf16, fp32 (default: all)")
    parser.add_argument("--rule-set", default="full", help=f"one of {', '.join(rule_set_names())} (default: full)")
    add_rules_revision_argument(parser)
    parser.add_argument("--no-cache", action="store_true", help="recompute instead of reading the cache")
    parser.add_argument(
        "--where",
        action="append",
        default=[],
        metavar="EXPR",
        help="filter on config fields, e.g. 'tile_m * tile_n >= 8192 and pipeline in [compv3, "
        "compv4]' (repeatable: all must hold)",
    )
    parser.add_argument(
        "--problem",
        metavar="TEXT",
        help="only kernels that can run this convolution, e.g. 'N=1,G=1,C=64,K=128,Hi=56,Wi=56,Y=3,X=3,stride=1,pad=1'",
    )
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
    return Request.build(
        args.arch, get_rule_set(args.rule_set).name, variants(args.variant), args.ndim, args.dtype, args.rules_revision
    )


def one_of(what: str, choices: tuple[str, ...]):
    """An argparse ``type`` that refuses anything but ``choices`` in ckspace's words (``unknown
    format 'xml'; valid: text, json``); given with ``choices=`` too, so that the usage line shows
    them (argparse checks the type first, so its own message is never reached)."""

    def check(value: str) -> str:
        if value not in choices:
            raise argparse.ArgumentTypeError(str(InvalidChoiceError(what, value, choices)))
        return value

    return check


def add_format_argument(parser: argparse.ArgumentParser, formats: tuple[str, ...], more: str = "") -> None:
    """--format, one of ``formats`` (the first is the default): as argparse choices, so the usage
    line shows them, a wrong one is refused before the command starts, and ``ckspace --help`` lists
    them from the parser (:func:`format_choices`)."""
    parser.add_argument(
        "--format",
        type=one_of("format", formats),
        choices=formats,
        default=formats[0],
        help=f"output format (default: {formats[0]}){more}",
    )


def format_choices(parser: StrictParser) -> tuple[str, ...] | None:
    """The ``--format`` choices of a command's parser (None: it has no --format)."""
    return next((tuple(a.choices) for a in parser.arguments if "--format" in a.option_strings and a.choices), None)


def constants_text(values: dict[str, float]) -> str:
    """The analytical model's constants as ``learn`` and ``select`` print them: name and value, four
    significant digits, in the given order."""
    return ", ".join(f"{name} {value:.4g}" for name, value in values.items())


def json_text(report: Any, indent: int | None = None) -> str:
    """``report`` as one JSON document and a newline: on one line, or indented by ``indent``. A
    pydantic model writes itself (what its readers have always been given)."""
    dump = getattr(report, "model_dump_json", None)
    return (dump(indent=indent) if dump is not None else json.dumps(report, indent=indent)) + "\n"


def write_report(out: TextIO, fmt: str, report: Any, text: Callable[[Any], str], indent: int | None = None) -> None:
    """Write a command's answer in the ``--format`` asked (:func:`add_format_argument`): ``json`` as
    :func:`json_text` of ``report`` (``indent``: as each command's JSON has always been laid out),
    any other format as the ``text`` of ``report``."""
    out.write(json_text(report, indent) if fmt == "json" else text(report))


CK_ROOT_DEFAULT = "default: CK_ROOT, ROCm, the amd-aiter wheel"
"""Where the CK headers come from without ``--ck-root PATH``, as every command's help says it."""


def add_target_arguments(parser: argparse.ArgumentParser) -> None:
    """--ck-root PATH / --rules-only: the target the command answers for (default: the CK headers
    ckspace finds; see :mod:`ckspace.environment.target`)."""
    which = parser.add_mutually_exclusive_group()
    which.add_argument(
        "--ck-root",
        metavar="PATH",
        help=f"the CK headers of the target ({CK_ROOT_DEFAULT}): only kernels they can build, less "
        "the ones upstream documents as wrong",
    )
    which.add_argument(
        "--rules-only",
        action="store_true",
        help="the upstream rule space, whatever CK is installed (known-wrong kernels included)",
    )


def target_from_args(args: argparse.Namespace):
    """The :class:`~ckspace.environment.target.Target` the options ask for: ``--rules-only``, ``--ck-root
    PATH``, else the CK headers found."""
    from ckspace.environment.target import AUTO, resolve_target

    if getattr(args, "rules_only", False):
        return resolve_target(None)
    return resolve_target(getattr(args, "ck_root", None) or AUTO)


def space_from_args(args: argparse.Namespace, variant=None, ndim=None, dtype=None):
    """The :class:`~ckspace.Space` the arguments describe, for their target, with its filters and
    problem. ``variant``/``ndim``/``dtype`` override the arguments (explain takes them from a name).
    Without filters it lists from the cell cache without loading pydantic, numpy or the solver."""
    from ckspace.space.space import Space

    space = Space(
        args.arch,
        variant if variant is not None else variants(args.variant),
        ndim if ndim is not None else args.ndim,
        dtype if dtype is not None else args.dtype,
        args.rule_set,
        where=args.where,
        use_cache=not args.no_cache,
        rules_revision=args.rules_revision,
        ck=target_from_args(args),
    )
    return space.for_problem(args.problem) if args.problem else space


def measurements_file(value: str) -> Path:
    """argparse ``type`` of a measurement CSV argument (train and evaluate ``--data``): see
    :func:`_data_file`."""
    return _data_file(value, Kind.MEASUREMENTS)


def problems_file(value: str) -> Path:
    """argparse ``type`` of a problems CSV argument (plan and bench ``--problems``): see
    :func:`_data_file`."""
    return _data_file(value, Kind.PROBLEMS)


def data_set_help(kind: Kind) -> str:
    """What a CSV argument's help says about the data set names it takes (and that a file wins)."""
    return (
        f"or the name of a {kind.value} data set shipped with ckspace: {', '.join(dataset_names(kind))} "
        "(`ckspace info` describes them; an existing file of that name is read instead)"
    )


def _data_file(value: str, kind: Kind) -> Path:
    """An existing path, else the file of the shipped data set of ``kind`` so named
    (:func:`ckspace.workloads.datasets.data_file`); anything else is one line naming the value and the
    data sets (argparse prefixes the option)."""
    try:
        return data_file(value, kind)
    except InvalidInputError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
