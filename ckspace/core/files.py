"""Files ckspace writes: atomically, only where content changed, under one cache directory; and
the one way it reads a file it is given.

Rewriting an unchanged file would bump its mtime and make every build system recompile it, so a
re-emit compares bytes first; a write goes to a temporary file in the same folder and is moved into
place, so a reader never sees half a file. Every content hash ckspace records is sha256.

Every input file (a problems or data CSV, a kernel list, a manifest, a model's files) is read by
:func:`read_input`: a fifo, device or directory is refused without waiting on it, text that is not
UTF-8 and JSON that is malformed or nested too deeply are each one line naming the file.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import json
import os
import re
import secrets
import shutil
import stat
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path, PurePosixPath
from typing import Any, TypeVar

from ckspace.core.errors import InvalidInputError


def sha256(data: bytes) -> str:
    """Hex sha256 of ``data``."""
    return hashlib.sha256(data).hexdigest()


def cache_dir() -> Path:
    """``$CKSPACE_CACHE_DIR``, else ``$XDG_CACHE_HOME/ckspace``, else ``~/.cache/ckspace``: the
    root of the cell cache and the object cache."""
    explicit = os.environ.get("CKSPACE_CACHE_DIR")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "ckspace"


def output_path(value: object, what: str) -> Path:
    """A path the user named for output: not empty (``--out ""`` is not "the current directory")."""
    text = str(value) if value is not None else ""
    if not text.strip():
        raise InvalidInputError(f"{what} is empty; give a path")
    return Path(text)


def refuse_foreign(path: Path, what: str, kind: str = "file") -> None:
    """Refuse to write over ``path`` when it is a symlink, a device, a fifo or a socket, or an
    existing entry of the other kind (``file`` vs ``directory``): ckspace replaces only what it could
    have written itself, so it never follows a link or clobbers a device node."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return
    except OSError as exc:
        raise InvalidInputError(f"{what} {str(path)!r}: {exc.strerror}") from None
    if stat.S_ISLNK(mode):
        raise InvalidInputError(f"{what} {str(path)!r} is a symbolic link; ckspace does not write through "
                                "links, give the target path")
    if kind == "file" and not stat.S_ISREG(mode):
        raise InvalidInputError(f"{what} {str(path)!r} is {file_kind(mode)}, not a regular file")
    if kind == "directory" and not stat.S_ISDIR(mode):
        raise InvalidInputError(f"{what} {str(path)!r} exists and is not a directory")


def _writable_parent(parent: Path, what: str) -> None:
    for ancestor in (parent, *parent.parents):
        if ancestor.exists() or ancestor.is_symlink():
            if not ancestor.is_dir():
                raise InvalidInputError(f"{what}: {str(ancestor)!r} is not a directory")
            return


def unique_temporary(path: Path) -> Path:
    """A temporary name beside ``path`` no other process picks (``.NAME.<random>.tmp``): what every
    write that ends in a rename goes through, so two commands writing one output never collide."""
    return path.parent / f".{path.name}.{secrets.token_hex(6)}.tmp"


def write_atomic(path: Path, data: bytes, what: str = "output") -> None:
    """Replace ``path`` with ``data`` atomically (temp file in the same folder + os.replace);
    refuses links and non-regular files (:func:`refuse_foreign`)."""
    refuse_foreign(path, what)
    _writable_parent(path.parent, what)
    path.parent.mkdir(parents=True, exist_ok=True)
    # The temporary name is chosen before the file exists and created inside the try, so a signal
    # (Ctrl-C, SIGTERM raised as an exception) at any moment leaves no temporary file behind.
    tmp = unique_temporary(path)
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)  # the umask applies: ordinary files
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def create_new(path: Path, data: bytes, what: str = "output") -> int:
    """Create ``path`` holding ``data``, never replacing anything, and return a descriptor open for
    appending to it. ``data`` goes to a uniquely named temporary beside ``path`` that is then
    hard-linked as ``path``: a reader sees no file or the whole ``data``, and of two processes creating
    one path one wins and the other gets :class:`FileExistsError` (as it does for anything already
    there, a dangling link included). Where hard links are not supported: exclusive creation, then
    one write."""
    refuse_foreign(path, what)
    _writable_parent(path.parent, what)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = unique_temporary(path)
    fd = -1
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o666)
        _write_all(fd, data)
        try:
            os.link(tmp, path, follow_symlinks=False)
        except FileExistsError:
            raise
        except OSError as exc:
            if exc.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EMLINK, errno.ENOSYS):
                raise
            os.close(fd)
            fd = -1
            fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o666)
            _write_all(fd, data)
    except BaseException:
        if fd >= 0:
            os.close(fd)
        raise
    finally:
        tmp.unlink(missing_ok=True)
    return fd


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def escapes(root: Path, relative: str) -> str | None:
    """Why ``root / relative`` would not be a path inside ``root`` (None when it is): an empty,
    absolute or non-POSIX name, a ``.`` or ``..`` part, or a folder on the way that is a symbolic
    link (which may lead anywhere). The last part may be anything: callers refuse or skip a link
    there themselves (:func:`refuse_foreign`). ckspace writes and deletes in an output tree only
    paths that pass, whatever a manifest says."""
    if not relative or "\\" in relative or "\0" in relative or PurePosixPath(relative).is_absolute():
        return f"{relative!r} is not a relative path"
    parts = relative.split("/")
    if any(part in ("", ".", "..") for part in parts):
        return f"{relative!r} leaves the tree or is not a plain path"
    folder = root
    for part in parts[:-1]:
        folder = folder / part
        try:
            mode = os.lstat(folder).st_mode
        except FileNotFoundError:
            return None  # created by the writer as a plain folder
        except OSError as exc:
            return f"{str(folder)!r}: {exc.strerror}"
        if stat.S_ISLNK(mode):
            return f"{str(folder)!r} is a symbolic link"
        if not stat.S_ISDIR(mode):
            return f"{str(folder)!r} is not a directory"
    return None


def write_if_changed(path: Path, data: bytes, what: str = "output") -> bool:
    """Write ``data`` unless ``path`` already holds exactly it; True when the file was written."""
    refuse_foreign(path, what)
    try:
        if path.stat().st_size == len(data) and path.read_bytes() == data:
            return False
    except FileNotFoundError:
        pass
    write_atomic(path, data, what)
    return True


TEMPORARY = re.compile(r"\.(?P<name>.+)\.[0-9a-f]{12}\.(?P<kind>tmp|old)")
"""The names ckspace gives what it writes before moving it into place (:func:`unique_temporary`,
``.tmp``) and what it moves out of the way (``.old``): the only names it removes as debris."""


def _open_directory(path: Path, follow: bool = False) -> int:
    return os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC | (0 if follow else os.O_NOFOLLOW))


@contextmanager
def locked_directory(path: Path, what: str, shared: bool = False) -> Iterator[None]:
    """Hold ``flock`` on the directory ``path`` itself while the block runs: exclusive for a writer
    (``emit``), shared for readers that must not see it rewritten (``build``, ``bench``). A lock on
    the directory's descriptor needs no lock file, so it leaves nothing behind, and the kernel drops
    it when the process ends, however it ends (SIGKILL included): a later run is never refused by a
    dead one. The lock is not waited for: a held lock is one line naming the directory."""
    try:
        fd = _open_directory(path)
    except OSError as exc:
        raise InvalidInputError(f"{what} {str(path)!r}: {exc.strerror}") from None
    try:
        try:
            fcntl.flock(fd, (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | fcntl.LOCK_NB)
        except BlockingIOError:
            doing = "writing" if shared else "writing, building or benching"  # a shared lock waits only for writers
            raise InvalidInputError(f"another ckspace is {doing} {what} {str(path)!r}; run this again once it has "
                                    "ended") from None
        yield
    finally:
        os.close(fd)


@contextmanager
def _flocked(fd: int) -> Iterator[None]:
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        yield
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)


def listed(folder: Path) -> list[Path]:
    """The entries of ``folder``, sorted; none when it is absent, not a directory, a link (never
    followed into) or unreadable: what sweeps of ckspace's own folders walk."""
    try:
        return sorted(folder.iterdir()) if folder.is_dir() and not folder.is_symlink() else []
    except OSError:
        return []


def discard(path: Path) -> None:
    """Remove ``path`` (a directory with its contents, anything else itself; a link is not followed)."""
    try:
        mode = os.lstat(path).st_mode
    except OSError:
        return
    if stat.S_ISDIR(mode):
        shutil.rmtree(path, ignore_errors=True)
    else:
        try:
            path.unlink()
        except OSError:
            pass


def _alive(path: Path) -> bool:
    """True when a live process holds the lock of the staging directory ``path`` (it is filling it);
    False when its writer is gone (then it is debris)."""
    try:
        fd = _open_directory(path)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


def remove_leftovers(target: Path) -> int:
    """Remove what killed writers of ``target`` left beside it (``.NAME.<hex>.tmp`` staging no live
    process holds, ``.NAME.<hex>.old`` outside a swap); returns how many. A process killed between
    moving ``target`` aside and moving its new version in leaves only the ``.old``: it is put back."""
    parent_fd = _open_directory(target.parent, follow=True)
    try:
        with _flocked(parent_fd):  # no live swap of target is half-way (see replace_directory)
            return _remove_leftovers(target)
    finally:
        os.close(parent_fd)


def _remove_leftovers(target: Path) -> int:
    removed = 0
    try:
        names = os.listdir(target.parent)
    except OSError:
        return 0
    for name in names:
        match = TEMPORARY.fullmatch(name)
        if match is None or match["name"] != target.name:
            continue
        path = target.parent / name
        if match["kind"] == "tmp" and _alive(path):
            continue
        if match["kind"] == "old" and not os.path.lexists(target):
            os.replace(path, target)
            continue
        discard(path)
        removed += 1
    return removed


_Filled = TypeVar("_Filled")


def replace_directory(target: Path, fill: Callable[[Path], _Filled]) -> _Filled:
    """Build a new ``target`` with ``fill(staging)`` in a staging directory beside it, then swap it
    in: a reader sees the old ``target`` or the new one, never a mix. Whatever is at ``target`` is
    replaced (the caller has decided it may be: its own output, a damaged cache entry); returns what
    ``fill`` returned.

    The staging directory (``.NAME.<hex>.tmp``) is locked while this process fills it, and the
    debris of killed writers of ``target`` is removed first (:func:`remove_leftovers`); both that and
    the swap run under a lock on the parent directory, so concurrent writers of one ``target`` never
    take each other's staging for debris. Ctrl-C or SIGTERM at any moment leaves the old ``target``
    (or the new one) and no debris: the staging and the moved-aside ``.old`` are removed on the way
    out, and a swap cut between its two renames is undone."""
    parent_fd = _open_directory(target.parent, follow=True)  # a parent may be reached through a link
    staging = unique_temporary(target)
    retired = target.parent / f".{target.name}.{secrets.token_hex(6)}.old"
    staging_fd = -1
    try:
        with _flocked(parent_fd):
            _remove_leftovers(target)
            os.mkdir(staging)  # the umask applies: an ordinary directory once moved into place
            staging_fd = _open_directory(staging)
            fcntl.flock(staging_fd, fcntl.LOCK_EX)
        result = fill(staging)
        with _flocked(parent_fd):
            if os.path.lexists(target):
                os.replace(target, retired)
            os.replace(staging, target)
        return result
    except BaseException:
        if os.path.lexists(retired) and not os.path.lexists(target):
            os.replace(retired, target)  # the swap was cut half-way: put the old one back
        raise
    finally:
        discard(staging)
        discard(retired)
        if staging_fd >= 0:
            os.close(staging_fd)
        os.close(parent_fd)


def write_directory(directory: Path, contents: Mapping[str, bytes], owned: bool) -> None:
    """Write the files ``contents`` as the directory ``directory``.

    A new or ckspace-``owned`` directory is built beside it and swapped in
    (:func:`replace_directory`), so a reader sees the old or the new directory, never a mix.
    Otherwise (a directory holding files of others, the caller's ``--force``) only the named files
    are replaced, each atomically, and everything else in it stays."""
    directory = Path(os.path.abspath(directory))  # "." and "x/.." have no name to stage beside
    what = f"output directory {str(directory)!r}"
    refuse_foreign(directory, "output directory", "directory")
    _writable_parent(directory.parent, what)
    if directory.exists() and not owned:
        for name, data in contents.items():
            write_atomic(directory / name, data, what)
        return
    directory.parent.mkdir(parents=True, exist_ok=True)

    def fill(staging: Path) -> None:
        for name, data in contents.items():
            (staging / name).write_bytes(data)

    replace_directory(directory, fill)


_INPUT_FLAGS = os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
"""How an input is opened: O_NONBLOCK so that opening a fifo returns at once instead of waiting
for a writer, O_NOCTTY so that a terminal named by mistake does not become ours."""

_BOM = b"\xef\xbb\xbf"
_UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")


def file_kind(mode: int) -> str:
    """What an entry that is not a regular file is, as a refusal says it (``a fifo``)."""
    for test, kind in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a fifo"), (stat.S_ISSOCK, "a socket"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISLNK, "a symbolic link")):
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
        raise InvalidInputError(f"{_named(path, what)} is not UTF-8 text (byte 0x{data[offset]:02x} at offset "
                                f"{offset}{hint})") from None


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
