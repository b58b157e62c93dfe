"""Kernel specs: what a kernel needs to be compiled, fed, launched and checked (BufferSpec, KernelSpec)."""

from __future__ import annotations

import ast
import hashlib
import importlib.util
import logging
import operator
import re
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from compileiq_lab.exceptions import ConfigurationError
from compileiq_lab.toolchain.context import BuildContext

__all__ = ["BufferSpec", "KernelSpec", "eval_expr", "need"]

log = logging.getLogger(__name__)

SPEC_FILE = "kernel.toml"
REFERENCE_FILE = "reference.py"
C_ENTRY = "cil_kernel"
LANGUAGES = {"cuda": ".cu", "c": ".c"}
DTYPES = ("float32", "float64", "int32")
INITS = ("uniform", "normal", "zeros", "ones", "arange")
IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_BINOPS: dict[type, Callable[[int, int], int]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
    ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Pow: operator.pow}


def fail(who: str, rule: str, got: Any, fix: str) -> ConfigurationError:
    """The ConfigurationError stating the rule, the value received and the fix."""
    return ConfigurationError(f"{who}: `{rule}` must hold, but got {got!r}. {fix}")


def need(ok: Any, who: str, rule: str, got: Any, fix: str) -> None:
    """Raise the ConfigurationError stating the rule, the value received and the fix unless ``ok``."""
    if not ok:
        raise fail(who, rule, got, fix)


def _eval_node(node: ast.AST, names: Mapping[str, int], expr: str) -> int:
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    if isinstance(node, ast.Name) and node.id in names:
        return names[node.id]
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        return (-1 if isinstance(node.op, ast.USub) else 1) * _eval_node(node.operand, names, expr)
    if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
        a, b = _eval_node(node.left, names, expr), _eval_node(node.right, names, expr)
        bad_pow = isinstance(node.op, ast.Pow) and not 0 <= b <= 64
        need(not bad_pow and not (isinstance(node.op, (ast.FloorDiv, ast.Mod)) and b == 0), f"expression {expr!r}",
              "divisors are non-zero and exponents within 0..64", f"{ast.unparse(node)} with operands {a} and {b}",
              "Fix the expression or the values it uses.")
        return _BINOPS[type(node.op)](a, b)
    div = isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div)
    raise ConfigurationError(f"expression {expr!r}: `it is int literals and names in {sorted(names)} combined by "
                             f"+ - * // % ** and parentheses` must hold, but got {type(node).__name__} "
                             f"{ast.unparse(node)!r}. {'Use // for division.' if div else 'Rewrite that part.'}")


def eval_expr(expr: int | str, names: Mapping[str, int]) -> int:
    """Evaluate a safe integer expression such as ``"n // (2 * BLOCK)"``.

    Args:
        expr: An int, or a string of int literals, names, ``+ - * // % **`` and parentheses.
        names: Values of the names the expression may use.

    Raises:
        ConfigurationError: The expression is not integer arithmetic over ``names``.
    """
    if type(expr) is int:
        return expr
    if not isinstance(expr, str):
        raise fail(f"expression {expr!r}", "it is an int or a str", type(expr).__name__,
                   'Write an int or a string such as "n // 256".')
    try:
        tree = ast.parse(expr.strip(), mode="eval")
    except SyntaxError as exc:
        raise ConfigurationError(f"expression {expr!r}: `it is valid syntax` must hold, but got a syntax error "
                                 f"({exc.msg}). Write arithmetic such as \"n // (2 * BLOCK)\".") from None
    return _eval_node(tree.body, names, expr)


@dataclass(frozen=True)
class BufferSpec:
    """One generated input or expected output buffer.

    Attributes:
        name: Buffer name: the key in input/output dicts and in launch args.
        dtype: "float32", "float64" or "int32".
        shape: Ints, param names or expressions over params, e.g. ``("n * n",)``.
        init: How an input is filled: uniform in [-1, 1) ([-100, 100) for ints), normal, zeros, ones,
            arange; None for outputs.
    """

    name: str
    dtype: str
    shape: tuple[int | str, ...]
    init: str | None = None


@dataclass(frozen=True)
class KernelSpec:
    """A kernel and all that is needed to compile, feed, launch and check it (see kernel.toml).

    ``defines`` maps each -D knob to its values (first = default); ``params`` holds the integer
    scalars in order; ``grid``/``block``/``shared_bytes``/``args`` describe a CUDA launch. A spec
    without ``entry`` or outputs (e.g. a bare source file) is static-only: compiled, never run.
    ``spec_file`` is the kernel.toml it was read from (None for a bare source file).
    """

    name: str
    language: str
    source: str
    entry: str | None
    folder: Path
    source_path: Path
    description: str = ""
    defines: dict[str, tuple[Any, ...]] = field(default_factory=dict)
    params: dict[str, int] = field(default_factory=dict)
    inputs: tuple[BufferSpec, ...] = ()
    outputs: tuple[BufferSpec, ...] = ()
    reference: str | None = None
    rtol: float = 1e-5
    atol: float = 1e-8
    seed: int = 0
    repeats: int = 10
    grid: tuple[int | str, ...] | None = None
    block: tuple[int | str, ...] | None = None
    shared_bytes: int | str = 0
    args: tuple[str, ...] | None = None
    workloads: dict[str, dict[str, int]] = field(default_factory=dict)
    workload: str | None = None
    spec_file: Path | None = None
    build: BuildContext = field(default_factory=BuildContext)

    @property
    def static_only(self) -> bool:
        """True when the kernel can only be compiled (no entry point or no outputs)."""
        return self.entry is None or not self.outputs

    def shape_of(self, buf: str | BufferSpec) -> tuple[int, ...]:
        """Return a buffer's concrete shape, its expressions evaluated over the params."""
        if isinstance(buf, str):
            found = {b.name: b for b in self.inputs + self.outputs}
            need(buf in found, f"kernel {self.name!r}", f"the buffer is in {list(found)}", buf, "Use one of those.")
            buf = found[buf]
        return tuple(eval_expr(dim, self.params) for dim in buf.shape)

    def define_values(self, values: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """Return every knob's value: from ``values`` where given, else the knob's default (first value)."""
        values = dict(values or {})
        need(set(values) <= set(self.defines), f"kernel {self.name!r}", f"defines are knobs in {list(self.defines)}",
              sorted(set(values) - set(self.defines)), "Drop the others or add them to [defines] in kernel.toml.")
        return {k: values.get(k, options[0]) for k, options in self.defines.items()}

    def define_args(self, values: Mapping[str, Any] | None = None) -> list[str]:
        """Return ``["-DNAME=value", ...]`` for every knob (sorted by name), defaults filling what ``values`` lacks."""
        return [f"-D{k}={v}" for k, v in sorted(self.define_values(values).items())]

    def block_threads(self) -> int | None:
        """Threads per block of the kernel's launch (the largest over its -D knobs' values), or None when unknown."""
        if not self.block:
            return None
        import itertools

        names = list(self.defines)
        combos = list(itertools.islice(itertools.product(*self.defines.values()), 256)) if names else [()]
        most = 0
        for combo in combos:
            values = {**self.params, **{k: v for k, v in zip(names, combo) if type(v) is int}}
            threads = 1
            try:
                for dim in self.block:
                    threads *= eval_expr(dim, values)
            except ConfigurationError:  # a knob value the block expression cannot use: not a launch
                continue
            most = max(most, threads)
        return most or None

    def launch_dims(self, values: Mapping[str, Any] | None = None) -> tuple[tuple[int, ...], tuple[int, ...], int]:
        """Return (grid, block, shared_bytes) of a CUDA kernel, evaluated over params and define values."""
        if not self.grid or not self.block:
            raise fail(f"kernel {self.name!r}", "a [launch] table is given", None,
                       "Add [launch] with grid, block and args to kernel.toml.")
        names = {**self.params, **{k: v for k, v in self.define_values(values).items() if type(v) is int}}
        grid, block = (tuple(eval_expr(e, names) for e in dims) + (1,) * (3 - len(dims))
                       for dims in (self.grid, self.block))
        return grid, block, eval_expr(self.shared_bytes, names)

    def make_inputs(self, seed: int | None = None) -> dict[str, np.ndarray]:
        """Generate the C-contiguous inputs, deterministic by ``seed`` (default: ``[run] seed``)."""
        rng = np.random.default_rng(self.seed if seed is None else seed)
        out: dict[str, np.ndarray] = {}
        for buf in self.inputs:
            shape, dtype, size = self.shape_of(buf), np.dtype(buf.dtype), int(np.prod(self.shape_of(buf)))
            if buf.init == "uniform":
                data = rng.integers(-100, 100, size) if dtype.kind == "i" else rng.uniform(-1.0, 1.0, size)
            elif buf.init == "normal":
                data = rng.standard_normal(size)
            else:
                data = np.arange(size) if buf.init == "arange" else np.full(size, int(buf.init == "ones"))
            out[buf.name] = np.ascontiguousarray(data.astype(dtype).reshape(shape))
        return out

    def reference_outputs(self, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Return the expected outputs (shaped, in the reference's precision) of reference.py on copies of inputs."""
        who, path = f"kernel {self.name!r}", self.folder / REFERENCE_FILE
        mod_name = f"_compileiq_reference_{self.name}_{hashlib.sha1(str(path).encode()).hexdigest()[:8]}"
        module_spec = importlib.util.spec_from_file_location(mod_name, path) if path.is_file() else None
        if not self.reference or module_spec is None or module_spec.loader is None:
            raise fail(who, f"[check] names a reference and {path} exists", self.reference,
                       'Add [check] reference = "reference" and a reference.py defining reference(inputs, params).')
        module = importlib.util.module_from_spec(module_spec)
        sys.modules[mod_name] = module  # only while it executes (dataclasses and pickle look it up)
        try:
            module_spec.loader.exec_module(module)
        finally:
            sys.modules.pop(mod_name, None)
        func = getattr(module, self.reference, None)
        if not callable(func):
            raise fail(who, f"{REFERENCE_FILE} defines {self.reference}()", func, "Define it or fix [check].")
        got = func({k: np.array(v, copy=True) for k, v in inputs.items()}, dict(self.params))
        need(isinstance(got, Mapping) and all(b.name in got for b in self.outputs), who,
              f"{self.reference}() returns a dict with keys {[b.name for b in self.outputs]}",
              sorted(got) if isinstance(got, Mapping) else type(got).__name__, "Return every [[outputs]] name.")
        expected: dict[str, np.ndarray] = {}
        for buf in self.outputs:
            arr, shape = np.asarray(got[buf.name]), self.shape_of(buf)
            need(arr.size == int(np.prod(shape)), who, f"the reference's {buf.name} has shape {shape}", arr.shape,
                  f"Fix {REFERENCE_FILE} or the [[outputs]] shape.")
            expected[buf.name] = np.ascontiguousarray(arr.reshape(shape))
        return expected

    def check(self, outputs: Mapping[str, np.ndarray], expected: Mapping[str, np.ndarray]) -> tuple[bool, str]:
        """Compare outputs with expected ones by ``np.allclose`` with the spec's rtol and atol.

        Returns:
            (ok, message); the message names the worst element (relative to the tolerance) and its error.
        """
        notes, tol = [], f"rtol={self.rtol}, atol={self.atol}"
        for buf in self.outputs:
            want = np.asarray(expected[buf.name], dtype=np.float64)
            size = np.size(outputs[buf.name]) if buf.name in outputs else "missing"
            if size != want.size:
                return False, f"{self.name}: output {buf.name!r} has {size} elements, expected {want.size}"
            got = np.asarray(outputs[buf.name], dtype=np.float64).reshape(want.shape)
            excess = np.abs(got - want) - (self.atol + self.rtol * np.abs(want))
            idx = np.unravel_index(int(np.argmax(np.where(np.isnan(excess), np.inf, excess))), want.shape)
            notes.append(f"{buf.name}{[int(i) for i in idx]}: got {got[idx]:.9g}, expected {want[idx]:.9g}, "
                         f"abs error {abs(got[idx] - want[idx]):.3g}")
            if not np.allclose(got, want, rtol=self.rtol, atol=self.atol):
                return False, f"{self.name}: output {buf.name!r} differs beyond {tol}; worst {notes[-1]}"
        return True, f"{self.name}: all outputs within {tol}; worst " + "; ".join(notes)

    def with_workload(self, name: str | None) -> KernelSpec:
        """This kernel with one of its ``[[workloads]]`` (params overridden); None: the default params.

        Raises:
            ConfigurationError: ``name`` is not one of the kernel's workloads.
        """
        import dataclasses

        if name is None:
            return self
        need(name in self.workloads, f"kernel {self.name!r}", f"the workload is one of {list(self.workloads)}", name,
              "Use one of those, or add it as [[workloads]] in kernel.toml.")
        return dataclasses.replace(self, params={**self.params, **self.workloads[name]}, workload=name)

    def source_sha256(self) -> str:
        """Return the SHA-256 hex digest of the source file's bytes."""
        return hashlib.sha256(self.source_path.read_bytes()).hexdigest()
