"""Cubin / ELF inspection: machine-code identity from the .text sections, sizes, SASS counts."""

from __future__ import annotations

import hashlib
import struct
from dataclasses import dataclass
from pathlib import Path

__all__ = ["SASS_INSTRUCTION_BYTES", "BinaryInfo", "inspect_elf"]

#: Every SASS instruction is 16 bytes on sm_70 and later (the only targets of CUDA 13).
SASS_INSTRUCTION_BYTES = 16


@dataclass(frozen=True)
class BinaryInfo:
    """What a compiled object holds.

    Attributes:
        code_hash: sha256 over the names and bytes of the sections that decide what the code
            does (see ``inspect_elf``): equal hashes mean identical behaviour. The whole file is
            not used: a cubin embeds the ptxas command line in ``.note.nv.tkinfo``, an
            executable its build id.
        text_bytes: Total size of the ``.text*`` sections.
        padding_instructions: Trailing NOPs and the final self-branch ptxas pads kernels with.
        file_bytes: Size of the whole file.
        sections: Size of each ``.text*`` section by name.
    """

    code_hash: str
    text_bytes: int
    file_bytes: int
    sections: dict[str, int]
    padding_instructions: int = 0

    @property
    def sass_instructions(self) -> int:
        """SASS instructions of a cubin (16 bytes each), without the alignment padding."""
        return self.text_bytes // SASS_INSTRUCTION_BYTES - self.padding_instructions


def _sections(data: bytes) -> list[tuple[str, int, int, int, int]]:
    """(name, type, offset, size, flags) of each section of an ELF file (32/64-bit, either endianness)."""
    if data[:4] != b"\x7fELF":
        raise ValueError("not an ELF file (bad magic)")
    is64, end = data[4] == 2, "<" if data[5] == 1 else ">"
    if is64:
        shoff, = struct.unpack_from(end + "Q", data, 0x28)
        shentsize, shnum, shstrndx = struct.unpack_from(end + "HHH", data, 0x3A)
        fmt, fields = end + "IIQQQQ", (0, 1, 4, 5, 2)
    else:
        shoff, = struct.unpack_from(end + "I", data, 0x20)
        shentsize, shnum, shstrndx = struct.unpack_from(end + "HHH", data, 0x2E)
        fmt, fields = end + "IIIIII", (0, 1, 4, 5, 2)
    raw = []
    for i in range(shnum):
        vals = struct.unpack_from(fmt, data, shoff + i * shentsize)
        raw.append(tuple(vals[j] for j in fields))  # name offset, type, file offset, size, flags
    str_off, str_size = raw[shstrndx][2], raw[shstrndx][3]
    names = data[str_off:str_off + str_size]
    out = []
    for name_off, typ, off, size, flags in raw:
        name = names[name_off:names.index(b"\0", name_off)].decode(errors="replace")
        out.append((name, typ, off, size, flags))
    return out


_CUBIN_IDENTITY = (".text.", ".nv.info.", ".nv.constant", ".nv.global.init", ".nv.shared.", ".rela.text.")
_SHF_ALLOC, _SHT_NOBITS = 0x2, 8
_NOP, _BRA = 0x918, 0x947


def _identity(name: str, flags: int, kind: str) -> bool:
    if kind == "cubin":
        return name.startswith(_CUBIN_IDENTITY)
    return bool(flags & _SHF_ALLOC) and not name.startswith(".note")


def _padding(body: bytes) -> int:
    """Trailing NOPs plus the self-branch before them (sm_70+ encoding: opcode in the low 12 bits)."""
    n, i = 0, len(body) // SASS_INSTRUCTION_BYTES - 1
    while i >= 0 and struct.unpack_from("<Q", body, i * 16)[0] & 0xFFF == _NOP:
        n, i = n + 1, i - 1
    if i >= 0 and struct.unpack_from("<Q", body, i * 16)[0] & 0xFFF == _BRA:
        n += 1
    return n


def inspect_elf(path: str | Path, kind: str = "cubin") -> BinaryInfo:
    """Read a cubin or a host executable/object and describe its machine code.

    Args:
        path: The file.
        kind: "cubin": identity from the kernels' code, per-kernel info (registers, launch
            bounds), constant banks, shared-memory sizes and code relocations; "host": from every
            allocated section but notes (code, read-only and initialised data).

    Raises:
        ValueError: If the file is not ELF.
    """
    data = Path(path).read_bytes()
    h = hashlib.sha256()
    sections: dict[str, int] = {}
    padding = 0
    for name, typ, off, size, flags in sorted(_sections(data)):
        if not name or not _identity(name, flags, kind):
            continue
        body = data[off:off + size] if typ != _SHT_NOBITS else b""
        h.update(name.encode() + b"\0" + struct.pack("<QQ", size, len(body)) + body)
        sections[name] = size
        if kind == "cubin" and name.startswith(".text."):
            padding += _padding(body)
    text = sum(v for k, v in sections.items() if k == ".text" or k.startswith(".text."))
    return BinaryInfo(h.hexdigest(), text, len(data), sections, padding)
