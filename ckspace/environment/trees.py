"""Folders ckspace writes as a whole: locked while it works in them, replaced in one move, and
swept of only the debris it left itself (names matching :data:`TEMPORARY`).

An emitted tree or a compiled-selector cache entry is filled in a sibling staging folder and moved
into place, so a reader sees the old tree or the new one; a SIGKILL between the two leaves a
``.old``/``.tmp`` sibling that the next writer removes, and nothing else is ever removed.
"""

import fcntl
import os
import re
import secrets
import shutil
import stat
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import TypeVar

from ckspace.core.errors import InvalidInputError
from ckspace.environment.files import naming, refuse_foreign, unique_temporary, writable_parent, write_atomic
from ckspace.environment.signals import signals_deferred

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
            raise InvalidInputError(
                f"another ckspace is {doing} {what} {str(path)!r}; run this again once it has ended"
            ) from None
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
        with suppress(OSError):
            path.unlink()


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
    out, with the signal held back until they are gone (:func:`~ckspace.environment.signals.signals_deferred`),
    and a swap cut between its two renames is undone."""
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
    finally:
        with signals_deferred():  # a signal cutting the clean-up short would leave the .old or the staging
            if os.path.lexists(retired) and not os.path.lexists(target):
                os.replace(retired, target)  # the swap was cut half-way: put the old one back
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
    writable_parent(directory.parent, what)
    if directory.exists() and not owned:
        for name, data in contents.items():
            write_atomic(directory / name, data, what)
        return
    directory.parent.mkdir(parents=True, exist_ok=True)

    def fill(staging: Path) -> None:
        for name, data in contents.items():
            with naming(directory / name):  # not the staging's name: the user knows the output's
                (staging / name).write_bytes(data)

    replace_directory(directory, fill)


def entry_folders(folder: Path, entry: re.Pattern[str]) -> list[Path]:
    """The cache entries of ``folder`` that are folders swapped in whole (:func:`replace_directory`),
    known by their name matching ``entry``: a link or a file of that name is not one."""
    return [p for p in listed(folder) if entry.fullmatch(p.name) and p.is_dir() and not p.is_symlink()]


def entry_folders_info(folder: Path, entry: re.Pattern[str]) -> dict[str, object]:
    """Where a cache of entry folders is, how many entries it holds and their size in bytes (what
    ``ckspace cache info`` says of it); files not ckspace's are neither counted nor measured."""
    entries = entry_folders(folder, entry)
    size = 0
    for found in entries:
        for base, _, names in os.walk(found):
            size += sum(os.lstat(os.path.join(base, n)).st_size for n in names)
    return {"directory": str(folder), "entries": len(entries), "bytes": size}


def clear_entry_folders(folder: Path, entry: re.Pattern[str]) -> int:
    """Delete a cache's entry folders and what killed writers of them left (never the staging of a
    live one; nothing else in ``folder``); returns how many entries were removed."""
    removed = 0
    for path in listed(folder):
        if entry.fullmatch(path.name) and path.is_dir() and not path.is_symlink():
            discard(path)
            removed += 1
        elif (match := TEMPORARY.fullmatch(path.name)) and entry.fullmatch(match["name"]):
            remove_leftovers(folder / match["name"])
    return removed
