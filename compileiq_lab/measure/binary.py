"""Cubin / ELF inspection: machine-code identity from the .text sections, sizes, SASS counts (of a file or a kernel)."""

from __future__ import annotations

import hashlib
import re
import struct
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from compileiq_lab.exceptions import ConfigurationError
from compileiq_lab.measure.unitnames import stable_symbol

__all__ = ["SASS_INSTRUCTION_BYTES", "STO_CUDA_ENTRY", "BinaryInfo", "inspect_elf"]

#: Every SASS instruction is 16 bytes on sm_70 and later (the only targets of CUDA 13).
SASS_INSTRUCTION_BYTES = 16
#: The ``st_other`` bit nvcc/ptxas set on the FUNC symbol of a kernel (``__global__``, a PTX ``.entry``); device
#: functions compiled on their own (``__noinline__`` with ``-rdc``) are FUNC symbols without it.
STO_CUDA_ENTRY = 0x10


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


@dataclass(frozen=True)
class _Header:
    """One ELF section header (the fields this module reads)."""

    name: str
    type: int
    offset: int
    size: int
    flags: int
    link: int
    entsize: int


@dataclass(frozen=True)
class _Symbol:
    """One ELF symbol-table entry."""

    name: str
    value: int
    size: int
    type: int  # STT_*: the low nibble of st_info
    bind: int  # STB_*: the high nibble of st_info
    other: int
    shndx: int


def _end(data: bytes) -> tuple[bool, str]:
    """(64-bit?, struct byte-order character) of an ELF file; ValueError if it is not one."""
    if data[:4] != b"\x7fELF":
        raise ValueError("not an ELF file (bad magic)")
    return data[4] == 2, "<" if data[5] == 1 else ">"


def _headers(data: bytes) -> list[_Header]:
    """Every section header of an ELF file (32/64-bit, either endianness), in file order."""
    is64, end = _end(data)
    if is64:
        shoff, = struct.unpack_from(end + "Q", data, 0x28)
        shentsize, shnum, shstrndx = struct.unpack_from(end + "HHH", data, 0x3A)
        fmt = end + "IIQQQQIIQQ"
    else:
        shoff, = struct.unpack_from(end + "I", data, 0x20)
        shentsize, shnum, shstrndx = struct.unpack_from(end + "HHH", data, 0x2E)
        fmt = end + "IIIIIIIIII"
    raw = [struct.unpack_from(fmt, data, shoff + i * shentsize) for i in range(shnum)]
    # name offset, type, flags, addr, offset, size, link, info, addralign, entsize
    str_off, str_size = raw[shstrndx][4], raw[shstrndx][5]
    names = data[str_off:str_off + str_size]
    return [_Header(_cstr(names, r[0]), r[1], r[4], r[5], r[2], r[6], r[9]) for r in raw]


def _cstr(table: bytes, off: int) -> str:
    return table[off:table.index(b"\0", off)].decode(errors="replace")


def _sections(data: bytes) -> list[tuple[str, int, int, int, int]]:
    """(name, type, offset, size, flags) of each section of an ELF file (32/64-bit, either endianness)."""
    return [(h.name, h.type, h.offset, h.size, h.flags) for h in _headers(data)]


_SHT_SYMTAB, _SHT_RELA = 2, 4
_STT_FUNC, _STT_SECTION = 2, 3


def _symbols(data: bytes, headers: list[_Header] | None = None) -> list[_Symbol]:
    """The entries of the ``.symtab`` of an ELF file, by index (index 0 is the null symbol); [] without one."""
    is64, end = _end(data)
    headers = _headers(data) if headers is None else headers
    tab = next((h for h in headers if h.type == _SHT_SYMTAB), None)
    if tab is None or not 0 <= tab.link < len(headers):
        return []
    strtab = headers[tab.link]
    names = data[strtab.offset:strtab.offset + strtab.size]
    size = tab.entsize or (24 if is64 else 16)
    out = []
    for off in range(tab.offset, tab.offset + tab.size - size + 1, size):
        if is64:
            name, info, other, shndx, value, sym_size = struct.unpack_from(end + "IBBHQQ", data, off)
        else:
            name, value, sym_size, info, other, shndx = struct.unpack_from(end + "IIIBBH", data, off)
        out.append(_Symbol(_cstr(names, name), value, sym_size, info & 0xF, info >> 4, other, shndx))
    return out


def _is_entry(sym: _Symbol) -> bool:
    """Whether a symbol is a kernel: a FUNC carrying the CUDA entry bit in ``st_other``."""
    return sym.type == _STT_FUNC and bool(sym.other & STO_CUDA_ENTRY) and bool(sym.name)


_CUBIN_IDENTITY = (".text.", ".nv.info.", ".nv.constant", ".nv.global.init", ".nv.shared.", ".rela.text.")
_SHF_ALLOC, _SHT_NOBITS = 0x2, 8
_NOP, _BRA = 0x918, 0x947
#: Sections that belong to one function, named ``<kind>.<function>``: all others of the identity are file-wide.
_PER_FUNCTION = re.compile(r"(?:\.text|\.rela\.text|\.nv\.info|\.nv\.shared|\.nv\.constant\d+|\.nv\.local)\.(.+)\Z")


def _stable_section(name: str) -> str:
    """A section's name as hashed: a function's section with its symbol's per-compile parts fixed
    (``unitnames.stable_symbol``), so that the same code compiled again hashes the same."""
    owner = _PER_FUNCTION.match(name)
    return name[:owner.start(1)] + stable_symbol(owner.group(1)) if owner else name


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


def inspect_elf(path: str | Path, kind: str = "cubin", entry: str | None = None) -> BinaryInfo:
    """Read a cubin or a host executable/object and describe its machine code (all of it, or one kernel's).

    Args:
        path: The file.
        kind: "cubin": identity from the kernels' code, per-kernel info (registers, launch
            bounds), constant banks, shared-memory sizes and code relocations; "host": from every
            allocated section but notes (code, read-only and initialised data).
        entry: With a cubin, one kernel's mangled name (see ``compileiq_lab.measure.entries``:
            ``cubin_entries`` lists them, ``resolve_entry`` turns a C++ name into one). Hash, sizes and
            SASS count then cover that kernel's own sections (``.text.<entry>``, ``.rela.text.<entry>``,
            ``.nv.info.<entry>``, ``.nv.shared.<entry>``, ``.nv.constant<N>.<entry>``) and the file-wide
            ones it may use: the global ``.nv.info`` (its records about other kernels left out; the
            whole-file hash does not read this section), constant banks without a kernel suffix,
            ``.nv.global.init`` and the sections of every device function that is not a kernel. The
            sections of the other kernels are left out, so a change to another kernel alone leaves the
            hash as it is; symbol indices inside info records and relocations are hashed as the symbols
            they name, so the renumbering such a change causes does not count either.

    Raises:
        ValueError: If the file is not ELF.
        ConfigurationError: If ``entry`` is given for a host file, or names no kernel of the cubin.
    """
    data = Path(path).read_bytes()
    if entry is not None:
        return _inspect_entry(data, Path(path), kind, entry)
    h = hashlib.sha256()
    sections: dict[str, int] = {}
    padding = 0
    for name, typ, off, size, flags in sorted(_sections(data)):
        if not name or not _identity(name, flags, kind):
            continue
        body = data[off:off + size] if typ != _SHT_NOBITS else b""
        h.update(_stable_section(name).encode() + b"\0" + struct.pack("<QQ", size, len(body)) + body)
        sections[name] = size
        if kind == "cubin" and name.startswith(".text."):
            padding += _padding(body)
    text = sum(v for k, v in sections.items() if k == ".text" or k.startswith(".text."))
    return BinaryInfo(h.hexdigest(), text, len(data), sections, padding)


def _inspect_entry(data: bytes, path: Path, kind: str, entry: str) -> BinaryInfo:
    """``inspect_elf`` restricted to one kernel of a cubin."""
    if kind != "cubin":
        raise ConfigurationError(f"inspect_elf({str(path)!r}): `entry is only given with kind='cubin'` must hold, "
                                 f"but got kind={kind!r} with entry={entry!r}. Drop entry, or pass kind='cubin'.")
    headers = _headers(data)
    symbols = _symbols(data, headers)
    kernels = list(dict.fromkeys(s.name for s in symbols if _is_entry(s)))
    if entry not in kernels:
        raise ConfigurationError(
            f"inspect_elf({str(path)!r}): `entry is the mangled name of a kernel of the cubin` must hold, but got "
            f"{entry!r}; its kernels are {kernels}. Pass one of these (compileiq_lab.measure.entries.resolve_entry "
            "turns a C++ name into one).")
    others = set(kernels) - {entry}
    key = _symbol_keys(symbols, headers, set(kernels))
    # what the global .nv.info says about other kernels: keyed by their symbols or by symbols inside their code
    other_text = {i for i, hd in enumerate(headers) if hd.name.startswith(".text.") and hd.name[6:] in others}
    other_syms = {i for i, s in enumerate(symbols) if (s.name in others and _is_entry(s)) or s.shndx in other_text}
    h = hashlib.sha256()
    sections: dict[str, int] = {}
    padding = 0
    for hd in sorted(headers, key=lambda x: (x.name, x.type, x.offset, x.size, x.flags)):
        name = hd.name
        if not name or not (name == ".nv.info" or _identity(name, hd.flags, kind)):
            continue
        owner = _PER_FUNCTION.match(name)
        if owner and owner.group(1) in others:
            continue
        body = data[hd.offset:hd.offset + hd.size] if hd.type != _SHT_NOBITS else b""
        hashed = body
        if name == ".nv.info":
            hashed = _nv_info(body, data, hd, key, drop=other_syms)
        elif name.startswith(".nv.info."):
            hashed = _nv_info(body, data, hd, key, drop=set())
        elif hd.type == _SHT_RELA:
            hashed = _rela(body, data, hd, key)
        size = hd.size if hashed is body else len(hashed)  # rewritten: the raw size counts what was left out
        h.update(_stable_section(name).encode() + b"\0" + struct.pack("<QQ", size, len(hashed)) + hashed)
        sections[name] = hd.size
        if name.startswith(".text."):
            padding += _padding(body)
    text = sum(v for k, v in sections.items() if k == ".text" or k.startswith(".text."))
    return BinaryInfo(h.hexdigest(), text, len(data), sections, padding)


def _symbol_keys(symbols: list[_Symbol], headers: list[_Header], kernels: set[str]) -> Callable[[int], bytes]:
    """A stable name for each symbol index: section symbols by their section, functions local to a kernel's
    ``.text`` (ptxas's per-kernel clones, numbered across the file) by section and offset, others by name."""
    kernel_text = {i for i, h in enumerate(headers) if h.name.startswith(".text.") and h.name[6:] in kernels}

    def key(index: int) -> bytes:
        if not 0 <= index < len(symbols):
            return b"#%d" % index
        s = symbols[index]
        sec = headers[s.shndx].name if 0 < s.shndx < len(headers) else ""
        if s.type == _STT_SECTION:
            return b"section:" + _stable_section(sec).encode()
        if s.shndx in kernel_text and s.name not in kernels:
            return f"{_stable_section(sec)}+{s.value:#x}".encode()
        return stable_symbol(s.name).encode()

    return key


#: ``.nv.info`` attributes whose value starts with a symbol index: PARAM_CBANK, FRAME_SIZE, MIN_STACK_SIZE,
#: MAX_STACK_SIZE, REGCOUNT; and EXTERNS, a list of symbol indices.
_INFO_SYMBOL_FIRST = {0x0A, 0x11, 0x12, 0x23, 0x2F}
_INFO_SYMBOL_LIST = {0x0F}
_EIFMT_SVAL = 4


def _nv_info(body: bytes, data: bytes, hd: _Header, key: Callable[[int], bytes], drop: set[int]) -> bytes:
    """An ``.nv.info`` section with symbol indices replaced by ``key`` and the records about ``drop`` left out;
    the bytes unchanged if they do not parse as info records."""
    _, end = _end(data)
    out, i = [], 0
    while i < len(body):
        if i + 4 > len(body):
            return body
        fmt, attr = body[i], body[i + 1]
        if fmt != _EIFMT_SVAL:
            out.append(body[i:i + 4])
            i += 4
            continue
        size, = struct.unpack_from(end + "H", body, i + 2)
        if i + 4 + size > len(body):
            return body
        value = body[i + 4:i + 4 + size]
        i += 4 + size
        if attr in _INFO_SYMBOL_FIRST and size >= 4:
            sym, = struct.unpack_from(end + "I", value)
            if sym in drop:
                continue
            value = key(sym) + b"\0" + value[4:]
        elif attr in _INFO_SYMBOL_LIST and size % 4 == 0:
            value = b"".join(key(s) + b"\0" for s in _u32s(value, end))
        out.append(bytes((fmt, attr)) + struct.pack("<I", len(value)) + value)
    return b"".join(out)


def _u32s(value: bytes, end: str) -> Iterable[int]:
    return struct.unpack_from(end + "I" * (len(value) // 4), value)


def _rela(body: bytes, data: bytes, hd: _Header, key: Callable[[int], bytes]) -> bytes:
    """A 64-bit RELA section with each symbol index replaced by ``key``; the bytes unchanged otherwise."""
    is64, end = _end(data)
    if not is64 or hd.entsize not in (0, 24) or len(body) % 24:
        return body
    out = []
    for off in range(0, len(body), 24):
        r_offset, r_info, r_addend = struct.unpack_from(end + "QQq", body, off)
        out.append(struct.pack("<QIq", r_offset, r_info & 0xFFFFFFFF, r_addend) + key(r_info >> 32) + b"\0")
    return b"".join(out)
