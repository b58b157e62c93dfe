"""A kernel's scalar launch arguments typed from its PTX parameters (``.u32``, ``.u64``, ``.f32`` ...)."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

__all__ = ["POINTER_TYPES", "launch_scalars", "scalar_problem", "typed_scalar"]

#: The PTX types a pointer (a buffer) is passed as.
POINTER_TYPES = ("u64", "s64", "b64")
#: What a PTX scalar type holds, as a user would write it (nvcc writes ``.u32`` for int as for unsigned).
_KINDS = {8: "an 8-bit integer (char, bool)", 16: "a 16-bit integer (short)", 32: "a 32-bit integer (int, unsigned)",
          64: "a 64-bit integer (size_t, long long)"}
_INT = re.compile(r"[usb](8|16|32|64)$")
_FLOATS = ("f32", "f64")


def scalar_problem(value: Any, ptx: str) -> str:
    """Why ``value`` (a ``[params]`` int or float) cannot be passed as a parameter of PTX type ``ptx``, or "" when it
    can: an int to an integer parameter of any width it fits (signed or unsigned: nvcc declares both ``.u``), an int
    or float to ``.f32``/``.f64``. A struct or ``__half`` by value (``.b8[N]``) and ``.f16`` are not supported."""
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
    if type(value) is not int:
        return f"an int for {_KINDS[bits]} (.{ptx})"
    if not -(1 << (bits - 1)) <= value < 1 << bits:
        return f"an int that fits {_KINDS[bits]} (.{ptx}): {-(1 << (bits - 1))} to {(1 << bits) - 1}"
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
