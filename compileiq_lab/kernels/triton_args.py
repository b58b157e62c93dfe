"""A Triton kernel's command line checked by its form: the ``triton:FILE.py:function`` reference, the signature's
types and the launch options, with no Triton imported."""

from __future__ import annotations

import keyword
import re
from collections.abc import Sequence
from pathlib import Path

from compileiq_lab.exceptions import ConfigurationError
from compileiq_lab.kernels.rules import fail, need

__all__ = ["SIGNATURE_HINT", "TRITON_PREFIX", "TRITON_TYPES", "check_launch", "check_signature_text",
           "parse_signature", "parse_triton_ref", "triton_ref_parts", "triton_usage_error"]

TRITON_PREFIX = "triton:"
#: Triton's scalar type names (``triton.language.str_to_ty``); a pointer is ``*`` (or ``*k``, const) before one.
TRITON_TYPES = ("i1", "i8", "i16", "i32", "i64", "u1", "u8", "u16", "u32", "u64", "fp16", "bf16", "fp32", "fp64",
                "fp8e4nv", "fp8e4b8", "fp8e4b15", "fp8e5", "fp8e5b16")
#: The one specialisation hint Triton takes in a signature (its AOT tool's ``*fp32:16``): the pointer is 16-byte
#: aligned, or the integer a multiple of 16 (``tt.divisibility``), as Triton's JIT assumes of such arguments.
SIGNATURE_HINT = ":16"
_HINTABLE = ("i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64")
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def parse_triton_ref(ref: str) -> tuple[Path, str]:
    """``'triton:path/to/mod.py:func'`` -> (the file's resolved path, ``'func'``); the path is relative to the
    current folder unless absolute."""
    path_text, function = triton_ref_parts(ref)
    path = Path(path_text).expanduser()
    resolved = path.resolve()
    need(resolved.is_file(), "Triton kernel", "the file exists", str(resolved),
         "Check the path (relative paths start at the current folder).")
    return resolved, function


def triton_ref_parts(ref: str) -> tuple[str, str]:
    """The file and the function a ``'triton:path/to/mod.py:func'`` reference names, checked for its form only
    (whatever the files here: a wrong form is wrong anywhere)."""
    who = "Triton kernel"
    form = f"a Triton kernel is named '{TRITON_PREFIX}path/to/file.py:function'"
    example = f"e.g. {TRITON_PREFIX}my_kernels.py:matmul_kernel"
    need(isinstance(ref, str) and ref.startswith(TRITON_PREFIX), who, form, ref,
         f"Name the file and its @triton.jit function, {example}.")
    path_text, sep, function = ref[len(TRITON_PREFIX):].rpartition(":")
    need(sep and path_text, who, form, ref, f"Add ':' and the @triton.jit function's name after the file, {example}.")
    need(_IDENT.match(function) and not keyword.iskeyword(function), who,
         "the name after the last ':' is a Python function name", function,
         f"Name the @triton.jit function defined in {path_text}, {example}.")
    need(Path(path_text).suffix == ".py", who, "the file is a Python file (.py)", path_text,
         f"Name the .py file that defines {function}, {example}.")
    return path_text, function


def _type_error(text: str, params: Sequence[str], why: str) -> ConfigurationError:
    pointers = ", ".join(f"*{t}" for t in ("fp32", "fp16", "bf16", "i32"))
    known = f" The function's runtime parameters are ({', '.join(params)})." if params else ""  # (none: no file read)
    return fail("signature", f"every type is a Triton type ({', '.join(TRITON_TYPES)}; a pointer: {pointers} ...)",
                text, f"{why}.{known} Hint an aligned pointer or a multiple-of-16 integer with ':16', e.g. *fp32:16.")


def _check_type(name: str, ty: str, text: str, params: Sequence[str]) -> str:
    base = ty.removesuffix(SIGNATURE_HINT)
    pointer = base.startswith("*")
    scalar = base.removeprefix("*k") if base.startswith("*k") else base.removeprefix("*")
    if scalar not in TRITON_TYPES:
        raise _type_error(text, params, f"{name} has type {ty!r}")
    if ty.endswith(SIGNATURE_HINT) and not pointer and scalar not in _HINTABLE:
        raise _type_error(text, params, f"{name} has type {ty!r}: ':16' hints a pointer or an integer only")
    return ty


def _signature_items(text: str, listed: str) -> tuple[list[str], list[str]]:
    """A signature's items and those of them given as name=type (``listed``: the function's runtime parameters as
    the messages name them)."""
    need(isinstance(text, str), "signature", "the signature is a text such as '*fp32,*fp32,i32'", text,
         f"Give one type per runtime parameter ({listed}).")
    items = [part.strip() for part in text.split(",")] if text.strip() else []
    named = [item for item in items if "=" in item]
    if named and len(named) != len(items):
        raise fail("signature", "all types are given in order or all as name=type", text,
                   f"Name every one or none; the function's runtime parameters are ({listed}).")
    return items, named


def check_signature_text(text: str) -> None:
    """Refuse a signature that no kernel could take (an empty item, a type Triton does not have, names given for
    some types only), whatever its function's parameters.

    Raises:
        ConfigurationError: Naming the rule, the value and the fix.
    """
    items, _ = _signature_items(text, "its runtime parameters")
    need(items and all(items), "signature", "one type per runtime parameter, comma-separated, none empty", text,
         "Give the types, e.g. '*fp32:16,*fp32:16,i32' (leave --signature out for a kernel without runtime "
         "parameters).")
    for item in items:
        name, _, ty = (part.strip() for part in item.rpartition("=")) if "=" in item else ("", "", item)
        _check_type(name or "a parameter", ty, text, [])


def triton_usage_error(ref: str, signature: str | None, num_warps: int | None) -> str | None:
    """What makes a Triton kernel's command line wrong whatever its file (a reference without its function, a
    signature no kernel takes, a ``num_warps`` Triton cannot launch with), or None."""
    try:
        triton_ref_parts(ref)
        if signature is not None:
            check_signature_text(signature)
        if num_warps is not None:
            check_launch("--num-warps", num_warps, 1)
    except ConfigurationError as exc:
        return str(exc)
    return None


def parse_signature(text: str, function_params: Sequence[str]) -> dict[str, str]:
    """The types of a kernel's runtime parameters: ``'*fp32,*fp32,*fp32,i32'`` (one per parameter, in order) or
    ``'x_ptr=*fp32,n=i32'`` -> ``{param: type}`` in ``function_params`` order.

    ``function_params`` are the function's runtime parameters: all but its ``tl.constexpr`` ones and any given a
    constant value. A type may end in ``:16`` (Triton's hint: a 16-byte-aligned pointer, an integer divisible by
    16), which Triton's JIT assumes of such arguments and uses for wider loads.
    """
    params = list(function_params)
    listed = ", ".join(params) or "none"
    items, named = _signature_items(text, listed)
    if not named:
        need(len(items) == len(params), "signature",
             f"one type per runtime parameter of the function ({listed}), in order", text,
             f"It has {len(params)} runtime parameter(s) and the signature {len(items)} type(s); give "
             f"{len(params)}, or name them as name=type.")
        return {p: _check_type(p, ty, text, params) for p, ty in zip(params, items)}
    given: dict[str, str] = {}
    for item in named:
        name, _, ty = (s.strip() for s in item.partition("="))
        need(name in params, "signature", f"every name is a runtime parameter of the function ({listed})", name,
             "Check the spelling; a tl.constexpr parameter takes a value (a define), not a type.")
        need(name not in given, "signature", "every parameter is named once", name, "Remove the repeated entry.")
        given[name] = _check_type(name, ty, text, params)
    missing = [p for p in params if p not in given]
    need(not missing, "signature", f"every runtime parameter of the function ({listed}) has a type", text,
         f"Add {', '.join(f'{p}=<type>' for p in missing)}.")
    return {p: given[p] for p in params}


def check_launch(who: str, num_warps: int, num_stages: int) -> None:
    """Refuse a ``num_warps`` or ``num_stages`` Triton cannot launch with, naming the rule."""
    need(type(num_warps) is int and 1 <= num_warps <= 32 and num_warps & (num_warps - 1) == 0, who,
         "num_warps is a power of 2 from 1 to 32", num_warps, "Triton runs num_warps * 32 threads per program.")
    need(type(num_stages) is int and num_stages >= 1, who, "num_stages is an int >= 1", num_stages,
         "Give the software-pipelining depth Triton should use (3 is its default).")
