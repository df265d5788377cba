"""The one way ckspace reads a file it is given.

Every input file (a problems or data CSV, a kernel list, a manifest, a model's files) is read by
:func:`read_input`: a fifo, device or directory is refused without waiting on it, text that is not
UTF-8 and JSON that is malformed or nested too deeply are each one line naming the file.
"""

import json
import os
import stat
from pathlib import Path
from typing import Any, TypeVar

from ckspace.core.errors import InvalidInputError

_INPUT_FLAGS = os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
"""How an input is opened: O_NONBLOCK so that opening a fifo returns at once instead of waiting
for a writer, O_NOCTTY so that a terminal named by mistake does not become ours."""

_BOM = b"\xef\xbb\xbf"
_UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")


def file_kind(mode: int) -> str:
    """What an entry that is not a regular file is, as a refusal says it (``a fifo``)."""
    for test, kind in (
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISFIFO, "a fifo"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISLNK, "a symbolic link"),
    ):
        if test(mode):
            return kind
    return "not a regular file"


def _named(path: Path | str, what: str) -> str:
    return f"{what} {str(path)!r}"


def read_input(path: Path | str, what: str) -> bytes:
    """The bytes of the regular file ``path`` (``what`` names it in errors: ``--problems``).

    What is not a regular file is refused in one line, and never waited on nor read: a fifo would
    block the command until someone writes to it, a device may never end. The kind is checked
    before opening (opening some devices has effects) and again on the open descriptor (the entry
    may change between the two). A missing or unreadable file is one line too."""
    named = _named(path, what)
    try:
        mode = os.stat(path).st_mode
        fd = os.open(path, _INPUT_FLAGS) if stat.S_ISREG(mode) else -1
    except FileNotFoundError:
        raise InvalidInputError(f"{named} does not exist") from None
    except OSError as exc:
        raise InvalidInputError(f"{named}: {exc.strerror or exc}") from None
    except ValueError:  # a NUL byte or a lone surrogate: no file has that name
        raise InvalidInputError(f"{named} is not a usable path") from None
    if fd < 0:
        raise InvalidInputError(f"{named} is {file_kind(mode)}, not a regular file")
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise InvalidInputError(f"{named} is {file_kind(mode)}, not a regular file")
        return read_to_end(fd)
    except OSError as exc:
        raise InvalidInputError(f"{named}: {exc.strerror or exc}") from None
    finally:
        os.close(fd)


def read_to_end(fd: int) -> bytes:
    """The rest of the regular file open at ``fd``, which was opened without blocking (so that a
    fifo could not make the open wait): blocking again for the reads, which a regular file needs."""
    os.set_blocking(fd, True)
    chunks = []
    while chunk := os.read(fd, 1 << 20):
        chunks.append(chunk)
    return b"".join(chunks)


def decode_input(data: bytes, path: Path | str, what: str) -> str:
    """``data`` (read from ``path``) as UTF-8 text, a leading byte order mark dropped (spreadsheets
    and Windows editors write one); else one line with the offset of the first byte that is not
    UTF-8, so the user can find it."""
    skipped = len(_BOM) if data.startswith(_BOM) else 0
    try:
        return data[skipped:].decode("utf-8")
    except UnicodeDecodeError as exc:
        offset = skipped + exc.start
        hint = "; it starts with a UTF-16 byte order mark: save it as UTF-8" if data.startswith(_UTF16_BOMS) else ""
        raise InvalidInputError(
            f"{_named(path, what)} is not UTF-8 text (byte 0x{data[offset]:02x} at offset {offset}{hint})"
        ) from None


def read_input_text(path: Path | str, what: str) -> str:
    """:func:`read_input`, as UTF-8 text (:func:`decode_input`)."""
    return decode_input(read_input(path, what), path, what)


def parse_json(text: str, path: Path | str, what: str) -> Any:
    """The JSON value of ``text`` (read from ``path``): malformed JSON, and JSON nested deeper than
    Python's parser recurses (``[[[[...`` a hundred thousand deep), are one line naming the file."""
    try:
        return json.loads(text)
    except RecursionError:
        raise InvalidInputError(f"{_named(path, what)} is JSON nested too deeply to read") from None
    except ValueError as exc:
        raise InvalidInputError(f"{_named(path, what)} is not valid JSON ({exc})") from None


Model = TypeVar("Model")


def validate_json(model: type[Model], data: bytes, path: Path | str, what: str) -> Model:
    """``data`` (read from ``path``) validated as the pydantic ``model``, its first error in one
    line: pydantic's own message is several lines and quotes the input (which may be megabytes);
    its JSON parser reports deep nesting as such an error ("recursion limit exceeded"). Text that
    is not UTF-8 is refused first, as every input's is (:func:`decode_input`)."""
    from pydantic import ValidationError  # loaded already: ``model`` is a pydantic model

    text = decode_input(data, path, what)
    try:
        return model.model_validate_json(text)  # type: ignore[attr-defined]
    except RecursionError:
        raise InvalidInputError(f"{_named(path, what)} is JSON nested too deeply to read") from None
    except ValidationError as exc:
        errors = exc.errors()
        first = errors[0]
        where = ".".join(str(part) for part in first["loc"])
        more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        said = " ".join(f"{where + ': ' if where else ''}{first['msg']}".split())[:300]
        raise InvalidInputError(f"{_named(path, what)} is not a valid {model.__name__}: {said}{more}") from None


def read_json_model(model: type[Model], path: Path | str, what: str) -> Model:
    """:func:`read_input` then :func:`validate_json`."""
    return validate_json(model, read_input(path, what), path, what)
