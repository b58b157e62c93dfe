"""The configs a Triton kernel's ``@triton.autotune`` lists, read from its file without running it."""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from compileiq_lab.kernels.rules import fail, need
from compileiq_lab.kernels.triton_reduce import statement_blocks

__all__ = ["AutotuneConfig", "autotune_choice", "autotune_configs", "autotune_hint"]

#: The ``triton.Config`` options the tuner takes too (the CLI's --num-warps and --num-stages).
_OPTIONS = ("num_warps", "num_stages")


@dataclass(frozen=True)
class AutotuneConfig:
    """One ``triton.Config``: its constexpr values and its compile options (num_warps, num_stages)."""

    values: dict[str, Any]
    options: dict[str, int] = field(default_factory=dict)

    def flags(self) -> str:
        """The CLI flags that compile this config."""
        out = [f"--define {k}={v}" for k, v in self.values.items()]
        return " ".join(out + [f"--{k.replace('_', '-')} {v}" for k, v in self.options.items()])


def _named(node: ast.expr, name: str) -> bool:
    target = node.func if isinstance(node, ast.Call) else node
    return (isinstance(target, ast.Name) and target.id == name) or (
        isinstance(target, ast.Attribute) and target.attr == name)


def _config(node: ast.expr) -> AutotuneConfig | None:
    """A literal ``triton.Config({...}, num_warps=..., ...)``, or None."""
    if not (isinstance(node, ast.Call) and _named(node, "Config")):
        return None
    kwargs = {k.arg: k.value for k in node.keywords if k.arg}
    spec = node.args[0] if node.args else kwargs.get("kwargs")
    try:
        values = ast.literal_eval(spec) if spec is not None else {}
        options = {k: ast.literal_eval(kwargs[k]) for k in _OPTIONS if k in kwargs}
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return None
    if not isinstance(values, dict) or not all(isinstance(k, str) for k in values):
        return None
    return AutotuneConfig(values, {k: v for k, v in options.items() if type(v) is int})


def autotune_configs(text: str, function: str) -> tuple[list[AutotuneConfig] | None, str] | None:
    """The configs of the ``@triton.autotune`` on the file's top-level ``function`` and the source of its ``configs``
    expression: the configs where they are written out as ``triton.Config`` literals, or a top-level function without
    arguments returns such a list (CUDA's where its branches or helpers name a backend, else the first one it
    returns in the order of the file), else None (a comprehension, say). None where the function has no such
    decorator (or the file does not parse)."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    for node in tree.body:
        if not (isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == function):
            continue
        for decorator in node.decorator_list:
            if not (isinstance(decorator, ast.Call) and _named(decorator, "autotune")):
                continue
            configs = next((k.value for k in decorator.keywords if k.arg == "configs"),
                           decorator.args[0] if decorator.args else None)
            if configs is None:
                return None
            functions = {f.name: f for f in tree.body if isinstance(f, ast.FunctionDef)}
            return _literal(configs, functions, 3), ast.get_source_segment(text, configs) or "code"
    return None


#: Words that mark a branch or a helper as another backend's (``is_hip()``, ``get_hip_autotune_config``,
#: ``backend == "xpu"``) or as CUDA's: the tuner compiles for an NVIDIA GPU, so CUDA's configs are the ones to read.
_OTHER_BACKENDS = frozenset({"hip", "rocm", "amd", "amdgpu", "xpu", "intel", "cpu", "mtia", "musa", "npu"})
_CUDA = frozenset({"cuda", "nvidia"})


def _words(node: ast.AST) -> set[str]:
    """The lower-case words of an expression's names, attributes and strings (split at ``_`` and other
    non-letters)."""
    out: set[str] = set()
    for n in ast.walk(node):
        text = n.id if isinstance(n, ast.Name) else n.attr if isinstance(n, ast.Attribute) else \
            n.value if isinstance(n, ast.Constant) and isinstance(n.value, str) else ""
        out.update(w for w in re.split(r"[^a-z0-9]+", text.lower()) if w)
    return out


def _returns(body: list[ast.stmt], conditions: tuple[tuple[ast.expr, bool], ...] = ()
             ) -> list[tuple[ast.expr, tuple[tuple[ast.expr, bool], ...]]]:
    """Each ``return VALUE`` of a function body (nested functions left out) with the ``if`` tests it lies under, each
    with whether it is under the test's true branch."""
    out: list[tuple[ast.expr, tuple[tuple[ast.expr, bool], ...]]] = []
    for stmt in body:
        if isinstance(stmt, ast.Return) and stmt.value is not None:
            out.append((stmt.value, conditions))
        elif isinstance(stmt, ast.If):
            out += _returns(stmt.body, conditions + ((stmt.test, True),))
            out += _returns(stmt.orelse, conditions + ((stmt.test, False),))
        elif isinstance(stmt, (ast.For, ast.While, ast.With, ast.Try)):
            for block in statement_blocks(stmt):
                out += _returns(block, conditions)
    return out


def _backend_rank(value: ast.expr, conditions: tuple[tuple[ast.expr, bool], ...]) -> int:
    """0 for a return a test marks as CUDA's, 2 for one a test or the helper it calls marks as another backend's
    (``if is_hip(): return ...``, the ``else`` of ``if is_cuda()``, ``return get_hip_autotune_config()``), else 1."""
    helper = _words(value.func) if isinstance(value, ast.Call) else set()
    other = bool(helper & _OTHER_BACKENDS)
    cuda = bool(helper & _CUDA)
    for test, taken in conditions:
        words = _words(test)
        negated = isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not)
        if taken != negated:
            other |= bool(words & _OTHER_BACKENDS)
            cuda |= bool(words & _CUDA)
        else:
            other |= bool(words & _CUDA) and not words & _OTHER_BACKENDS
    return 2 if other else 0 if cuda else 1


def _literal(node: ast.expr, functions: dict[str, ast.FunctionDef], depth: int) -> list[AutotuneConfig] | None:
    """The configs of a list of ``triton.Config`` literals, or of a list a call of a top-level function without
    arguments returns (``get_cuda_autotune_config()``; through at most ``depth`` calls): of its returns, CUDA's branch
    first and another backend's last (``_backend_rank``), each in the order of the file, those under a test naming
    no backend left out where it has a return under no test; else None."""
    if isinstance(node, (ast.List, ast.Tuple)):
        configs = [_config(c) for c in node.elts]
        return [c for c in configs if c is not None] if configs and None not in configs else None
    if (depth and isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and not node.args
            and not node.keywords and node.func.id in functions):
        returns = _returns(functions[node.func.id].body)
        if any(not conditions for _, conditions in returns):
            # a return under a test that names no backend (``if AUTOTUNE_DISABLED: return [one config]``) is a
            # special case of the function's own return, not CUDA's list
            returns = [r for r in returns if not r[1] or _backend_rank(*r) != 1]
        for value, _ in sorted(returns, key=lambda r: (_backend_rank(*r), r[0].lineno, r[0].col_offset)):
            found = _literal(value, functions, depth - 1)
            if found:
                return found
    return None


def autotune_hint(text: str, function: str, missing: list[str]) -> str:
    """For constexprs without values: what the function's ``@triton.autotune`` offers for them, or ""."""
    read = autotune_configs(text, function)
    if read is None:
        return ""
    found, source = read
    if not found:
        return (f" Its @triton.autotune takes its configs from {source}, which is not run here (the tuner compiles one "
                "config): give the values of the one to tune.")
    covers = [c for c in found if all(m in c.values for m in missing)]
    pick = covers[0] if covers else found[0]
    where = "" if source.lstrip().startswith(("[", "(")) else f" (from {source})"
    number = found.index(pick) + 1
    return (f" Its @triton.autotune lists {len(found)} config{'s' if len(found) != 1 else ''}{where}, which the tuner "
            f"does not try (it compiles one config, as yours would run after autotuning); config {number} reads: "
            f"{pick.flags()} (--autotune-config {number} takes it, as the lab's autotune config field does)")


def autotune_choice(module: str | Path, function: str, number: int) -> AutotuneConfig:
    """Config ``number`` (1-based) of the ``@triton.autotune`` list of ``function`` in the file ``module``, read
    without running the file (``autotune_configs``).

    Raises:
        ConfigurationError: The file cannot be read, the function has no ``@triton.autotune``, its configs are made by
            code that is not run here, or ``number`` is not one of them (each naming the fix).
    """
    who = f"Triton kernel {function} in {module}: --autotune-config"
    try:
        text = Path(module).read_text(errors="replace")
    except OSError as exc:
        raise fail(who, "the kernel's file can be read", str(module), f"Check the path ({exc}).") from None
    read = autotune_configs(text, function)
    if read is None:
        raise fail(who, "the function has a @triton.autotune(configs=...) decorator", "none",
                   "Give the constexprs with --define (and --num-warps, --num-stages) instead.")
    found, source = read
    if found is None:
        raise fail(who, "its configs are written out as triton.Config literals (or a helper without arguments "
                   "returns them)", source, "Give the values of the config to tune with --define, --num-warps and "
                   "--num-stages instead.")
    need(type(number) is int and 1 <= number <= len(found), who, f"the number is one of its configs, 1 to {len(found)}",
         number, f"Pick one of 1..{len(found)}; config 1 reads: {found[0].flags()}")
    return found[number - 1]
