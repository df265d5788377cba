"""Arguments shared by every command that works on a part of the space, the strict parser every
command's arguments go through, and the one way a command writes its ``--format``."""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TextIO

from ckspace.constraints.rulesets import get_rule_set, rule_set_names
from ckspace.core.cells import Request
from ckspace.core.datasets import Kind, data_file, dataset_names
from ckspace.core.errors import CkspaceError, InvalidChoiceError, InvalidInputError
from ckspace.core.revisions import default_rules_revision, rules_revision_names
from ckspace.core.vocab import Dtype, Variant, arch_names

ENVIRONMENT = {
    "CKSPACE_CACHE_DIR": "cache directory (cells, CK revisions, compiled selectors, compiled objects); default $XDG_CACHE_HOME/ckspace or "
    "~/.cache/ckspace; --cache-dir overrides it",
    "CKSPACE_BUILD_CACHE": "object cache of ckspace build (default: objects/ in the cache directory)",
    "CKSPACE_CXX": "HIP compiler or wrapper for ckspace build (default: amdclang++, hipcc, clang++ of ROCm)",
    "CKSPACE_DEVICE_LIBS": "ROCm device-library directory passed to the compiler",
    "CKSPACE_HIP_FLAGS": "extra compiler flags for ckspace build (shell words)",
    "CK_ROOT": "CK tree or include directory (default: ROCm, then the amd-aiter wheel)",
    "ROCM_PATH": "the ROCm installation, looked at before /opt/rocm: CK headers under include/, the HIP compiler "
    "under bin/",
    "CC": "host C compiler of the dispatcher's host part and the compiled selector trees",
    "CKSPACE_CLANG": "read as CKSPACE_CXX when that is unset (what older toolchain scripts exported)",
    "RAY_ADDRESS": "the Ray cluster of --executor ray when --address is not given",
    "XDG_CACHE_HOME": "where the default cache directory is (XDG_CACHE_HOME/ckspace) when CKSPACE_CACHE_DIR is unset",
    "OMP_NUM_THREADS": "train and evaluate keep it when set, else set it to --threads (OpenMP's thread count)",
    "GOMP_SPINCOUNT": "train and evaluate keep it when set, else set it to 10000 (how long idle OpenMP threads spin)",
    "CKSPACE_TEST_READY_FD": "a file descriptor main writes 'ready' to once its signal handlers are in place "
    "(for tests and supervisors that must not signal it during start-up)",
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
        f"rules revisions: {', '.join(rules_revision_names())} (default {default_rules_revision()})",
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


def _converted(convert: Callable[[str], Any] | None, value: str) -> Any:
    """``convert(value)`` (None: the text itself), in argparse's words when it cannot read the value
    (``invalid int value: 'x'``); an ``ArgumentTypeError`` keeps its own words."""
    if convert is None:
        return value
    try:
        return convert(value)
    except (TypeError, ValueError):
        name = getattr(convert, "__name__", repr(convert))
        raise argparse.ArgumentTypeError(f"invalid {name} value: {value!r}") from None


class _Valued(argparse.Action):
    """An argument that takes values, none of them empty: an empty (or blank) value is a mistake,
    not "unset", and is refused naming the argument before anything reads it. argparse calls an
    argument's ``type`` on each value as it reads it, so the check is the ``type`` argparse sees,
    and the ``type`` given runs after it. A list of values (``nargs="+"``) is converted only once
    every value has passed the check (:meth:`_values`), so an empty value is named whatever the
    others hold; argparse then compares the unconverted text with ``choices`` (no list argument has
    them)."""

    def __init__(
        self,
        option_strings: Sequence[str],
        dest: str,
        nargs: int | str | None = None,
        type: Callable[[str], Any] | None = None,
        **kwargs: Any,
    ) -> None:
        shown = "/".join(option_strings) or kwargs.get("metavar") or dest
        listed = nargs not in (None, "?")
        self.convert, self.listed = type, listed
        """The ``type`` given (None: the text), and whether the argument takes a list of values."""

        def checked(value: str) -> Any:  # a function, not a method: argparse puts repr(type) in messages
            if not value.strip():
                raise CkspaceError(f"{shown}: empty value {value!r}; give a value (see --help)")
            return value if listed else _converted(type, value)

        super().__init__(option_strings, dest, nargs=nargs, type=checked, **kwargs)

    def _values(self, values: Any) -> Any:
        if not self.listed or self.convert is None:
            return values
        try:
            return [_converted(self.convert, value) for value in values]
        except argparse.ArgumentTypeError as exc:
            raise argparse.ArgumentError(self, str(exc)) from None


class _StoreOnce(_Valued):
    """``store`` that refuses a second value: a repeated single-valued option is a mistake, not
    "the last one wins"."""

    def __call__(self, parser, namespace, values, option_string=None):
        values = self._values(values)
        seen = vars(namespace).setdefault("_given", set())
        if self.dest in seen:
            raise CkspaceError(
                f"{option_string or self.dest} is given twice; it takes one value "
                "(options that take several say so in --help)"
            )
        seen.add(self.dest)
        setattr(namespace, self.dest, values)


class _Append(_Valued):
    """argparse's ``append``, with non-empty values."""

    def __call__(self, parser, namespace, values, option_string=None):
        setattr(namespace, self.dest, [*(getattr(namespace, self.dest, None) or []), self._values(values)])


class _Extend(_Valued):
    """argparse's ``extend``, with non-empty values."""

    def __call__(self, parser, namespace, values, option_string=None):
        setattr(namespace, self.dest, [*(getattr(namespace, self.dest, None) or []), *self._values(values)])


_STRICT_ACTIONS: dict[str | None, type[argparse.Action]] = {
    None: _StoreOnce,
    "store": _StoreOnce,
    "append": _Append,
    "extend": _Extend,
}
"""The strict action of each argparse action that takes values (the others take none)."""


class _Group:
    """A group of a :class:`StrictParser` (of arguments, or mutually exclusive): the arguments added
    to it are strict and known to the parser like its own; everything else is the group's (argparse
    makes its own two groups through the parser's ``add_argument_group`` too, and uses them so)."""

    def __init__(self, parser: StrictParser, group: Any) -> None:
        self._parser, self._group = parser, group

    def add_argument(self, *args: Any, **kwargs: Any) -> argparse.Action:
        return self._parser.keep(self._group.add_argument(*args, **_strict(kwargs)))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._group, name)


def _strict(kwargs: dict[str, Any]) -> dict[str, Any]:
    """``add_argument``'s keywords with the strict action in place of argparse's own."""
    action = kwargs.get("action")
    if isinstance(action, str) or action is None:
        kwargs["action"] = _STRICT_ACTIONS.get(action, action)
    return kwargs


class StrictParser(argparse.ArgumentParser):
    """argparse, but errors are the one line the rest of the CLI prints, an unknown option is named
    before any other error, single-valued options may be given once, and no argument takes an empty
    string (an empty value is not "unset").

    Built on argparse's public interface only (its private hooks, such as ``_get_values``, change
    between Python versions): the strictness is in the actions and types it gives the arguments
    (:class:`_Valued`), and the parser keeps its own list of its arguments (:attr:`arguments`,
    filled by :meth:`add_argument` and its groups) to know its options."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.arguments: list[argparse.Action] = []  # before argparse's __init__, which adds --help
        """Every argument of this parser, in the order they were added."""
        self.subcommands: dict[str, argparse.ArgumentParser] = {}
        """The parsers of its subcommands by name (empty: it has none)."""
        kwargs.setdefault("allow_abbrev", False)  # --arc is not --arch
        super().__init__(*args, **kwargs)

    def keep(self, action: argparse.Action) -> argparse.Action:
        """Note ``action`` as an argument of this parser (its groups' arguments come through here)."""
        self.arguments.append(action)
        return action

    def add_argument(self, *args: Any, **kwargs: Any) -> argparse.Action:  # type: ignore[override]
        return self.keep(super().add_argument(*args, **_strict(kwargs)))

    def add_argument_group(self, *args: Any, **kwargs: Any) -> Any:
        return _Group(self, super().add_argument_group(*args, **kwargs))

    def add_mutually_exclusive_group(self, **kwargs: Any) -> Any:
        return _Group(self, super().add_mutually_exclusive_group(**kwargs))

    def add_subparsers(self, **kwargs: Any) -> Any:
        action = super().add_subparsers(**kwargs)
        self.subcommands = action.choices
        return action

    def error(self, message: str) -> None:  # type: ignore[override]
        raise CkspaceError(message)

    def parse_known_args(self, args=None, namespace=None):
        """argparse's, but an unknown option is named before anything else, with the option it most
        resembles: argparse reports a missing required option (or a bad value after the typo) first,
        so ``select --problm x`` would only say that --problem is required. What the parser cannot
        read is refused here, not returned: a subcommand's parser is called through this method, and
        only it knows its own options."""
        args = list(sys.argv[1:] if args is None else args)
        try:
            namespace, extras = super().parse_known_args(args, namespace)
        except CkspaceError:
            self._refuse_unknown_options(self._own_tokens(args))
            raise
        self._refuse_unknown_options(extras)
        if extras:
            raise CkspaceError(f"unrecognized arguments: {' '.join(extras)}")
        return namespace, extras

    def _own_tokens(self, args: list[str]) -> list[str]:
        """The tokens this parser reads: up to ``--``, and up to the subcommand's name if it has any
        (what follows is the subcommand's, which checks it itself)."""
        own = []
        for token in args:
            if token == "--" or token in self.subcommands:
                break
            own.append(token)
        return own

    def _refuse_unknown_options(self, tokens: list[str]) -> None:
        """Raise for the first token argparse would read as an option this parser does not have
        (``-3`` is a number, ``-vv`` is -v twice, a token with a space is a value)."""
        import difflib  # here, not at the top: 8 ms of every start, needed only for a mistake

        known = sorted({o for a in self.arguments for o in a.option_strings})
        bare = {o.lstrip("-"): o for o in known}
        for token in tokens:
            name = token.partition("=")[0]
            if (
                not re.fullmatch(r"--?[A-Za-z][\w-]*", name)
                or name in known
                or (not name.startswith("--") and name[:2] in known)
            ):
                continue
            close = difflib.get_close_matches(name.lstrip("-"), bare, n=1, cutoff=0.7)
            hint = f"; did you mean {bare[close[0]]}?" if close else ""
            raise CkspaceError(f"unknown option {name} of {self.prog}{hint} (valid: {', '.join(known)})")


def add_rules_revision_argument(parser: argparse.ArgumentParser) -> None:
    """--rules-revision: which upstream state of the validity rules (default: the newest)."""
    parser.add_argument(
        "--rules-revision",
        metavar="R",
        help=f"upstream state of the validity rules: {', '.join(rules_revision_names())} "
        f"(default: {default_rules_revision()}, the newest; `ckspace rules` lists them)",
    )


def add_space_arguments(parser: argparse.ArgumentParser, *, variant_required: bool = True) -> None:
    """--arch, --variant, --ndim, --dtype, --rule-set, --rules-revision, --no-cache, --where, --problem,
    --ck-root / --rules-only."""
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
    ckspace finds; see :mod:`ckspace.core.target`)."""
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
    (:func:`ckspace.core.datasets.data_file`); anything else is one line naming the value and the
    data sets (argparse prefixes the option)."""
    try:
        return data_file(value, kind)
    except InvalidInputError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
