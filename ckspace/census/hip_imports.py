"""What a shared library needs of the HIP runtime, read from its ELF file without loading it.

``hipdnn census`` runs a HIP-linked plugin over a stand-in HIP runtime (:mod:`ckspace.census.standin_hip`),
which must carry the soname the plugin names (``libamdhip64.so.5``, ``.so.6``...) and define every
HIP symbol the plugin imports under the symbol version the plugin requires (``hip_4.2``...), or the
loader refuses the plugin. Both are facts of the plugin's file: its ``DT_NEEDED`` entries, its
undefined dynamic symbols and their ``.gnu.version``/``.gnu.version_r`` requirements, read here as
bytes (ELF64 little-endian, the only kind ckspace builds).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path

from ckspace.core.errors import CkspaceError
from ckspace.environment.inputs import read_input
from ckspace.run.elf import SHT_DYNAMIC, SHT_DYNSYM, SHT_SYMTAB, sections, string, symbols

HIP_RUNTIME = "libamdhip64"
"""The start of the HIP runtime's soname."""
_SHT_VERSYM, _SHT_VERNEED = 0x6FFFFFFF, 0x6FFFFFFE
_DT_NEEDED = 1


@dataclass(frozen=True)
class Imports:
    """A library's ``DT_NEEDED`` sonames and its undefined dynamic symbols, each with the version
    and the file that version is required from (None for an unversioned reference)."""

    needed: tuple[str, ...]
    undefined: tuple[tuple[str, str | None, str | None], ...]

    @property
    def hip_soname(self) -> str | None:
        """The HIP runtime the library needs, or None (a plugin over a host stand-in needs none)."""
        return next((n for n in self.needed if n.startswith(HIP_RUNTIME)), None)

    def hip_symbols(self) -> dict[str, str | None]:
        """The symbols the library takes from the HIP runtime (name -> required version or None):
        those whose version is required from it, and unversioned ``hip*``/``__hip*`` names."""
        soname = self.hip_soname
        return {
            name: version
            for name, version, source in self.undefined
            if (source is not None and source == soname)
            or (source is None and soname is not None and name.startswith(("hip", "__hip")))
        }


def read_imports(path: Path) -> Imports:
    """The imports of the ELF file ``path``; a file that is no ELF64 LE shared object is one line."""
    data = read_input(path, "plugin")
    try:
        return _imports(data)
    except (struct.error, IndexError, ValueError):
        raise CkspaceError(f"{str(path)!r} is not a 64-bit little-endian ELF shared object") from None


def _imports(data: bytes) -> Imports:
    headers = sections(data)
    by_kind = {s[1]: s for s in headers}
    needed: list[str] = []
    if SHT_DYNAMIC in by_kind:
        _, _, _, _, offset, size, link, _, _, _ = by_kind[SHT_DYNAMIC]
        strings = headers[link][4]
        for pos in range(offset, offset + size, 16):
            tag, value = struct.unpack_from("<qQ", data, pos)
            if tag == _DT_NEEDED:
                needed.append(string(data, strings, value))
    versions: dict[int, tuple[str, str]] = {}  # version index -> (version name, file)
    if _SHT_VERNEED in by_kind:
        _, _, _, _, offset, _, link, info, _, _ = by_kind[_SHT_VERNEED]
        strings = headers[link][4]
        pos = offset
        for _ in range(info):
            _, count, file_at, aux, following = struct.unpack_from("<HHIII", data, pos)
            file = string(data, strings, file_at)
            entry = pos + aux
            for _ in range(count):
                _, _, other, name_at, step = struct.unpack_from("<IHHII", data, entry)
                versions[other] = (string(data, strings, name_at), file)
                entry += step
            pos += following
    undefined: list[tuple[str, str | None, str | None]] = []
    versym = by_kind.get(_SHT_VERSYM)
    for index, (name, _, shndx) in enumerate(symbols(data, headers, SHT_DYNSYM)):
        if shndx != 0 or not name:
            continue
        version = None
        if versym is not None:
            (version,) = struct.unpack_from("<H", data, versym[4] + 2 * index)
        name_version, file = versions.get((version or 0) & 0x7FFF, (None, None))
        undefined.append((name, name_version, file))
    return Imports(tuple(needed), tuple(undefined))


def object_symbols(path: Path) -> tuple[set[str], set[str]]:
    """The global symbols a relocatable object (``.o``) defines and those it leaves undefined."""
    data = read_input(path, "object")
    try:
        defined: set[str] = set()
        undefined: set[str] = set()
        for name, info, shndx in symbols(data, sections(data), SHT_SYMTAB):
            if name and info >> 4 in (1, 2):  # global or weak
                (undefined if shndx == 0 else defined).add(name)
        return defined, undefined
    except (struct.error, IndexError, ValueError):
        raise CkspaceError(f"{str(path)!r} is not a 64-bit little-endian ELF object") from None
