"""Bundled benchmark kernels: load and validate kernel.toml specs, make inputs, check outputs."""

from __future__ import annotations

import ast
import hashlib
import importlib.util
import logging
import operator
import os
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

import numpy as np

from compileiq_lab.exceptions import ConfigurationError, OptionalDependencyError

__all__ = ["BufferSpec", "KernelSpec", "load_kernel", "list_kernels", "kernels_root", "eval_expr"]

log = logging.getLogger(__name__)

ENV_VAR = "COMPILEIQ_KERNELS"
SPEC_FILE = "kernel.toml"
REFERENCE_FILE = "reference.py"
C_ENTRY = "cil_kernel"
LANGUAGES = {"cuda": ".cu", "c": ".c"}
DTYPES = ("float32", "float64", "int32")
INITS = ("uniform", "normal", "zeros", "ones", "arange")
_REQUIRED = ("name", "language", "source", "entry")
_TABLES: dict[str, tuple[str, ...]] = {
    "": _REQUIRED + ("description", "defines", "params", "inputs", "outputs", "check", "run", "launch", "workloads"),
    "workloads": ("name", "params"),
    "inputs": ("name", "dtype", "shape", "init"), "outputs": ("name", "dtype", "shape"), "run": ("seed", "repeats"),
    "check": ("reference", "rtol", "atol"), "launch": ("grid", "block", "shared_bytes", "args")}
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_BINOPS: dict[type, Callable[[int, int], int]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
    ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Pow: operator.pow}


def _need(ok: Any, who: str, rule: str, got: Any, fix: str) -> None:
    """Raise a ConfigurationError stating the rule, the value received and the fix unless ``ok``."""
    if not ok:
        raise ConfigurationError(f"{who}: `{rule}` must hold, but got {got!r}. {fix}")


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
        _need(not bad_pow and not (isinstance(node.op, (ast.FloorDiv, ast.Mod)) and b == 0), f"expression {expr!r}",
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
    _need(isinstance(expr, str), f"expression {expr!r}", "it is an int or a str", type(expr).__name__,
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

    @property
    def static_only(self) -> bool:
        """True when the kernel can only be compiled (no entry point or no outputs)."""
        return self.entry is None or not self.outputs

    def shape_of(self, buf: str | BufferSpec) -> tuple[int, ...]:
        """Return a buffer's concrete shape, its expressions evaluated over the params."""
        if isinstance(buf, str):
            found = {b.name: b for b in self.inputs + self.outputs}
            _need(buf in found, f"kernel {self.name!r}", f"the buffer is in {list(found)}", buf, "Use one of those.")
            buf = found[buf]
        return tuple(eval_expr(dim, self.params) for dim in buf.shape)

    def define_values(self, values: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """Return every knob's value: from ``values`` where given, else the knob's default (first value)."""
        values = dict(values or {})
        _need(set(values) <= set(self.defines), f"kernel {self.name!r}", f"defines are knobs in {list(self.defines)}",
              sorted(set(values) - set(self.defines)), "Drop the others or add them to [defines] in kernel.toml.")
        return {k: values.get(k, options[0]) for k, options in self.defines.items()}

    def define_args(self, values: Mapping[str, Any] | None = None) -> list[str]:
        """Return ``["-DNAME=value", ...]`` for every knob (sorted by name), defaults filling what ``values`` lacks."""
        return [f"-D{k}={v}" for k, v in sorted(self.define_values(values).items())]

    def launch_dims(self, values: Mapping[str, Any] | None = None) -> tuple[tuple[int, ...], tuple[int, ...], int]:
        """Return (grid, block, shared_bytes) of a CUDA kernel, evaluated over params and define values."""
        _need(self.grid and self.block, f"kernel {self.name!r}", "a [launch] table is given", None,
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
        _need(self.reference and path.is_file(), who, f"[check] names a reference and {path} exists", self.reference,
              'Add [check] reference = "reference" and a reference.py defining reference(inputs, params).')
        mod_name = f"_compileiq_reference_{self.name}_{hashlib.sha1(str(path).encode()).hexdigest()[:8]}"
        module_spec = importlib.util.spec_from_file_location(mod_name, path)
        module = importlib.util.module_from_spec(module_spec)
        sys.modules[mod_name] = module  # only while it executes (dataclasses and pickle look it up)
        try:
            module_spec.loader.exec_module(module)
        finally:
            sys.modules.pop(mod_name, None)
        func = getattr(module, self.reference, None)
        _need(callable(func), who, f"{REFERENCE_FILE} defines {self.reference}()", func, "Define it or fix [check].")
        got = func({k: np.array(v, copy=True) for k, v in inputs.items()}, dict(self.params))
        _need(isinstance(got, Mapping) and all(b.name in got for b in self.outputs), who,
              f"{self.reference}() returns a dict with keys {[b.name for b in self.outputs]}",
              sorted(got) if isinstance(got, Mapping) else type(got).__name__, "Return every [[outputs]] name.")
        expected: dict[str, np.ndarray] = {}
        for buf in self.outputs:
            arr, shape = np.asarray(got[buf.name]), self.shape_of(buf)
            _need(arr.size == int(np.prod(shape)), who, f"the reference's {buf.name} has shape {shape}", arr.shape,
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

    def with_workload(self, name: str | None) -> "KernelSpec":
        """This kernel with one of its ``[[workloads]]`` (params overridden); None: the default params.

        Raises:
            ConfigurationError: ``name`` is not one of the kernel's workloads.
        """
        import dataclasses

        if name is None:
            return self
        _need(name in self.workloads, f"kernel {self.name!r}", f"the workload is one of {list(self.workloads)}", name,
              "Use one of those, or add it as [[workloads]] in kernel.toml.")
        return dataclasses.replace(self, params={**self.params, **self.workloads[name]}, workload=name)

    def source_sha256(self) -> str:
        """Return the SHA-256 hex digest of the source file's bytes."""
        return hashlib.sha256(self.source_path.read_bytes()).hexdigest()



def kernels_root() -> Path:
    """Return the bundled kernels folder: ``$COMPILEIQ_KERNELS`` if set, else the repository's ``kernels/``."""
    env = os.environ.get(ENV_VAR, "").strip()
    return Path(env).expanduser().resolve() if env else Path(__file__).resolve().parents[1] / "kernels"


def list_kernels() -> list[str]:
    """Return the sorted names of the bundled kernels (folders of ``kernels_root()`` with a kernel.toml)."""
    root = kernels_root()
    if not root.is_dir():
        log.warning("kernels folder %s does not exist; set %s to a folder of kernels", root, ENV_VAR)
        return []
    return sorted(p.name for p in root.iterdir() if (p / SPEC_FILE).is_file())


def load_kernel(name_or_path: str | os.PathLike[str]) -> KernelSpec:
    """Load a kernel: a bundled name ("dot"; wins over a local folder "dot", use "./dot"), a kernel folder,
    its kernel.toml, or a bare .cu/.c file (a static-only spec: language from the suffix, no entry, no buffers).

    Raises:
        ConfigurationError: Nothing is found, or the spec breaks a rule (the message says which and the fix).
    """
    text = os.fspath(name_or_path)
    if _IDENT.match(text) and (kernels_root() / text / SPEC_FILE).is_file():
        return _load_folder(kernels_root() / text)
    path = Path(text).expanduser()
    if path.is_dir() or path.name == SPEC_FILE and path.is_file():
        return _load_folder(path if path.is_dir() else path.parent)
    language, path = {v: k for k, v in LANGUAGES.items()}.get(path.suffix), path.resolve()
    if path.is_file() and language:
        return KernelSpec(name=path.stem, language=language, source=path.name, entry=None, folder=path.parent,
                          source_path=path, description=f"static-only {language} file {path.name}")
    raise ConfigurationError(f"load_kernel: `the kernel is a bundled name, a folder with {SPEC_FILE} or a .cu/.c "
                             f"file` must hold, but got {text!r}. Use one of {list_kernels()} or fix the path.")


def _load_folder(folder: Path) -> KernelSpec:
    folder, spec_path = folder.resolve(), folder / SPEC_FILE
    _need(spec_path.is_file(), "load_kernel", f"{spec_path} exists", "no such file", f"Add a {SPEC_FILE} there.")
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        raise OptionalDependencyError("reading kernel.toml needs Python >= 3.11 (tomllib)") from None
    try:
        data = tomllib.loads(spec_path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise ConfigurationError(f"{spec_path}: `it is valid TOML` must hold, but got {exc}. Fix the syntax.") from None
    return _SpecParser(data, folder).parse()


class _SpecParser:
    """Validates one kernel.toml document and builds its KernelSpec."""

    def __init__(self, data: dict[str, Any], folder: Path) -> None:
        self.data, self.folder, self.name = data, folder, data.get("name", folder.name)

    def need(self, ok: Any, rule: str, got: Any, fix: str) -> None:
        _need(ok, f"kernel.toml of {self.name!r}", rule, got, fix)

    def table(self, value: Any, section: str) -> dict[str, Any]:
        self.need(isinstance(value, dict), f"[{section}] is a table", value, f"Write [{section}] as a TOML table.")
        allowed = _TABLES.get(section, tuple(value))
        self.need(set(value) <= set(allowed), f"{section or 'top-level'} keys are in {list(allowed)}",
                  sorted(set(value) - set(allowed)), "Remove or rename the others.")
        return value

    def ident(self, value: Any, what: str) -> str:
        self.need(isinstance(value, str) and _IDENT.match(value), f"{what} is an identifier", value,
                  "Use letters, digits and _, not starting with a digit.")
        return value

    def parse(self) -> KernelSpec:
        d = self.table(self.data, "")
        self.need(all(k in d for k in _REQUIRED), f"the keys {list(_REQUIRED)} are present",
                  [k for k in _REQUIRED if k not in d], "Add the missing keys.")
        self.need(d["name"] == self.folder.name, f"name == folder name {self.folder.name!r}", d["name"],
                  f'Set name = "{self.folder.name}" or rename the folder.')
        self.need(d["language"] in LANGUAGES, f"language in {list(LANGUAGES)}", d["language"],
                  'Set language = "cuda" or "c".')
        self.need(isinstance(d["source"], str) and (self.folder / d["source"]).is_file(),
                  f"source names a file in {self.folder}", d["source"], "Fix source or add the file.")
        entry = self.ident(d["entry"], "entry")
        self.need(d["language"] != "c" or entry == C_ENTRY, f'a C kernel has entry == "{C_ENTRY}"', entry,
                  f'Set entry = "{C_ENTRY}" and define void {C_ENTRY}(void **bufs, const long *params).')
        self.need(isinstance(desc := d.get("description", ""), str), "description is a string", desc, "Write a line.")
        fields = dict(name=d["name"], language=d["language"], source=d["source"], entry=entry, folder=self.folder,
                      source_path=(self.folder / d["source"]).resolve(), description=desc)
        fields.update(self.symbols_and_buffers(d))
        fields.update(self.check_and_run(self.table(d.get("check", {}), "check"), self.table(d.get("run", {}), "run")))
        fields.update(self.launch(self.table(d.get("launch", {}), "launch"), fields))
        fields["workloads"] = self.workloads(d.get("workloads", []), fields["params"])
        spec = KernelSpec(**fields)
        for variant in [spec] + [spec.with_workload(w) for w in spec.workloads]:
            try:  # evaluate every shape and launch expression once, so broken ones fail at load
                shapes = {b.name: variant.shape_of(b) for b in variant.inputs + variant.outputs}
                variant.launch_dims() if variant.grid is not None else None
            except ConfigurationError as exc:
                raise ConfigurationError(f"kernel.toml of {self.name!r}"
                                         f"{' workload ' + repr(variant.workload) if variant.workload else ''}: {exc}") from None
            self.need(all(min(s) >= 1 for s in shapes.values()), "every buffer dim is >= 1",
                      {k: s for k, s in shapes.items() if min(s) < 1}, "Fix the shapes or the params.")
        return spec

    def workloads(self, entries: Any, params: dict[str, int]) -> dict[str, dict[str, int]]:
        self.need(isinstance(entries, list), "workloads is a list of tables", entries, "Write [[workloads]].")
        out: dict[str, dict[str, int]] = {}
        for t in entries:
            t = self.table(t, "workloads")
            name = self.ident(t.get("name"), "[[workloads]] name")
            self.need(name not in out, "workload names are distinct", name, "Rename the duplicate.")
            over = t.get("params", {})
            self.need(isinstance(over, dict) and over and set(over) <= set(params)
                      and all(type(v) is int for v in over.values()),
                      f"workload {name} overrides some of the params {list(params)} with ints", over,
                      f'Write params = {{ {next(iter(params), "n")} = 4096 }}.')
            out[name] = dict(over)
        return out

    def symbols_and_buffers(self, d: dict[str, Any]) -> dict[str, Any]:
        defines, params = self.table(d.get("defines", {}), "defines"), self.table(d.get("params", {}), "params")
        for k, v in defines.items():
            self.need(isinstance(v, list) and v and all(type(x) in (int, float, str) for x in v),
                      f"define {self.ident(k, 'each define name')} is a non-empty list of ints, floats or strings",
                      v, f"Write {k} = [default, other values...].")
        for k, v in params.items():
            self.need(type(v) is int, f"param {self.ident(k, 'each param name')} is an int", v, f"Write {k} = <int>.")
        bufs: dict[str, Any] = {}
        for section in ("inputs", "outputs"):
            entries = d.get(section, [])
            self.need(isinstance(entries, list), f"{section} is a list of tables", entries, f"Write [[{section}]].")
            bufs[section] = tuple(self.buffer(self.table(t, section), section) for t in entries)
        names = list(defines) + list(params) + [b.name for b in bufs["inputs"] + bufs["outputs"]]
        self.need(len(set(names)) == len(names), "define, param and buffer names are distinct",
                  sorted({n for n in names if names.count(n) > 1}), "Rename the duplicates.")
        return dict(defines={k: tuple(v) for k, v in defines.items()}, params=dict(params), **bufs)

    def buffer(self, t: dict[str, Any], section: str) -> BufferSpec:
        self.need(all(k in t for k in ("name", "dtype", "shape")), f"each [[{section}]] has name, dtype and shape",
                  sorted(t), "Add the missing keys.")
        name, init, shape = self.ident(t["name"], f"[[{section}]] name"), t.get("init", "uniform"), t["shape"]
        self.need(t["dtype"] in DTYPES, f"dtype of {name} in {list(DTYPES)}", t["dtype"], "Pick one of those.")
        self.need(section == "outputs" or init in INITS, f"init of {name} in {list(INITS)}", init, "Pick one of those.")
        self.need(isinstance(shape, list) and shape and all(type(s) in (int, str) for s in shape),
                  f"shape of {name} is a non-empty list of ints or expressions", shape, 'Write shape = ["n", 4].')
        return BufferSpec(name, t["dtype"], tuple(shape), init if section == "inputs" else None)

    def check_and_run(self, check: dict[str, Any], run: dict[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = {**check, **run}
        if check:
            self.ident(check.get("reference"), "[check] reference")
            self.need((self.folder / REFERENCE_FILE).is_file(), f"{REFERENCE_FILE} is next to kernel.toml",
                      "no such file", f"Add {REFERENCE_FILE} defining {check['reference']}(inputs, params).")
        for key, low, kinds, example in (("rtol", 0, (int, float), "1e-5"), ("atol", 0, (int, float), "1e-6"),
                                         ("seed", 0, (int,), "0"), ("repeats", 1, (int,), "10")):
            kind = "a number" if float in kinds else "an int"
            self.need(type(out.get(key, low)) in kinds and out.get(key, low) >= low, f"{key} is {kind} >= {low}",
                      out.get(key), f"Write {key} = {example}.")
        return out

    def launch(self, launch: dict[str, Any], fields: dict[str, Any]) -> dict[str, Any]:
        self.need(fields["language"] == "cuda" or not launch, "only CUDA kernels have [launch]", sorted(launch),
                  "Remove [launch]: cil_kernel gets its buffers and params as arrays.")
        if fields["language"] == "c" or not (launch or fields["outputs"]):
            return {}
        self.need(all(k in launch for k in ("grid", "block", "args")), "[launch] has grid, block and args",
                  sorted(launch), "Add the missing keys.")
        for key, dims in (("grid", launch["grid"]), ("block", launch["block"])):
            self.need(isinstance(dims, list) and 1 <= len(dims) <= 3 and all(type(x) in (int, str) for x in dims),
                      f"[launch] {key} is a list of 1 to 3 ints or expressions", dims, f'Write {key} = ["n", 1, 1].')
        known, args = list(fields["params"]) + [b.name for b in fields["inputs"] + fields["outputs"]], launch["args"]
        self.need(isinstance(args, list) and all(a in known for a in args), f"[launch] args are names in {known}",
                  [a for a in args if a not in known] if isinstance(args, list) else args,
                  "Name only buffers and params, in the kernel's argument order.")
        return dict(grid=tuple(launch["grid"]), block=tuple(launch["block"]), args=tuple(args),
                    shared_bytes=launch.get("shared_bytes", 0))
