"""Reading the dynamic symbol table of a built library without loading it.

Loading a HIP library registers its code objects with the HIP runtime; listing a library's kernels
(the ``ckspace_run_<name>`` entry points it exports) must not touch a GPU, so the ELF file is read
as bytes here instead.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from pathlib import Path

from ckspace.core.errors import CkspaceError
from ckspace.environment.inputs import read_input

SHT_SYMTAB, SHT_DYNAMIC, SHT_DYNSYM = 2, 6, 11
_STB_GLOBAL = 1
_STT_FUNC = 2

Section = tuple[int, int, int, int, int, int, int, int, int, int]
"""An ELF64 section header: name, type, flags, address, offset, size, link, info, alignment, entry
size."""


def exported_functions(path: Path) -> list[str]:
    """Names of the defined global functions in the dynamic symbol table of an ELF64 LE file; a
    file that is not one (truncated, or another file under the library's name) is one line."""
    data = read_input(path, "kernel library")
    try:
        return [
            name
            for name, info, shndx in symbols(data, sections(data), SHT_DYNSYM)
            if shndx != 0 and info >> 4 == _STB_GLOBAL and info & 0xF == _STT_FUNC
        ]
    except (struct.error, IndexError, ValueError):
        raise CkspaceError(
            f"kernel library {str(path)!r} is not a whole 64-bit little-endian ELF shared "
            "object; rebuild it with ckspace build"
        ) from None


def sections(data: bytes) -> list[Section]:
    """The section headers of an ELF64 little-endian file (ValueError for another file; a truncated
    one raises struct.error or IndexError as it is read)."""
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        raise ValueError("not an ELF64 LE file")
    (shoff,) = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", data, 0x3A)
    return [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]


def string(data: bytes, base: int, offset: int) -> str:
    """The NUL-terminated string at ``offset`` of the string table at ``base``."""
    end = data.index(b"\0", base + offset)
    return data[base + offset : end].decode()


def symbols(data: bytes, headers: list[Section], kind: int) -> Iterator[tuple[str, int, int]]:
    """Every named symbol of the symbol tables of type ``kind`` (:data:`SHT_DYNSYM`,
    :data:`SHT_SYMTAB`), in table order: its name, its info byte (binding << 4 | type) and its
    section index (0: undefined)."""
    for _, section_kind, _, _, offset, size, link, _, _, entsize in headers:
        if section_kind != kind:
            continue
        strings = headers[link][4]
        for pos in range(offset, offset + size, entsize or 24):
            name_at, info, _, shndx, _, _ = struct.unpack_from("<IBBHQQ", data, pos)
            yield (string(data, strings, name_at) if name_at else ""), info, shndx
