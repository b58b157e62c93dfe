"""Kernels of a PTX or cubin file: their entry names, readable (demangled) names, and which one a user's name means."""

from __future__ import annotations

import logging
import os
import re
import shutil
import subprocess
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import NamedTuple

from compileiq_lab.exceptions import ConfigurationError
from compileiq_lab.measure import cppnames
from compileiq_lab.measure.binary import _is_entry, _symbols
from compileiq_lab.measure.cppnames import (
    LONG_NAME,
    REGEX_PREFIX,
    matching,
    spellings,
    split_params,
    squash,
    strip_templates,
)
from compileiq_lab.measure.templates import instantiation_hint, top_level
from compileiq_lab.measure.unitnames import stable_symbol
from compileiq_lab.toolchain.tools import find_tool, run_tool

__all__ = ["REGEX_PREFIX", "PtxHeader", "cpp_param_types", "cubin_entries", "demangle", "entry_pattern",
           "kernel_listing", "ptx_entries", "ptx_entry_threads", "ptx_header", "ptx_param_types", "resolve_entry"]

log = logging.getLogger(__name__)

_DEMANGLE_TIMEOUT_S = 30.0
#: Quoted strings (``.file 1 "a//b.cu"``), block and line comments: blanked before PTX is searched.
_PTX_NOISE = re.compile(r'"[^"\n]*"|/\*.*?\*/|//[^\n]*', re.S)
#: ``.entry <name>``, however the directives before it and the parameter list after it are laid out.
_PTX_ENTRY = re.compile(r"(?<![\w.$%])\.entry\s+([A-Za-z_$%][\w$%]*)")
_IDENT = re.compile(r"[A-Za-z_]\w*\Z")
_PTX_VERSION = re.compile(r"(?m)^\s*\.version\s+(\d+\.\d+)\b")
_PTX_TARGET = re.compile(r"(?m)^\s*\.target\s+([\w]+(?:\s*,\s*\w+)*)")


class PtxHeader(NamedTuple):
    """A PTX module's ``.version`` (the PTX ISA, e.g. "9.0") and ``.target`` (e.g. "sm_90a"; options such as
    ``debug`` after it are dropped); None where the file has none."""

    version: str | None
    target: str | None


def ptx_header(ptx_text: str) -> PtxHeader:
    """The ``.version`` and ``.target`` directives of a PTX module (comments ignored)."""
    text = _PTX_NOISE.sub(lambda m: '""' if m.group().startswith('"') else " ", ptx_text[:65536])
    version, target = _PTX_VERSION.search(text), _PTX_TARGET.search(text)
    first = target.group(1).split(",")[0].strip() if target else None
    return PtxHeader(version.group(1) if version else None, first)


def ptx_entries(ptx_text: str) -> list[str]:
    """The kernels (``.entry`` directives) a PTX file declares, as written there (mangled unless ``extern "C"``).

    Handles ``.visible .entry name(`` and ``.entry name (`` with the parameters on the same or following
    lines; ``.func`` device functions and anything inside comments are not kernels.
    """
    text = _PTX_NOISE.sub(lambda m: '""' if m.group().startswith('"') else " ", ptx_text)
    return list(dict.fromkeys(m.group(1) for m in _PTX_ENTRY.finditer(text)))


#: One parameter of an entry: ``.param .u64 name`` (newer PTX: ``.param .u64 .ptr .global .align 4 name``), a
#: struct passed by value ``.param .align 8 .b8 name[16]``.
_PTX_PARAM = re.compile(r"\.param\s+(?:\.align\s+\d+\s+)?\.(\w+)(?:\s+\.ptr(?:\s+\.\w+)*?(?:\s+\.align\s+\d+)?)?"
                        r"\s+[A-Za-z_$%][\w$%]*(\[\d+\])?")


def _entry_head(ptx_text: str, entry: str) -> tuple[str, str] | None:
    """An entry's parameter list (without its parentheses; "" for none) and what follows it up to its body (its
    performance-tuning directives), comments left out; None when the module declares no such entry."""
    text = _PTX_NOISE.sub(lambda m: '""' if m.group().startswith('"') else " ", ptx_text)
    for m in _PTX_ENTRY.finditer(text):
        if m.group(1) != entry:
            continue
        rest = text[m.end():]
        body = rest.find("{")
        head = rest if body < 0 else rest[:body]
        if not head.lstrip().startswith("("):
            return "", head  # an entry without parameters
        start = head.find("(")
        end = head.find(")", start)
        return head[start + 1:end], head[end + 1:]
    return None


def ptx_param_types(ptx_text: str, entry: str) -> list[str] | None:
    """The PTX types of an entry's parameters in order (``u64``, ``u32``, ``f32`` ...; a struct by value is ``b8[N]``),
    or None when the module declares no such entry."""
    head = _entry_head(ptx_text, entry)
    return None if head is None else [t + (n or "") for t, n in _PTX_PARAM.findall(head[0])]


#: An entry's directive on its threads per block (``__launch_bounds__`` writes ``.maxntid``): 1 to 3 extents.
_PTX_NTID = re.compile(r"\.(maxntid|reqntid)\s+(\d+)(?:\s*,\s*(\d+))?(?:\s*,\s*(\d+))?")


def ptx_entry_threads(ptx_text: str, entry: str) -> dict[str, tuple[int, int, int]]:
    """An entry's ``.maxntid`` (the most threads per block it may be launched with: the product of the extents) and
    ``.reqntid`` (the block it must be launched with), as (x, y, z) with 1 for an extent not written; {} for an entry
    with neither, or none of that name."""
    head = _entry_head(ptx_text, entry)
    if head is None:
        return {}
    out: dict[str, tuple[int, int, int]] = {}
    for m in _PTX_NTID.finditer(head[1]):
        x, y, z = (int(v) if v else 1 for v in m.group(2, 3, 4))
        out[m.group(1)] = (x, y, z)
    return out


def cpp_param_types(readable: str) -> list[str] | None:
    """The C++ parameter types of a kernel's demangled signature (``demangle``'s), as the demangler writes them
    (``['float const*', 'unsigned long']``), or None for a name without a parameter list (an ``extern "C"`` kernel's,
    or one no demangler read)."""
    _, params = split_params(readable)
    if params is None:
        return None
    inner = params[1:-1].strip()
    return [] if inner in ("", "void") else [t.strip() for t in top_level(inner, ",")]


def cubin_entries(path: str | Path) -> list[str]:
    """The kernels of a cubin, from its ELF symbol table: FUNC symbols with ``STO_CUDA_ENTRY`` in ``st_other``.

    The ``.nv.info.<name>`` sections are not used: with ``-rdc`` a device function compiled on its own has one
    too. Names are mangled as in the symbol table, in its order.

    Raises:
        ValueError: If the file is not ELF.
    """
    return list(dict.fromkeys(s.name for s in _symbols(Path(path).read_bytes()) if _is_entry(s)))


def _demanglers() -> list[str]:
    """The demanglers to try, best first: cu++filt (PATH, then beside nvcc), then c++filt."""
    tools = []
    cu = shutil.which("cu++filt")
    if cu is None:
        try:
            nvcc: Path | None = Path(find_tool("nvcc"))
        except ConfigurationError:
            nvcc = None
        for folder in dict.fromkeys((nvcc.parent, nvcc.resolve().parent) if nvcc else ()):
            candidate = folder / "cu++filt"
            if candidate.is_file() and os.access(candidate, os.X_OK):
                cu = str(candidate)
                break
    if cu is not None:
        tools.append(cu)
    cxx = shutil.which("c++filt")
    if cxx is not None:
        tools.append(cxx)
    return tools


def demangle(names: Iterable[str]) -> dict[str, str]:
    """Readable names of mangled symbols (``_Z...``), by name; others, and everything when no demangler works,
    map to themselves.

    One call of cu++filt (from the CUDA toolkit, found on PATH or beside nvcc), else of c++filt, for all names; the
    names a demangler leaves as they are go to the next one. GNU c++filt is asked without its recursion limit
    (``--no-recurse-limit``), past which it leaves a deeply nested name (a CUTLASS 2.x kernel's) mangled.
    Never raises: a missing, failing or misbehaving demangler leaves the names as they are.
    """
    out = {n: n for n in names}
    mangled = [n for n in out if n.startswith("_Z")]
    for tool in _demanglers():
        if not mangled:
            break
        variants = [[tool, "--no-recurse-limit"], [tool]] if Path(tool).name == "c++filt" else [[tool]]
        for argv in variants:
            try:
                res = run_tool([*argv, *mangled], _DEMANGLE_TIMEOUT_S)
            except (OSError, ValueError, subprocess.SubprocessError) as exc:
                log.debug("demangler %s could not run: %s", tool, exc)
                break
            lines = res.stdout.splitlines()
            if res.returncode == 0 and len(lines) == len(mangled):
                out.update((n, line.strip()) for n, line in zip(mangled, lines) if line.strip())
                mangled = [n for n in mangled if out[n] == n]  # left as they were: the next demangler's
                break
            log.debug("demangler %s gave %d lines for %d names (exit %s); trying the next", " ".join(argv),
                      len(lines), len(mangled), res.returncode)
    return out


def _source_name(mangled: str) -> str | None:
    """The unqualified name of the function an Itanium-mangled symbol names (``kern`` in ``_Z4kernPf``, in
    ``_Z4kernIfEvPT_`` and in ``_ZN2ns4kernEPfi``), or None when the symbol does not have that form."""
    if not mangled.startswith("_Z"):
        return None
    i = 3 if mangled.startswith("_ZL") else 2
    nested = mangled.startswith("N", i)
    if nested:
        i += 1
        while i < len(mangled) and mangled[i] in "rVKRO":  # cv- and ref-qualifiers
            i += 1
    last = None
    while i < len(mangled):
        if mangled.startswith("St", i) or mangled[i] == "L":  # std::, internal linkage of a component
            i += 2 if mangled[i] == "S" else 1
            continue
        length = re.match(r"\d+", mangled[i:])
        if length is None:
            break
        start = i + len(length.group())
        last, i = mangled[start:start + int(length.group())], start + int(length.group())
        while (tag := re.match(r"B(\d+)", mangled[i:])) is not None:  # ABI tags: B5cxx11
            i += len(tag.group()) + int(tag.group(1))
        if not nested:
            break
    if nested and not (i < len(mangled) and mangled[i] in "IE"):
        return None
    return last or None


#: Namespaces of the CUDA libraries whose kernels a user's file may instantiate (CUB, Thrust, libcu++, cuBLASLt...).
_LIBRARIES = ("cub::", "thrust::", "cuda::", "cute::", "cutlass::", "CUB_", "THRUST_")


#: A message lists at most this many kernels, in at most about this many characters (a kept error message is cut at
#: 1,500, ``MESSAGE_CHARS``; one cut in the middle of the list would name none of them whole).
_LISTED, _LISTING_CHARS = 12, 900
#: How much of a long name a message shows.
_HEAD = 72


def entry_pattern(kernel: str, kernels: Sequence[str], readable: dict[str, str] | None = None) -> str:
    """``cppnames.entry_pattern``, the names demangled here when not given."""
    return cppnames.entry_pattern(kernel, kernels, readable if readable is not None else demangle(kernels))


def _listing(kernels: Sequence[str], readable: dict[str, str], among: Sequence[str] | None = None) -> str:
    """The kernels for a message, demangled with the mangled name in parentheses (a long name by its head and the
    ``regex:`` entry that picks it among ``among``, by default ``kernels``): the file's own first, then those of a
    library (``cub::``, ``thrust::``...), at most ``_LISTED`` of them in about ``_LISTING_CHARS``."""
    def library(k: str) -> bool:
        name = top_level(readable[k].strip(), " ")[-1].lstrip("(")
        return name.startswith(_LIBRARIES)

    def shown(k: str) -> str:
        name = readable[k]
        if len(name) > LONG_NAME:
            return (f"{name[:_HEAD].rstrip()}... ({len(name):,} characters; entry "
                    f"{entry_pattern(k, among if among is not None else kernels, readable)})")
        return f"{name} ({k})" if name != k else k
    ordered = sorted(kernels, key=library)  # (stable: each group in the module's order)
    listed: list[str] = []
    for k in ordered[:_LISTED]:
        item = shown(k)
        if listed and sum(map(len, listed)) + len(item) > _LISTING_CHARS:
            break
        listed.append(item)
    more = len(ordered) - len(listed)
    return "; ".join(listed) + (f"; and {more} more" if more else "")


def kernel_listing(kernels: Sequence[str]) -> str:
    """The kernels of a module for a message: demangled, the file's own before a library's, at most twelve; a long
    name (a CuTe instantiation's) by its head and the ``regex:`` entry that picks it."""
    return _listing(list(dict.fromkeys(kernels)), demangle(kernels))


def _resolve_pattern(name: str, kernels: Sequence[str], who: str) -> str:
    """The kernel a ``regex:`` entry finds (see ``REGEX_PREFIX``)."""
    text = name[len(REGEX_PREFIX):]
    try:
        pattern = re.compile(text)
    except re.error as exc:
        raise ConfigurationError(
            f"{who}: `the text after regex: is a regular expression (Python's re)` must hold, but got {text!r}: "
            f"{exc}. Put a backslash before a ( ) [ ] * + ? or . meant literally, or pass a name the run lists"
        ) from exc
    readable = demangle(kernels)
    found = matching(pattern, kernels, readable)
    if len(found) == 1:
        return found[0]
    rule = "the regex: entry is found in exactly one kernel's name (demangled, without qualifiers, or mangled)"
    if not found:
        raise ConfigurationError(f"{who}: `{rule}` must hold, but {text!r} is found in none; the kernels are: "
                                 f"{_listing(kernels, readable)}. Pass one of these.")
    raise ConfigurationError(f"{who}: `{rule}` must hold, but {text!r} is found in {len(found)}: "
                             f"{_listing(found, readable, kernels)}. Pass one of these.")


def resolve_entry(name: str, entries: Sequence[str], where: str = "", source: str | Path | None = None) -> str:
    """The mangled entry (one of ``entries``) that a user's kernel name means.

    An exact match (a mangled symbol, or the name of an ``extern "C"`` kernel) wins, then the one kernel whose symbol
    differs only in the parts nvcc makes unique per compile (``unitnames.stable_symbol``: an anonymous namespace's
    hashes of the file's path, so a symbol recorded elsewhere or by an earlier compile still names it); else a plain
    C++ name
    matches the kernels whose Itanium source name it is (``kern`` matches ``_Z4kernPf``, the instantiations
    ``_Z4kernIfEvPT_`` and ``_ZN2ns4kernEPfi``), and a demangled spelling (``ns::kern``, ``reduce6<float, 256>``,
    a full signature) the kernels whose demangled name reads so (whitespace ignored). ``regex:PATTERN`` (Nsight
    Compute's form) names the one kernel in whose demangled name, that name without qualifiers, or mangled symbol
    the pattern is found: a CuTe instantiation's name runs to thousands of characters, and the messages give each
    long name a short entry.

    Args:
        name: The entry as the user wrote it.
        entries: The kernels of the module (``ptx_entries`` or ``cubin_entries``).
        where: The module's name, for messages.
        source: The CUDA source the module was built from: where no kernel matches, the message gives the line that
            instantiates a template kernel of that name (or, in a module of no kernel, of every template kernel).

    Raises:
        ConfigurationError: No kernel matches (the message lists them all, demangled with the mangled name in
            parentheses, a long name by a short entry that picks it, ``entry_pattern``), several do (overloads, template
            instantiations: the message lists them), or a ``regex:`` entry does not compile.
    """
    kernels = list(dict.fromkeys(entries))
    if name in kernels:
        return name
    stable = stable_symbol(name)  # a symbol of another compile of the file: nvcc's per-compile parts differ
    same = [k for k in kernels if stable_symbol(k) == stable]
    if len(same) == 1:
        return same[0]
    who = f"{where}: entry" if where else "entry"
    if name.startswith(REGEX_PREFIX):
        return _resolve_pattern(name, kernels, who)
    plain = _IDENT.fullmatch(name) is not None
    matches = [k for k in kernels if plain and _source_name(k) == name]
    if len(matches) == 1:
        return matches[0]
    readable = demangle(kernels)
    want = squash(name)
    matches += [k for k in kernels if k not in matches and want in spellings(readable[k])]
    if len(matches) == 1:
        return matches[0]
    if not matches:
        bare = squash(strip_templates(name))
        named = [k for k in kernels if bare in spellings(readable[k])]  # another instantiation of the template
        if not kernels:
            hint = instantiation_hint(source, name) or ("A template __global__ kernel has code only once instantiated: "
                                                        "add one (`template __global__ void k<256>(float*);`)")
            raise ConfigurationError(
                f"{who}: `the entry names a kernel of the module` must hold, but got {name!r}, and the module holds "
                f"no kernel (no __global__ function, no PTX .entry). {hint}, and name it as the run then lists it")
        found = (f"the kernels of that name are: {_listing(named, readable, kernels)}" if named
                 else f"the kernels are: {_listing(kernels, readable)}")
        hint = "" if named else instantiation_hint(source, name, strict=True)
        raise ConfigurationError(
            f"{who}: `the entry names a kernel of the module (its C++ name, demangled signature or mangled symbol)` "
            f"must hold, but got {name!r}, and {found}. Pass one of these names (the mangled one always works"
            + ("; a long one by the entry listed" if any(len(readable[k]) > LONG_NAME for k in kernels) else "")
            + ")" + (f"; or, for the template: {hint}" if hint else "") + ".")
    first = readable[matches[0]]
    example = (entry_pattern(matches[0], kernels, readable) if len(first) > LONG_NAME else first)
    raise ConfigurationError(
        f"{who}: `the entry names exactly one kernel` must hold, but got {name!r}, which names {len(matches)} "
        f"(overloads or template instantiations): {_listing(matches, readable, kernels)}. Pass one of the mangled "
        f"names, the full demangled signature or a regex: entry found in one kernel's name alone (e.g. {example!r}).")
