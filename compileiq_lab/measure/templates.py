"""Template ``__global__`` kernels a CUDA source declares, and the explicit instantiation that gives each one code."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

__all__ = ["TemplateKernel", "instantiation_hint", "template_kernels", "top_level"]

#: Comments and string literals: blanked before the source is scanned (a commented-out kernel declares nothing).
_NOISE = re.compile(r'/\*.*?\*/|//[^\n]*|"(?:\\.|[^"\\\n])*"', re.S)
_TEMPLATE = re.compile(r"\btemplate\s*<")
#: Attributes with parentheses that may stand between ``template <...>`` and the kernel's name.
_ATTRIBUTE = re.compile(r"\b(__launch_bounds__|__attribute__|__declspec|alignas|__cluster_dims__)\s*\(")
_NAME = re.compile(r"([A-Za-z_]\w*)\s*$")
#: A message lists at most this many template kernels.
_LISTED = 6


@dataclass(frozen=True)
class TemplateKernel:
    """A template ``__global__`` function of a source: its name, its template parameters and its function parameters
    as written, and whether every template parameter has a default (then ``<>`` instantiates it)."""

    name: str
    template_params: tuple[str, ...]
    params: str

    @property
    def defaulted(self) -> bool:
        return all("=" in p for p in self.template_params)

    def instantiation(self) -> str:
        """The line that instantiates it: with ``<>`` where every template parameter has a default, else with each
        parameter's name as a placeholder for the value to write."""
        params = self.params
        if self.defaulted:  # a parameter's type may name a template parameter (``T *x``): write its default there
            for p in reversed(self.template_params):  # a default may name a parameter before it: that one next
                default = p.split("=", 1)[1].strip().replace("\\", "\\\\")
                params = re.sub(rf"\b{re.escape(_param_name(p))}\b", default, params)
        args = "" if self.defaulted else ", ".join(_param_name(p) for p in self.template_params)
        return f"template __global__ void {self.name}<{args}>({params});"


def _close(text: str, start: int, opening: str, closing: str) -> int:
    """The index just past the bracket that closes the one opened before ``start`` (nested brackets of both kinds
    and parentheses counted; a ``<`` or ``>`` inside parentheses is an operator), or -1."""
    depth, parens, i = 1, 0, start
    while i < len(text):
        c = text[i]
        if c == "(" and opening != "(":
            parens += 1
        elif c == ")" and opening != "(" and parens:
            parens -= 1
        elif parens == 0 and c == opening:
            depth += 1
        elif parens == 0 and c == closing:
            depth -= 1
            if depth == 0:
                return i + 1
        elif c in ";{}" and opening == "<":
            return -1
        i += 1
    return -1


def top_level(text: str, sep: str) -> list[str]:
    """``text`` (C++: a signature, a template's parameter list) split at ``sep`` outside ``()``, ``[]``, ``{}`` and
    ``<>`` (a ``<`` or ``>`` inside parentheses is an operator)."""
    parts, depth, angles, start, i = [], 0, 0, 0, 0
    while i < len(text):
        c = text[i]
        depth += c in "([{"
        depth -= c in ")]}"
        if depth == 0:
            angles += (c == "<") - (c == ">")
        if depth == 0 and angles <= 0 and text.startswith(sep, i):
            parts.append(text[start:i])
            start = i = i + len(sep)
            continue
        i += 1
    return parts + [text[start:]]


def _split(text: str) -> list[str]:
    """``text`` split at commas outside brackets, each part stripped, empty ones left out."""
    return [p.strip() for p in top_level(text, ",") if p.strip()]


def _param_name(param: str) -> str:
    """``const int NUM_THREADS = 256`` -> ``NUM_THREADS``; ``typename T`` -> ``T``."""
    found = _NAME.search(param.split("=")[0].strip())
    return found.group(1) if found else param


def _without_defaults(params: str) -> str:
    """A function parameter list with its default arguments removed (an explicit instantiation may not repeat them)."""
    return ", ".join(p.split("=")[0].strip() for p in _split(params))


def template_kernels(source_text: str) -> list[TemplateKernel]:
    """The template ``__global__`` functions ``source_text`` declares, in its order (one per name)."""
    text = _NOISE.sub(lambda m: " " * len(m.group()), source_text)
    found: dict[str, TemplateKernel] = {}
    for m in _TEMPLATE.finditer(text):
        end = _close(text, m.end(), "<", ">")
        if end < 0:
            continue
        head_end = text.find("(", end)
        while head_end >= 0:
            attribute = _ATTRIBUTE.search(text, end, head_end + 1)
            if attribute is None or attribute.end() - 1 != head_end:
                break
            after = _close(text, head_end + 1, "(", ")")
            head_end = text.find("(", after) if after >= 0 else -1
        if head_end < 0:
            continue
        head = text[end:head_end]
        if "__global__" not in head or re.search(r"[;{}]", head):
            continue
        name = _NAME.search(_ATTRIBUTE.sub("", head))
        params_end = _close(text, head_end + 1, "(", ")")
        if name is None or params_end < 0:
            continue
        template_params = tuple(_split(text[m.end():end - 1]))
        if not template_params:  # ``template <>``: an explicit specialisation, which has code already
            continue
        kernel = TemplateKernel(name.group(1), template_params,
                                _without_defaults(" ".join(text[head_end + 1:params_end - 1].split())))
        found.setdefault(kernel.name, kernel)
    return list(found.values())


def instantiation_hint(source: str | Path | None, name: str | None = None, strict: bool = False) -> str:
    """What to add so that the template kernels of ``source`` (a path, or None: nothing to say) have code: the lines
    that instantiate them (only ``name``'s where it names one of them; with ``strict``, "" where it names none), or ""
    where the source declares none."""
    if source is None:
        return ""
    try:
        kernels = template_kernels(Path(source).read_text(errors="replace"))
    except OSError:
        return ""
    bare = _NAME.search(name.split("<")[0].split("(")[0].strip()) if name else None
    named = [k for k in kernels if bare is not None and k.name == bare.group(1)]
    chosen = named or ([] if strict else kernels)
    if not chosen:
        return ""
    lines = "; ".join(f"`{k.instantiation()}`" for k in chosen[:_LISTED])
    more = f" (and {len(chosen) - _LISTED} more templates)" if len(chosen) > _LISTED else ""
    placeholders = ("" if all(k.defaulted for k in chosen[:_LISTED])
                    else ", each template parameter's name replaced by its value")
    return (f"{Path(source).name} declares template kernels with no instantiation; add a line for each kernel to tune "
            f"at the end of the file{placeholders}: {lines}{more}")
