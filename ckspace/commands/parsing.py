"""The strict parser every command's arguments go through (:class:`StrictParser`) and the argparse
actions that make it strict. Kept apart from :mod:`ckspace.commands.common` (the arguments commands
share) because it is a self-contained layer over argparse, as long as the rest of that module; it is
a helper, not a subcommand (:data:`ckspace.commands.COMMANDS` lists those)."""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable, Sequence
from typing import Any

from ckspace.commands.examples import examples_epilog
from ckspace.core.errors import CkspaceError, did_you_mean


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
        """argparse's, but each subcommand's help ends with its examples
        (:func:`~ckspace.commands.examples.examples_epilog`, laid out as written): the one place
        every command's parser is made, so no command module states its own."""
        action = super().add_subparsers(**kwargs)
        self.subcommands = action.choices
        add_parser = action.add_parser

        def add_command(name: str, **options: Any) -> argparse.ArgumentParser:
            options.setdefault("epilog", examples_epilog(name))
            options.setdefault("formatter_class", argparse.RawDescriptionHelpFormatter)
            return add_parser(name, **options)

        action.add_parser = add_command
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
        self._refuse_unknown_command(args)
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

    def _refuse_unknown_command(self, args: list[str]) -> None:
        """Raise for a subcommand name that names none, with the closest: argparse would first
        complain about an option it cannot place, so ``ckspace enumrate --arch gfx942`` said
        ``unknown option --arch``, blaming the one word that was right."""
        word = self._command_word(args)
        if word is not None and word not in self.subcommands:
            valid = ", ".join(self.subcommands)
            raise CkspaceError(f"unknown command {word!r}{did_you_mean(word, self.subcommands)} (valid: {valid})")

    def _command_word(self, args: list[str]) -> str | None:
        """The word in the place of the subcommand's name: the first that is neither one of this
        parser's options nor an option's value (None: the parser has no subcommands, the line has
        no such word, or an option this parser does not know comes first, which is refused as
        that)."""
        if not self.subcommands:
            return None
        takes_value = {o: a.nargs != 0 for a in self.arguments for o in a.option_strings}
        tokens = iter(args)
        for token in tokens:
            if token == "--":
                return next(tokens, None)
            if not token.startswith("-") or token == "-":
                return token
            name = token.partition("=")[0]
            if name not in takes_value and not (name[:2] in takes_value and not name.startswith("--")):
                return None
            if takes_value.get(name) and "=" not in token:
                next(tokens, None)
        return None

    def _refuse_unknown_options(self, tokens: list[str]) -> None:
        """Raise for the first token argparse would read as an option this parser does not have
        (``-3`` is a number, ``-vv`` is -v twice, a token with a space is a value)."""
        known = sorted({o for a in self.arguments for o in a.option_strings})
        for token in tokens:
            name = token.partition("=")[0]
            if (
                not re.fullmatch(r"--?[A-Za-z][\w-]*", name)
                or name in known
                or (not name.startswith("--") and name[:2] in known)
            ):
                continue
            hint = did_you_mean(name, known)
            raise CkspaceError(f"unknown option {name} of {self.prog}{hint} (valid: {', '.join(known)})")
