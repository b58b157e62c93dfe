"""The device part of a PyTorch extension's .cu file: its binding (torch, ATen, c10, pybind11) blanked out, every
other character where it was."""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["DevicePart", "device_part"]

#: An include of a Python framework's C++ API: a file with one holds host code the tuner never runs.
_BINDING_INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*[<"](?:torch/|ATen/|c10/|pybind11/|caffe2/|Python\.h)',
                              re.MULTILINE)
#: What binding code says: the frameworks' namespaces and macros (TORCH_CHECK, PYBIND11_MODULE, AT_DISPATCH_...).
_BINDING_WORDS = (r"\b(?:torch|pybind11|c10|caffe2|PyObject)\b|\b(?:at|py)::|\bTORCH_\w+|\bPYBIND11_\w+|"
                  r"\bAT_(?:DISPATCH|ASSERT|ERROR|CHECK)\w*|\bC10_\w+")
_DEFINE = re.compile(r"#\s*define\s+([A-Za-z_]\w*)")
_SCOPE = re.compile(r"(?:\bnamespace\b[^{;]*|\bextern\s*\"C\"\s*)\Z")
_CALL = re.compile(r"[A-Za-z_]\w*\s*\(.*\)\Z", re.DOTALL)


@dataclass(frozen=True)
class DevicePart:
    """A source with its binding left out.

    Attributes:
        text: The source, each character of the binding replaced by a space (newlines kept): lines and columns
            are the original's, so a compiler's messages point at the user's file.
        lines: The (first, last) lines (1-based) left out, in order.
    """

    text: str
    lines: tuple[tuple[int, int], ...]


#: Comments and string and character literals (an unterminated one ends with its line), as ``templates`` blanks them
#: before it scans a source.
_NOISE = re.compile(r"""//[^\n]*|/\*.*?(?:\*/|\Z)|"(?:\\.|[^"\\\n])*(?P<close>"?)|'(?:\\.|[^'\\\n])*'?""", re.S)


def _blank(text: str) -> str:
    return re.sub(r"[^\n]", " ", text)


def _masked(text: str) -> str:
    """``text`` with comments and string and character literals as spaces (newlines kept; a string keeps its quotes,
    an ``extern "C"``), so that braces and words are read as code only."""
    def blanked(m: re.Match[str]) -> str:
        found = m.group()
        if not found.startswith('"'):
            return _blank(found)
        closed = len(m.group("close"))
        return '"' + _blank(found[1:len(found) - closed]) + '"' * closed
    return _NOISE.sub(blanked, text)


def _units(code: str, text: str) -> list[tuple[int, int, str]]:
    """The top-level pieces of masked code: (start, end, kind), kind "pp" (a preprocessor line with its
    continuations), "scope" (a namespace or extern "C" opening or its closing brace, whose insides are pieces of
    their own) or "decl" (a declaration, a definition with its body, a macro call on its own line)."""
    units: list[tuple[int, int, str]] = []
    i, n, start, depth, paren, scopes = 0, len(code), 0, 0, 0, 0
    while i < n:
        c = code[i]
        if depth == 0 and paren == 0 and c == "#" and not code[start:i].strip():
            end = i
            while True:
                end = code.find("\n", end)
                if end < 0 or code[end - 1] != "\\":
                    break
                end += 1
            end = n if end < 0 else end
            units.append((i, end, "pp"))
            i = start = end
            continue
        if c == "(":
            paren += 1
        elif c == ")":
            paren = max(0, paren - 1)
        elif c == "{":
            if depth == 0 and _SCOPE.search(text[start:i].strip()):
                units.append((start, i + 1, "scope"))
                scopes, start = scopes + 1, i + 1
            else:
                depth += 1
        elif c == "}":
            if depth > 0:
                depth -= 1
                if depth == 0 and paren == 0:
                    end = i + 1
                    rest = code[end:].lstrip(" \t")
                    if rest.startswith(";"):  # struct S { ... };
                        end = n - len(rest) + 1
                    units.append((start, end, "decl"))
                    i = start = end
                    continue
            elif scopes:
                if code[start:i].strip():
                    units.append((start, i, "decl"))
                units.append((i, i + 1, "scope"))
                scopes, start = scopes - 1, i + 1
        elif c == ";" and depth == 0 and paren == 0:
            units.append((start, i + 1, "decl"))
            start = i + 1
        elif c == "\n" and depth == 0 and paren == 0 and _CALL.fullmatch(code[start:i].strip()):
            units.append((start, i, "decl"))  # a macro call on its own line(s): TORCH_BINDING_RELU(f32, ...)
            start = i
        i += 1
    if code[start:].strip():
        units.append((start, n, "decl"))
    return units


def device_part(text: str) -> DevicePart | None:
    """The source without its PyTorch (or pybind11, Python C API) binding, or None for a source that includes no
    such header.

    Left out: the includes of torch, ATen, c10, pybind11 and Python.h; every macro defined with their names (and
    then every macro defined with those); every top-level declaration or definition that is not a ``__global__``
    kernel and names them (host wrappers taking ``torch::Tensor``, ``PYBIND11_MODULE``, ``TORCH_LIBRARY``, a
    binding macro's calls). Kernels, device functions and host code without the framework stay. A kernel that names
    the framework itself (``at::Half``) stays too, and its compile says what is missing.
    """
    if not _BINDING_INCLUDE.search(text):
        return None
    code = _masked(text)
    units = _units(code, text)
    words = _BINDING_WORDS
    while True:  # a macro defined with binding words is a binding word
        pattern = re.compile(words)
        names = {m.group(1) for s, e, kind in units if kind == "pp" and pattern.search(code[s:e])
                 for m in [_DEFINE.match(code[s:e].strip())] if m}
        more = "|".join(rf"\b{re.escape(n)}\b" for n in sorted(names))
        grown = f"{_BINDING_WORDS}|{more}" if more else _BINDING_WORDS
        if grown == words:
            break
        words = grown
    pattern = re.compile(words)
    out = list(text)
    spans: list[tuple[int, int]] = []
    for s, e, kind in units:
        piece = code[s:e]
        if kind == "scope":
            continue
        binding = (_BINDING_INCLUDE.search(text[s:e]) is not None or pattern.search(piece) is not None) if \
            kind == "pp" else (pattern.search(piece) is not None and "__global__" not in piece)
        if not binding:
            continue
        for k in range(s, e):
            out[k] = "\n" if text[k] == "\n" else " "
        first = text.count("\n", 0, s + len(piece) - len(piece.lstrip())) + 1
        last = text.count("\n", 0, e - (len(piece) - len(piece.rstrip()))) + 1
        spans.append((first, last))
    merged: list[tuple[int, int]] = []
    for first, last in spans:
        if merged and first <= merged[-1][1] + 1:
            merged[-1] = (merged[-1][0], max(last, merged[-1][1]))
        else:
            merged.append((first, last))
    return DevicePart("".join(out), tuple(merged))
