"""Demangled C++ kernel names: their parts, the spellings a user may write for one, and a short entry that picks one
among a module's kernels."""

from __future__ import annotations

import itertools
import re
from collections.abc import Sequence

from compileiq_lab.measure.templates import top_level
from compileiq_lab.measure.unitnames import stable_symbol

__all__ = ["LONG_NAME", "REGEX_PREFIX", "entry_pattern", "matching", "spellings", "split_params", "squash",
           "strip_templates"]


def split_params(readable: str) -> tuple[str, str | None]:
    """A demangled signature split before its parameter list (the last top-level parentheses, kept with them):
    ``("void k<float>", "(float*, int)")``; (``readable``, None) for a name without one."""
    if readable.endswith(")"):
        depth = 0
        for i in range(len(readable) - 1, -1, -1):
            depth += {")": 1, "(": -1}.get(readable[i], 0)
            if depth == 0:
                return readable[:i], readable[i:]
    return readable, None


def strip_templates(name: str) -> str:
    """``ns::kern<float, 4>`` -> ``ns::kern``: template argument lists removed."""
    out, depth = [], 0
    for c in name:
        depth += c == "<"
        if depth == 0:
            out.append(c)
        depth -= c == ">" and depth > 0
    return "".join(out)


#: An integer literal's suffix, as a demangler writes template arguments (``512u``) and a user may not (``512``).
_INT_SUFFIX = re.compile(r"\b(\d+)[uUlL]+\b")


def squash(text: str) -> str:
    """A spelling compared without whitespace and integer suffixes (``reduce6<float,512,true>`` reads as the
    demangled ``reduce6<float, 512u, true>``)."""
    return _INT_SUFFIX.sub(r"\1", "".join(text.split()))


def spellings(readable: str) -> set[str]:
    """The ways a user may write a demangled kernel name, whitespace removed: the full signature, without its
    return type, the qualified name with and without template arguments, and its last component."""
    forms = {readable}
    readable, found = split_params(readable)
    params = found or ""
    qualified = top_level(readable.strip(), " ")[-1]
    bare = strip_templates(qualified)
    forms |= {qualified + params, qualified, bare, top_level(qualified, "::")[-1], top_level(bare, "::")[-1]}
    return {squash(f) for f in forms if f}


#: An entry written as Nsight Compute's ``--kernel-name regex:...``: a Python regular expression searched for in each
#: kernel's demangled name, in that name without qualifiers (``tuple<int, C<1> >`` for ``cute::tuple<int, cute::C<1>
#: >``) and in its mangled symbol; it must find exactly one kernel.
REGEX_PREFIX = "regex:"
#: A kernel whose demangled name is longer than this (a CuTe or CUTLASS instantiation runs to thousands of characters)
#: is listed by its first characters and a short entry that picks it alone (``entry_pattern``).
LONG_NAME = 160
#: Characters a regular expression reads as operators: a suggested pattern's literal parts hold none of them, so it
#: reads the same in a shell's single quotes, a TOML string and an ACF.
_REGEX_SPECIAL = frozenset(".^$*+?{}[]|()\\")
#: Where a literal part of a suggested pattern may start: the name's start, or after one of these.
_TOKEN_START = frozenset(" <,(:")
#: Where a literal part of a suggested pattern is extended to: before one of these, or the name's end.
_TOKEN_END = frozenset(" <>,()")
#: The qualifiers of a demangled name (``cute::``, ``a::b::``, ``(anonymous namespace)::``).
_QUALIFIERS = re.compile(r"(?:\(anonymous namespace\)::|\b[A-Za-z_]\w*::)+")


def _unqualified(name: str) -> str:
    """A demangled name without its namespace and class qualifiers, as a file that uses them may write its types
    (``void gemm<cute::C<1> >(float*)`` -> ``void gemm<C<1> >(float*)``)."""
    return _QUALIFIERS.sub("", name)


def _forms(kernel: str, readable: dict[str, str]) -> tuple[str, ...]:
    """What a ``regex:`` entry is searched in: the kernel's demangled name, that name without qualifiers, and its
    mangled symbol."""
    name = readable.get(kernel, kernel)
    return name, _unqualified(name), kernel


def matching(pattern: re.Pattern[str], kernels: Sequence[str], readable: dict[str, str]) -> list[str]:
    """The kernels in one of whose ``_forms`` ``pattern`` is found."""
    return [k for k in kernels if any(pattern.search(f) for f in _forms(k, readable))]


def _unique_part(name: str, others: Sequence[str]) -> str | None:
    """The shortest part of ``name`` found in none of ``others``: it starts at a token, ends at one, and holds no
    regular-expression operator (None where no such part exists)."""
    best: str | None = None
    stops, stop = [0] * len(name), len(name)  # stops[i]: where the first operator at or after i is
    for i in range(len(name) - 1, -1, -1):
        stop = i if name[i] in _REGEX_SPECIAL else stop
        stops[i] = stop
    for i in range(len(name)):
        if (i and name[i - 1] not in _TOKEN_START) or name[i] in _REGEX_SPECIAL or name[i] == " ":
            continue
        limit = stops[i]
        if any(name[i:limit] in o for o in others):
            continue  # not unique even as long as it can be
        lo, hi = i + 1, limit  # the shortest unique end: uniqueness only grows with the length
        while lo < hi:
            mid = (lo + hi) // 2
            if any(name[i:mid] in o for o in others):
                lo = mid + 1
            else:
                hi = mid
        end = lo
        while end < limit and (name[end] not in _TOKEN_END or name[end - 1] == " "):
            end += 1  # to the end of a token (and never after a space)
        part = name[i:end]
        if best is None or len(part) < len(best):
            best = part
    return best


def _arguments(name: str) -> list[list[str]]:
    """The template arguments and parameter types of a demangled name, one list per bracket (nested ones too:
    ``cute::C<1>`` and the ``cute::tuple<int, cute::C<1> >`` around it), each with its neighbours joined to it
    (``int, cute::C<1>``), as written there."""
    lists: list[list[tuple[int, int]]] = []
    found: list[list[str]] = []
    starts: list[int] = []
    for i, c in enumerate(name):
        if c in "<(":
            starts.append(i + 1)
            lists.append([])
        elif c in ",>)" and starts:
            lists[-1].append((starts[-1], i))
            if c == ",":
                starts[-1] = i + 1
                continue
            starts.pop()
            spans = lists.pop()
            found.append([name[a:b].strip() for a, b in spans])
            found.append([name[a:d].strip() for (a, _), (_, d) in itertools.pairwise(spans)])
    return [[a for a in group if a] for group in found]


def entry_pattern(kernel: str, kernels: Sequence[str], readable: dict[str, str]) -> str:
    """A short entry that names ``kernel`` alone among ``kernels``: its C++ name where no other kernel has it; else
    ``regex:`` with the kernel's name and the shortest template argument (else two neighbouring ones, else a part) of
    its demangled name without qualifiers that no other kernel has (``regex:gemm_device.*tuple<int, C<1> >`` for a
    CuTe GEMM's ``cute::tuple<int, cute::C<1> >``), written without regular-expression operators but ``.*``; else
    the mangled symbol without the parts nvcc makes unique per compile (``unitnames.stable_symbol``).

    Args:
        kernel: One of ``kernels`` (mangled).
        kernels: The module's kernels.
        readable: Demangled names by kernel (``entries.demangle``'s).
    """
    full = readable.get(kernel, kernel)
    cpp_name = strip_templates(top_level(split_params(full)[0].strip(), " ")[-1])
    for plain in (top_level(cpp_name, "::")[-1], cpp_name):  # the C++ name, where it names this kernel alone
        if plain and [k for k in kernels if squash(plain) in spellings(readable.get(k, k))] == [kernel]:
            return plain
    name = _unqualified(full)
    others = [f for k in kernels if k != kernel for f in _forms(k, readable)]

    def unique(part: str) -> bool:
        return (re.search("[A-Za-z_]", part) is not None and not _REGEX_SPECIAL.intersection(part)
                and not any(part in o for o in others))
    groups = _arguments(name)  # a whole type (C<129>, not 129) reads better than a piece of one
    single = [a for g in groups[0::2] for a in g if unique(a)]
    pairs = [a for g in groups[1::2] for a in g if unique(a)]
    part = min(single or pairs, key=len) if single or pairs else _unique_part(name, others)
    if part is None or len(part) > LONG_NAME:  # a part as long as a long name: the symbol reads no worse
        return stable_symbol(kernel)
    base = strip_templates(top_level(split_params(name)[0].strip(), " ")[-1])
    candidates = [f"{base}.*{part}", part] if base and base not in part and name.find(part) > name.find(base) >= 0 \
        else [part]
    for text in candidates:
        if matching(re.compile(text), kernels, readable) == [kernel]:
            return REGEX_PREFIX + text
    return stable_symbol(kernel)
