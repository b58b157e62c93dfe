"""What a Triton kernel's file needs to define its @triton.jit functions, without the rest of it (tests, benchmarks,
a device query at import), with every line where it was."""

from __future__ import annotations

import ast
import copy
import symtable
from collections.abc import Iterable
from typing import NamedTuple

__all__ = ["Reduced", "blank_lines", "bound_names", "jit_only", "statement_blocks"]

#: Compound statements whose blocks may bind a top-level name (``try: from a import f`` / ``except: from b import
#: f``, ``if HIP: ... else: ...``): kept whole when a kept statement needs one of the names they bind.
_COMPOUND = (ast.If, ast.Try, ast.With)


class Reduced(NamedTuple):
    """A file reduced to what its JIT functions need (``jit_only``)."""

    #: The file's text with every other line left empty.
    text: str
    #: The (first, last) lines of the statements an import failure may drop: the imports, and the kept compound
    #: statements that hold one.
    imports: list[tuple[int, int]]
    #: The top-level names the kept code reads (each should be defined once it has run).
    needed: frozenset[str]


def _is_jit(decorator: ast.expr) -> bool:
    """``@triton.jit``, ``@jit``, ``@gluon.jit``, ``@triton.jit(...)``: a decorator that makes a JIT function."""
    target = decorator.func if isinstance(decorator, ast.Call) else decorator
    return (isinstance(target, ast.Name) and target.id == "jit") or (
        isinstance(target, ast.Attribute) and target.attr == "jit")


def _jit_assigned(node: ast.stmt) -> bool:
    """``kernel = triton.jit(kernel)``: a function made a JIT function by a call rather than a decorator."""
    return isinstance(node, ast.Assign) and isinstance(node.value, ast.Call) and _is_jit(node.value)


def statement_blocks(node: ast.stmt) -> list[list[ast.stmt]]:
    """The statement blocks of a compound statement (an if's branches, a try's body, handlers, else and finally)."""
    parts = [getattr(node, part, []) for part in ("body", "orelse", "finalbody")]
    return parts + [h.body for h in getattr(node, "handlers", [])]


def bound_names(node: ast.stmt) -> set[str]:
    """The top-level names a statement binds (an import's too, and those bound in an if's or a try's blocks)."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return {node.name}
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return {(a.asname or a.name).split(".")[0] for a in node.names if a.name != "*"}
    if isinstance(node, _COMPOUND):
        return {name for block in statement_blocks(node) for stmt in block for name in bound_names(stmt)}
    targets: list[ast.expr] = []
    if isinstance(node, ast.Assign):
        targets = node.targets
    elif isinstance(node, (ast.AnnAssign, ast.AugAssign)):
        targets = [node.target]
    return {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}


def _names(nodes: Iterable[ast.stmt]) -> set[str]:
    """The top-level names the statements read, as Python scopes them: a function's parameters and the names it
    binds, a comprehension's or a lambda's variables and a class body's own names are not read from the module
    (``x = tl.load(...)`` in a kernel does not need a top-level ``x``)."""
    out: set[str] = set()
    for node in nodes:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and any(map(_is_jit, node.decorator_list)):
            # a JIT function keeps its JIT decorator alone: what the others name (autotune's configs) is not needed
            node = copy.copy(node)
            node.decorator_list = [d for d in node.decorator_list if _is_jit(d)]
        out |= _module_reads(symtable.symtable(ast.unparse(node), "<statement>", "exec"), top=True)
    return out


def _module_reads(table: symtable.SymbolTable, top: bool) -> set[str]:
    """The names a statement's symbol table (and its nested scopes') reads from the module."""
    out = {sym.get_name() for sym in table.get_symbols() if sym.is_referenced() and (top or sym.is_global())}
    for child in table.get_children():
        out |= _module_reads(child, top=False)
    return out


def blank_lines(text: str, spans: Iterable[tuple[int, int]]) -> str:
    """``text`` with the lines of each (first, last) span (1-based, inclusive) left empty: every other line keeps its
    number, so a function's source and a compiler's line numbers read as in the file."""
    lines = text.splitlines(keepends=True)
    for first, last in spans:
        for i in range(first - 1, min(last, len(lines))):
            lines[i] = "\n"
    return "".join(lines)


def jit_only(text: str) -> Reduced | None:
    """The file's text reduced to what its ``@triton.jit`` functions need, the spans of the imports it keeps and the
    names it reads.

    Kept: the imports; the JIT functions, without their other decorators (``@triton.autotune``, whose configs may
    query the GPU, ``@triton.heuristics``), and those made by a call (``f = triton.jit(f)``); and the top-level
    assignments, functions, classes and compound statements (``try: from ... import tanh``, an ``if`` choosing an
    import) that bind a name their code (or what they keep in turn) reads. Every other top-level statement (a test, a
    benchmark, ``DEVICE = ...``) is left as empty lines. None where the text does not parse or holds no JIT function.
    """
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return None
    body = tree.body
    kernels = [n for n in body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
               and any(_is_jit(d) for d in n.decorator_list)]
    assigned = [n for n in body if _jit_assigned(n)]
    if not kernels and not assigned:
        return None
    kept: set[int] = {id(n) for n in [*kernels, *assigned]}
    imports = [n for n in body if isinstance(n, (ast.Import, ast.ImportFrom))]
    kept |= {id(n) for n in imports}
    needed = _names([*kernels, *assigned])
    while True:
        more = [n for n in body if id(n) not in kept and bound_names(n) & needed]
        if not more:
            break
        kept |= {id(n) for n in more}
        needed |= _names(more)
    spans: list[tuple[int, int]] = []
    for node in body:
        first = min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", ()))])
        last = node.end_lineno or node.lineno
        if id(node) not in kept:
            spans.append((first, last))
        elif node in kernels:  # the other decorators of a JIT function
            spans += [(d.lineno, d.end_lineno or d.lineno) for d in node.decorator_list if not _is_jit(d)]
    droppable = imports + [n for n in body if id(n) in kept and isinstance(n, _COMPOUND)
                           and any(isinstance(s, (ast.Import, ast.ImportFrom)) for s in ast.walk(n))]
    droppable.sort(key=lambda n: n.lineno)
    return Reduced(blank_lines(text, spans), [(n.lineno, n.end_lineno or n.lineno) for n in droppable],
                   frozenset(needed))
