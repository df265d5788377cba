"""Writing an emitted tree under ``--out`` (``ckspace emit``): :func:`emit` renders the tree in
memory (:func:`~ckspace.emit.rendering.render_tree`, which decides what it holds), writes it
(:func:`write_tree`) and reports what changed.

A re-emit rewrites only the files whose bytes changed and writes the manifest last; it removes the
files the new tree no longer has only when they carry ckspace's banner, and nothing outside the
tree's own folders. One emit writes a tree at a time (:func:`emit` says how).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ckspace.core.ck import CkRevision
from ckspace.core.errors import InvalidInputError
from ckspace.emit.dispatcher import MODEL_DIR
from ckspace.emit.manifest import BUILD_FOLDER, MANIFEST_NAME, Manifest
from ckspace.emit.rendering import WRAPPER_DIR, RenderedTree, SelectorOptions, render_tree
from ckspace.environment.files import BANNER_MARK as MARK
from ckspace.environment.files import escapes, refuse_foreign, write_if_changed
from ckspace.environment.trees import TEMPORARY, listed, locked_directory
from ckspace.space.listing import Kernel

log = logging.getLogger(__name__)

BANNER_MARK = MARK.encode()
_SOURCE_SUFFIXES = (".hpp", ".cpp", ".h", ".c")
_TREE_FOLDERS = (WRAPPER_DIR, MODEL_DIR, BUILD_FOLDER)


@dataclass
class EmitResult:
    """What an emit did: the manifest it wrote, the files it wrote (changed or new), how many were
    already as rendered, and the stale files it removed."""

    manifest: Manifest
    written: list[str] = field(default_factory=list)
    unchanged: int = 0
    removed: list[str] = field(default_factory=list)


def emit(
    kernels: Iterable[Kernel],
    out: Path,
    revision: CkRevision,
    *,
    arch: str,
    request: Mapping[str, Any],
    selector: SelectorOptions | None = None,
    force: bool = False,
) -> EmitResult:
    """Write the tree for ``kernels`` under ``out``; see the module docstring. The manifest is
    written last, so an interrupted emit leaves the previous manifest, and the next emit removes
    whatever bannered file the new one does not list.

    One emit writes a tree at a time: the whole emit holds an exclusive lock on ``out`` itself
    (:func:`~ckspace.environment.trees.locked_directory`, which leaves no file), so a second one fails at
    once naming the tree instead of interleaving its files with the first's (the tree would not
    match its manifest); ``build`` and ``bench`` hold it shared. Under the lock no other ckspace
    writes the tree, so the temporaries found in it are a killed emit's and are removed. A new
    ``out`` is created to be locked, and removed again when the emit fails before writing into it."""
    with _locked_out(out, force):
        tree = render_tree(kernels, revision, arch=arch, request=request, selector=selector)
        result = write_tree(out, tree)
    _report(result)
    return result


@contextmanager
def _locked_out(out: Path, force: bool) -> Iterator[None]:
    """``out`` checked (:func:`check_out`), created when absent, locked exclusively and swept of a
    killed emit's temporaries; a created ``out`` is removed again when the block fails and left it
    empty."""
    check_out(out, force)
    try:
        out.mkdir(parents=True)
        created = True
    except FileExistsError:
        created = False
    except OSError as exc:
        raise InvalidInputError(f"--out {str(out)!r}: {exc.strerror}") from None
    with locked_directory(out, "--out"):
        try:
            check_out(out, force)  # again: it may have changed before the lock was ours
            for path in _temporaries(out):
                path.unlink(missing_ok=True)
            yield
        except BaseException:
            if created:
                with suppress(OSError):
                    out.rmdir()  # only when still empty
            raise


def write_tree(out: Path, tree: RenderedTree) -> EmitResult:
    """Write ``tree`` under ``out``: each file whose bytes differ, the manifest last, then remove the
    stale files (:func:`_stale`). Every path is checked to stay inside ``out`` before the first write."""
    for path in [*tree.files, MANIFEST_NAME]:
        if (why := escapes(out, path)) is not None:
            raise InvalidInputError(
                f"--out {str(out)!r}: cannot write {path} inside it ({why}); ckspace writes only "
                "inside --out, never through a link: replace the link with a directory"
            )
    stale = _stale(out, set(tree.files) | {MANIFEST_NAME})
    result = EmitResult(manifest=tree.manifest)
    for path, data in [*sorted(tree.files.items()), (MANIFEST_NAME, tree.manifest.to_bytes())]:
        if write_if_changed(out / path, data, "--out"):
            result.written.append(path)
        else:
            result.unchanged += 1
    for path in stale:
        if not _deletable(out, path):  # checked again: the tree may have changed while writing
            continue
        (out / path).unlink(missing_ok=True)
        result.removed.append(path)
    return result


def _report(result: EmitResult) -> None:
    """The emit's log line; ``ckspace emit`` prints its own summary of the result."""
    manifest = result.manifest
    log.info(
        "emitted %d kernels (%d files written, %d unchanged, %d removed, %d excluded by CK, %d depthwise skipped)",
        len(manifest.kernels),
        len(result.written),
        result.unchanged,
        len(result.removed),
        len(manifest.excluded),
        manifest.depthwise_skipped,
    )


def _previous_files(out: Path) -> set[str]:
    """The files the previous manifest lists that lie inside ``out`` (:func:`~ckspace.environment.files.escapes`):
    a path with ``..``, an absolute one or one through a link inside the tree is ignored, never
    followed, whoever wrote the manifest."""
    path = out / MANIFEST_NAME
    if not path.is_file():
        return set()
    try:
        listed = Manifest.model_validate_json(path.read_bytes()).files()
    except ValueError:
        log.warning("ignoring unreadable %s", path)
        return set()
    inside = {p for p in listed if escapes(out, p) is None}
    if len(inside) < len(set(listed)):
        outside = sorted(set(listed) - inside)
        log.warning(
            "%s lists %d path(s) outside the tree (e.g. %r); ignored, never deleted", path, len(outside), outside[0]
        )
    return inside


def _ours(path: Path) -> bool:
    """True when the file carries a ckspace banner (the only files a re-emit may delete)."""
    try:
        with path.open("rb") as handle:
            return BANNER_MARK in handle.read(512)
    except OSError:
        return False


def _stale(out: Path, keep: set[str]) -> list[str]:
    """Generated files under ``out`` the new tree no longer has: those of the previous manifest and
    any bannered source left by an interrupted emit, but never a file without the banner (someone
    else's, or one edited by hand) nor anything outside the tree's own folders (``build/``, another
    tree below this one)."""
    found = _previous_files(out)
    for folder in (out, out / WRAPPER_DIR, out / MODEL_DIR):  # the tree's own folders, not others' trees below
        if folder.is_dir() and not folder.is_symlink():
            found.update(
                path.relative_to(out).as_posix()
                for path in folder.iterdir()
                if path.suffix in _SOURCE_SUFFIXES and path.is_file()
            )
    return sorted(p for p in found - keep if _deletable(out, p))


def _deletable(out: Path, path: str) -> bool:
    """A bannered regular file inside ``out``, reached without a link."""
    return escapes(out, path) is None and (out / path).is_file() and not (out / path).is_symlink() and _ours(out / path)


def _temporary(name: str) -> bool:
    """A name of ckspace's temporary of a tree file (``.NAME.<hex>.tmp``,
    :func:`~ckspace.environment.files.unique_temporary`)."""
    match = TEMPORARY.fullmatch(name)
    return (
        match is not None
        and match["kind"] == "tmp"
        and (match["name"] == MANIFEST_NAME or Path(match["name"]).suffix in _SOURCE_SUFFIXES)
    )


def _temporaries(out: Path) -> list[Path]:
    """The temporaries of tree files in the tree's own folders (``build/`` and links aside): what a
    killed emit leaves, the only debris an emit removes."""
    found = []
    for folder in (out, out / WRAPPER_DIR):
        found += [p for p in listed(folder) if _temporary(p.name)]
    for base, _, names in os.walk(out / MODEL_DIR):  # links are not followed
        found += [Path(base, n) for n in names if _temporary(n)]
    return [p for p in found if p.is_file() and not p.is_symlink()]


def check_out(out: Path, force: bool) -> None:
    """Refuse an ``--out`` that is a file, a link, or a directory that is not an emitted tree (no
    manifest) and holds anything but bannered files, the tree's folders and ckspace's temporaries
    (what an interrupted first emit leaves, a SIGKILLed one included), unless ``force``."""
    refuse_foreign(out, "--out", "directory")
    if (
        out.is_dir()
        and not force
        and not (out / MANIFEST_NAME).is_file()
        and any(
            not (_ours(path) or _temporary(path.name) if path.is_file() else path.name in _TREE_FOLDERS)
            for path in out.iterdir()
        )
    ):
        raise InvalidInputError(
            f"--out {str(out)!r} is a non-empty directory that is not an emitted tree (no "
            f"{MANIFEST_NAME}); give an empty or new directory, or --force to emit into it"
        )
