"""Files ckspace writes: atomically, only where content changed, under one cache directory.

Rewriting an unchanged file would bump its mtime and make every build system recompile it, so a
re-emit compares bytes first; a write goes to a temporary file in the same folder and is moved into
place, so a reader never sees half a file. Every content hash ckspace records is sha256.
Whole trees (an emitted tree, a cache entry's folder) are :mod:`ckspace.environment.trees`; files ckspace
is given to read are :mod:`ckspace.environment.inputs`.
"""

import errno
import hashlib
import os
import secrets
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path, PurePosixPath

from ckspace import __version__
from ckspace.core.errors import InvalidInputError
from ckspace.environment.inputs import file_kind


def sha256(data: bytes) -> str:
    """Hex sha256 of ``data``."""
    return hashlib.sha256(data).hexdigest()


def cache_dir() -> Path:
    """``$CKSPACE_CACHE_DIR``, else ``$XDG_CACHE_HOME/ckspace``, else ``~/.cache/ckspace``: the
    root of every cache ckspace keeps (``cells/``, ``ck/`` revisions, ``compiled-selectors/`` and
    ``objects/``, which ``CKSPACE_BUILD_CACHE`` may move)."""
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
        raise InvalidInputError(
            f"{what} {str(path)!r} is a symbolic link; ckspace does not write through links, give the target path"
        )
    if kind == "file" and not stat.S_ISREG(mode):
        raise InvalidInputError(f"{what} {str(path)!r} is {file_kind(mode)}, not a regular file")
    if kind == "directory" and not stat.S_ISDIR(mode):
        raise InvalidInputError(f"{what} {str(path)!r} exists and is not a directory")


def writable_parent(parent: Path, what: str) -> None:
    for ancestor in (parent, *parent.parents):
        if ancestor.exists() or ancestor.is_symlink():
            if not ancestor.is_dir():
                raise InvalidInputError(f"{what}: {str(ancestor)!r} is not a directory")
            return


def unique_temporary(path: Path) -> Path:
    """A temporary name beside ``path`` no other process picks (``.NAME.<random>.tmp``): what every
    write that ends in a rename goes through, so two commands writing one output never collide."""
    return path.parent / f".{path.name}.{secrets.token_hex(6)}.tmp"


@contextmanager
def naming(path: Path) -> Iterator[None]:
    """Re-raise an ``OSError`` of the block as the same error naming ``path``: a write's ENOSPC (a
    full disk) or EDQUOT carries no file name, and one of a temporary names that temporary, while the
    one line the CLI prints of it must say which output could not be written."""
    try:
        yield
    except OSError as exc:
        raise OSError(exc.errno, exc.strerror or str(exc), str(path)) from exc  # the errno's subclass


def write_atomic(path: Path, data: bytes, what: str = "output") -> None:
    """Replace ``path`` with ``data`` atomically (temp file in the same folder + os.replace);
    refuses links and non-regular files (:func:`refuse_foreign`). A failure names ``path``."""
    refuse_foreign(path, what)
    writable_parent(path.parent, what)
    path.parent.mkdir(parents=True, exist_ok=True)
    # The temporary name is chosen before the file exists and created inside the try, so a signal
    # (Ctrl-C, SIGTERM raised as an exception) at any moment leaves no temporary file behind.
    tmp = unique_temporary(path)
    try:
        with naming(path):
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)  # the umask applies: ordinary files
            try:
                _write_all(fd, data)
            finally:
                os.close(fd)
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
    one write. A failure names ``path``."""
    refuse_foreign(path, what)
    writable_parent(path.parent, what)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = unique_temporary(path)
    fd = -1
    try:
        with naming(path):
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
        view = view[os.write(fd, view) :]


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


# -- the banner of a generated file ----------------------------------------------------------------
# Stated once, below every layer that writes one: the emitted C, C++ and FlatBuffers sources (the
# templates' ``banner`` global), the dispatcher's compiled models, the build's CMake package,
# pkg-config file and ninja files, the census's stand-in sources and docs/rules.md. The emitter
# deletes, of a tree's files, only those that carry :data:`BANNER_MARK`, so its words stay as they are.

BANNER_MARK = "Generated by ckspace"
"""The banner's first words: what marks a file as ckspace's to replace or delete."""

COMMENTS: dict[str, tuple[str, str]] = {
    "c": ("// ", ""),
    "cmake": ("# ", ""),
    "pkg-config": ("# ", ""),
    "markdown": ("<!-- ", " -->"),
}
"""A line comment's opening and closing per language (``c`` also serves C++ and FlatBuffers' schema
language, which comment alike)."""


def generated(command: str) -> str:
    """The banner's words, without comment syntax (for a writer that comments its own lines, as
    ninja's does): ``command`` is what a user re-runs instead of editing."""
    return f"{BANNER_MARK} {__version__} -- do not edit; re-run `{command}` instead."


def banner(language: str, command: str) -> str:
    """The banner as one comment line of ``language`` (a key of :data:`COMMENTS`)."""
    opening, closing = COMMENTS[language]
    return f"{opening}{generated(command)}{closing}"
