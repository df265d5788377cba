"""Reading the dynamic symbol table of a built library without loading it.

Loading a HIP library registers its code objects with the HIP runtime; listing a library's kernels
(the ``ckspace_run_<name>`` entry points it exports) must not touch a GPU, so the ELF file is read
as bytes here instead.
"""

from __future__ import annotations

import struct
from pathlib import Path

from ckspace.core.errors import CkspaceError
from ckspace.core.inputs import read_input

_SHT_DYNSYM = 11
_STB_GLOBAL = 1
_STT_FUNC = 2


def exported_functions(path: Path) -> list[str]:
    """Names of the defined global functions in the dynamic symbol table of an ELF64 LE file; a
    file that is not one (truncated, or another file under the library's name) is one line."""
    data = read_input(path, "kernel library")
    try:
        return _exported_functions(data)
    except (struct.error, IndexError, ValueError):
        raise CkspaceError(
            f"kernel library {str(path)!r} is not a whole 64-bit little-endian ELF shared "
            "object; rebuild it with ckspace build"
        ) from None


def _exported_functions(data: bytes) -> list[str]:
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        raise ValueError("not an ELF64 LE file")
    (shoff,) = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", data, 0x3A)
    sections = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]
    names: list[str] = []
    for _, kind, _, _, offset, size, link, _, _, entsize in sections:
        if kind != _SHT_DYNSYM:
            continue
        str_offset = sections[link][4]
        for pos in range(offset, offset + size, entsize or 24):
            name_at, info, _, shndx, _, _ = struct.unpack_from("<IBBHQQ", data, pos)
            if shndx != 0 and info >> 4 == _STB_GLOBAL and info & 0xF == _STT_FUNC:
                end = data.index(b"\0", str_offset + name_at)
                names.append(data[str_offset + name_at : end].decode())
    return names
