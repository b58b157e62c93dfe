"""SASS instruction mix of a cubin by opcode class, from ``nvdisasm`` (the CUDA toolkit's, or its PyPI wheel's)."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

from compileiq_lab.exceptions import ConfigurationError
from compileiq_lab.toolchain.tools import PROBE_TIMEOUT_S, find_tool, first_line, run_tool

__all__ = ["OPCODE_CLASSES", "disassembler_reason", "instruction_mix", "opcode_class", "opcodes"]

#: The classes of ``instruction_mix``, in display order.
OPCODE_CLASSES = ("memory", "fma/alu", "control", "conversion", "barrier", "other")
#: Installing a disassembler: the wheels from 13.2 on read the cubins of older toolkits too.
INSTALL_HINT = "install the CUDA toolkit's nvdisasm, or `pip install 'compileiq-lab[sass]'` (nvidia-cuda-nvdisasm)"

_MEMORY = re.compile(r"^(U?LD(?!GDEPBAR)\w*|ST\w*|ATOM\w*|RED(?!UX)\w*|CCTL\w*|TEX\w*|TLD\w*|TXQ|TXD|TMML|SU\w*|"
                     r"UBLKCP|UBLKRED|UBLKPF|UTMA\w*|LDGSTS|LDSM|STSM)$")
_CONTROL = re.compile(r"^(BRA|BRX|BRXU|JMP|JMX|JMXU|CALL|RET|EXIT|PREEXIT|BSSY|BSYNC|WARPSYNC|YIELD|BPT|KILL|SSY|SYNC|"
                      r"BREAK|RTT|ACQBULK|ACQSHMINIT|ENDCOLLECTIVE)$")
_CONVERSION = re.compile(r"^(F2F|F2I|I2F|I2I|F2FP|I2FP|I2IP|FRND|F2IP|UF2F|UF2FP|UFRND|UI2F|UI2FP|UF2I|UI2I)$")
_BARRIER = re.compile(r"^(BAR|MEMBAR|DEPBAR|LDGDEPBAR|ERRBAR|CGAERRBAR|WARPGROUP|WARPGROUPSET|SYNCS|ARRIVES|FENCE|"
                      r"UCGABAR_\w+|CGABAR\w*|UTCBAR|B2R|R2B)$")
_OTHER = re.compile(r"^(S2R|CS2R|S2UR|R2UR|SHFL|VOTE|VOTEU|MATCH|REDUX|ELECT|NANOSLEEP|PMTRIG|SETCTAID|SETLMEMBASE|"
                    r"GETLMEMBASE|LEPC|UGETNEXTWORKID)$")
_INSTRUCTION = re.compile(r"/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P\w+\s+)?(([A-Z][A-Z0-9_]*)[\w.]*)")
#: The branch-to-itself after a kernel's last EXIT: a guard, never executed (sass_instructions leaves it out too).
_SELF_LOOP = re.compile(r"^(\.L_x_\d+):\s*\n\s*/\*[0-9a-f]+\*/\s+BRA\s+`\(\1\)", re.M)
_SECTION = re.compile(r"^\s*\.section\s+\.text\.([^,\s]+)", re.M)


def opcode_class(opcode: str) -> str:
    """The class of a SASS opcode (modifiers stripped: ``IMAD.WIDE`` is ``IMAD``): "memory" (global, shared, local,
    constant, texture loads and stores, atomics), "control" (branches, calls, exit, convergence), "conversion"
    (between number formats), "barrier" (block and memory barriers, async-copy commits and waits), "other"
    (special registers, warp-wide shuffles, votes, matches and reductions) and "fma/alu" (every arithmetic,
    logic, predicate, compare, move and matrix op)."""
    op = opcode.split(".", 1)[0]
    for name, pattern in (("memory", _MEMORY), ("control", _CONTROL), ("conversion", _CONVERSION),
                          ("barrier", _BARRIER), ("other", _OTHER)):
        if pattern.match(op):
            return name
    return "fma/alu"


def disassembler_reason() -> str | None:
    """Why no SASS can be read here (no nvdisasm), or None."""
    try:
        find_tool("nvdisasm")
    except ConfigurationError:
        return f"nvdisasm is not installed: {INSTALL_HINT}"
    return None


def opcodes(cubin: str | Path, kernel: str | None = None, modifiers: bool = False) -> Counter[str]:
    """Opcode counts of a cubin's code, or of one kernel's section (``kernel``: its symbol), with the modifiers
    stripped (``LDG``) or, with ``modifiers``, kept (``LDG.E.CONSTANT``, ``LDG.E.STRONG.GPU``).
    NOPs and the guard branch after the last EXIT are left out: padding, never executed.

    Raises:
        ConfigurationError: nvdisasm is missing or fails, or the kernel is not in the cubin.
    """
    try:
        exe = find_tool("nvdisasm")
    except ConfigurationError as exc:
        raise ConfigurationError(f"reading SASS needs nvdisasm: {INSTALL_HINT}") from exc
    res = run_tool([exe, "-c", str(cubin)], PROBE_TIMEOUT_S * 4)
    if res.timed_out or res.returncode != 0:
        raise ConfigurationError(f"nvdisasm could not read {Path(cubin).name}: {first_line(res.stderr or res.stdout)}")
    text = res.stdout
    if kernel is not None:
        starts = [(m.start(), m.group(1)) for m in _SECTION.finditer(text)]
        found = [i for i, (_, name) in enumerate(starts) if name == kernel]
        if not found:
            raise ConfigurationError(f"kernel {kernel!r} is not in {Path(cubin).name}; it holds "
                                     f"{', '.join(name for _, name in starts) or 'no code'}")
        i = found[0]
        text = text[starts[i][0]:starts[i + 1][0] if i + 1 < len(starts) else len(text)]
    counts = Counter(m.group(1 if modifiers else 2) for m in _INSTRUCTION.finditer(text))
    counts.pop("NOP", None)
    guards = len(_SELF_LOOP.findall(text))
    if guards:  # a plain BRA, with or without modifiers
        counts["BRA"] -= guards
        if counts["BRA"] <= 0:
            del counts["BRA"]
    return counts


def instruction_mix(cubin: str | Path, kernel: str | None = None) -> dict[str, int]:
    """Instructions per opcode class (``OPCODE_CLASSES`` order, every class present) of a cubin or one kernel."""
    mix = dict.fromkeys(OPCODE_CLASSES, 0)
    for op, n in opcodes(cubin, kernel).items():
        mix[opcode_class(op)] += n
    return mix
