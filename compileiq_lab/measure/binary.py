"""Cubin / ELF inspection: machine-code identity from the .text sections, sizes, SASS counts."""

from __future__ import annotations

import hashlib
import struct
from dataclasses import dataclass
from pathlib import Path

__all__ = ["BinaryInfo", "inspect_elf", "SASS_INSTRUCTION_BYTES"]

#: Every SASS instruction is 16 bytes on sm_70 and later (the only targets of CUDA 13).
SASS_INSTRUCTION_BYTES = 16


@dataclass(frozen=True)
class BinaryInfo:
    """What a compiled object holds.

    Attributes:
        code_hash: sha256 over the names and bytes of the ``.text*`` sections: equal hashes mean
            identical machine code (the whole file is not used: a cubin embeds the ptxas
            command line in ``.note.nv.tkinfo``).
        text_bytes: Total size of the ``.text*`` sections.
        file_bytes: Size of the whole file.
        sections: Size of each ``.text*`` section by name.
    """

    code_hash: str
    text_bytes: int
    file_bytes: int
    sections: dict[str, int]

    @property
    def sass_instructions(self) -> int:
        """SASS instruction count of a cubin (16 bytes each)."""
        return self.text_bytes // SASS_INSTRUCTION_BYTES


def _sections(data: bytes) -> list[tuple[str, int, int, int]]:
    """(name, type, offset, size) of each section of an ELF file (32/64-bit, either endianness)."""
    if data[:4] != b"\x7fELF":
        raise ValueError("not an ELF file (bad magic)")
    is64, end = data[4] == 2, "<" if data[5] == 1 else ">"
    if is64:
        shoff, = struct.unpack_from(end + "Q", data, 0x28)
        shentsize, shnum, shstrndx = struct.unpack_from(end + "HHH", data, 0x3A)
        fmt, fields = end + "IIQQQQ", (0, 1, 4, 5)
    else:
        shoff, = struct.unpack_from(end + "I", data, 0x20)
        shentsize, shnum, shstrndx = struct.unpack_from(end + "HHH", data, 0x2E)
        fmt, fields = end + "IIIIII", (0, 1, 4, 5)
    raw = []
    for i in range(shnum):
        vals = struct.unpack_from(fmt, data, shoff + i * shentsize)
        raw.append(tuple(vals[j] for j in fields))  # name offset, type, file offset, size
    str_off, str_size = raw[shstrndx][2], raw[shstrndx][3]
    names = data[str_off:str_off + str_size]
    out = []
    for name_off, typ, off, size in raw:
        name = names[name_off:names.index(b"\0", name_off)].decode(errors="replace")
        out.append((name, typ, off, size))
    return out


def inspect_elf(path: str | Path, code_sections: tuple[str, ...] = (".text",)) -> BinaryInfo:
    """Read a cubin (or any ELF object) and describe its machine code.

    Args:
        path: The file.
        code_sections: Section name prefixes whose bytes define code identity (".text" for
            cubins; executables also want ".rodata", where compilers put code constants).

    Raises:
        ValueError: If the file is not ELF.
    """
    data = Path(path).read_bytes()
    h = hashlib.sha256()
    sections: dict[str, int] = {}
    for name, typ, off, size in sorted(_sections(data)):
        if any(name == p or name.startswith(p + ".") for p in code_sections):
            body = data[off:off + size] if typ != 8 else b""  # SHT_NOBITS has no bytes
            h.update(name.encode() + b"\0" + struct.pack("<Q", len(body)) + body)
            sections[name] = size
    text = sum(v for k, v in sections.items() if k == ".text" or k.startswith(".text."))
    return BinaryInfo(h.hexdigest(), text, len(data), sections)
