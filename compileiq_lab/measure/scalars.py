"""A kernel's launch arguments checked and typed from its parameters: their PTX types (``.u32``, ``.u64``, ``.f32``
...) and, for a C++ kernel, the C++ types its mangled name carries (signedness, pointer or not, the pointee)."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

__all__ = ["POINTER_TYPES", "buffer_problem", "cpp_scalar", "launch_scalars", "scalar_problem", "typed_scalar"]

#: The PTX types a pointer (a buffer) is passed as.
POINTER_TYPES = ("u64", "s64", "b64")
#: What a PTX scalar type holds, as a user would write it (nvcc writes ``.u32`` for int as for unsigned, and ``.u64``
#: for a pointer as for a size_t).
_KINDS = {8: "an 8-bit integer (char, bool)", 16: "a 16-bit integer (short)", 32: "a 32-bit integer (int, unsigned)",
          64: "a pointer or a 64-bit integer (size_t, long long)"}
_INT = re.compile(r"[usb](8|16|32|64)$")
_FLOATS = ("f32", "f64")
#: C++ integer types as a demangler writes them: (bits, signed).
_CPP_INTS = {"bool": (1, False), "char": (8, True), "signed char": (8, True), "unsigned char": (8, False),
             "short": (16, True), "unsigned short": (16, False), "int": (32, True), "unsigned int": (32, False),
             "long": (64, True), "unsigned long": (64, False), "long long": (64, True),
             "unsigned long long": (64, False)}
_CPP_FLOATS = {"float": "f32", "double": "f64"}
#: The element types a buffer's dtype is as a pointer's pointee (as a demangler writes them); other pointees (a
#: vector type such as float4, a struct, a template parameter) are not checked.
_POINTEES = {"float16": {"__half", "half"}, "float32": {"float"}, "float64": {"double"},
             "int8": {"signed char", "char"}, "int16": {"short"}, "int32": {"int"}, "int64": {"long", "long long"},
             "uint8": {"unsigned char", "bool"}, "uint16": {"unsigned short"}, "uint32": {"unsigned int"},
             "uint64": {"unsigned long", "unsigned long long"}}
_KNOWN_POINTEES = set().union(*_POINTEES.values())
_QUALIFIERS = re.compile(r"\b(const|volatile|__restrict__|__restrict|restrict)\b")


def cpp_scalar(cpp: str) -> str:
    """A demangled parameter type without its qualifiers (``float const*`` -> ``float*``, ``int const`` -> ``int``)."""
    return " ".join(_QUALIFIERS.sub(" ", cpp).replace("*", " * ").split()).replace(" *", "*")


def scalar_problem(value: Any, ptx: str, cpp: str | None = None) -> str:
    """Why ``value`` (a ``[params]`` int or float) cannot be passed as a parameter of PTX type ``ptx`` (C++ type
    ``cpp`` where known), or "" when it can: an int to an integer parameter it fits (of its C++ type's signedness
    where known, else of either: nvcc declares both ``.u``), an int or float to a float or double. A pointer takes a
    buffer; a struct or ``__half`` by value (``.b8[N]``) and ``.f16`` are not supported."""
    plain = cpp_scalar(cpp) if cpp else None
    if plain is not None and plain.endswith("*"):
        return f"a buffer: it is a pointer ({cpp})"
    if plain is not None and plain in _CPP_INTS:
        bits, signed = _CPP_INTS[plain]
        low, high = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed else (0, (1 << bits) - 1)
        return _int_problem(value, str(cpp), low, high)
    if plain is not None and plain not in _CPP_FLOATS:
        return f"a parameter compileiq-lab can pass: ints and floats (this one is {cpp}, passed by value)"
    if ptx in _FLOATS:
        if type(value) not in (int, float) or not math.isfinite(value):
            return f"a finite number for a {'float' if ptx == 'f32' else 'double'} (.{ptx})"
        if ptx == "f32" and abs(value) > float(np.finfo(np.float32).max):
            return "a number within float's range (.f32)"
        return ""
    match = _INT.fullmatch(ptx)
    if match is None:
        what = "a struct or __half passed by value" if "[" in ptx else f"a .{ptx}"
        return f"a parameter compileiq-lab can pass: ints and floats (this one is {what})"
    bits = int(match.group(1))
    return _int_problem(value, f"{_KINDS[bits]} (.{ptx})", -(1 << (bits - 1)), (1 << bits) - 1)


def _int_problem(value: Any, what: str, low: int, high: int) -> str:
    """Why ``value`` is no int from ``low`` to ``high`` for a parameter described as ``what``, or ""."""
    if type(value) is not int:
        return f"an int for {what}"
    return "" if low <= value <= high else f"an int that fits {what}: {low} to {high}"


def buffer_problem(dtype: str, ptx: str, cpp: str | None = None) -> str:
    """Why a buffer of ``dtype`` cannot go to a parameter of PTX type ``ptx`` (C++ type ``cpp`` where known), or "":
    it goes to a pointer, and where the pointer's element type is a plain number, to one of the buffer's dtype."""
    plain = cpp_scalar(cpp) if cpp else None
    if plain is None:
        return "" if ptx in POINTER_TYPES else f"a pointer, but it is .{ptx}"
    if not plain.endswith("*"):
        return f"a pointer, but it is {cpp}"
    pointee = plain[:-1].strip()
    if pointee in _KNOWN_POINTEES and pointee not in _POINTEES.get(dtype, set()):
        fits = [d for d, names in _POINTEES.items() if pointee in names]
        return f"a buffer of {' or '.join(fits)}: it is {cpp}"
    return ""


def typed_scalar(value: int | float, ptx: str) -> np.generic:
    """``value`` as the numpy scalar CuPy passes with the width and kind of PTX type ``ptx`` (its bits; a value
    ``scalar_problem`` refuses raises ValueError)."""
    why = scalar_problem(value, ptx)
    if why:
        raise ValueError(f"cannot pass {value!r} as .{ptx}: it needs {why}")
    if ptx in _FLOATS:
        scalar: np.generic = np.dtype(ptx.replace("f", "float")).type(value)
        return scalar
    match = _INT.fullmatch(ptx)
    assert match is not None
    bits = int(match.group(1))
    kind = "int" if value < 1 << (bits - 1) else "uint"  # the same bits either way; numpy needs the range
    scalar = np.dtype(f"{kind}{bits}").type(value)
    return scalar


def launch_scalars(args: Sequence[str], params: Mapping[str, int | float], types: Sequence[str],
                   buffers: Mapping[str, Any]) -> list[Any]:
    """The launch arguments in order: each buffer from ``buffers``, each param typed from ``types`` (the entry's PTX
    parameter types, one per argument); without ``types`` (not known) an int param is passed as a 32-bit int and a
    float one as a float."""
    out: list[Any] = []
    for i, name in enumerate(args):
        if name in buffers:
            out.append(buffers[name])
        elif types:
            out.append(typed_scalar(params[name], types[i]))
        else:
            value = params[name]
            out.append(np.int32(value) if type(value) is int else np.float32(value))
    return out
