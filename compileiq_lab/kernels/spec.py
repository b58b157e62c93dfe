"""Kernel specs: what a kernel needs to be compiled, fed, launched and checked (BufferSpec, KernelSpec)."""

from __future__ import annotations

import hashlib
import importlib.util
import logging
import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from compileiq_lab.exceptions import ConfigurationError
from compileiq_lab.kernels.rules import (
    MAX_EXPR_CHARS,
    eval_expr,
    fail,
    need,
    one_line,
    raised_in,
    show_bytes,
    show_int,
)
from compileiq_lab.space.catalogs.cuda import FIXED_ARG_RULE, fixed_arg_fix, fixed_arg_problem
from compileiq_lab.toolchain.context import CUDA_ARG_PREFIXES, BuildContext
from compileiq_lab.toolchain.nvidia_acf import NvidiaAcf

__all__ = ["MAX_BUFFER_BYTES", "MAX_DIMS", "MAX_EXPR_CHARS", "BufferSpec", "KernelSpec", "derive_params", "eval_expr",
           "fail", "need", "raised_in", "refuse_fixed_controls", "show_bytes", "show_int"]

log = logging.getLogger(__name__)

SPEC_FILE = "kernel.toml"
REFERENCE_FILE = "reference.py"
LANGUAGES = {"cuda": ".cu", "c": ".c", "ptx": ".ptx"}
#: Languages of kernels that ptxas assembles into a cubin for a GPU (a .ptx has no front end: ptxas controls only).
GPU_LANGUAGES = ("cuda", "ptx")
#: Buffer element types (NumPy's names; ``float16`` is CUDA's ``__half``).
DTYPES = ("float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")
INITS = ("uniform", "normal", "zeros", "ones", "arange")
IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
#: Bytes of all the buffers of one kernel (inputs and outputs together). Each is made in host memory, inputs
#: through a float64 draw first, and copied again for the reference and the device: 4 GiB keeps that within a
#: workstation's memory while leaving room for realistic tuning sizes (a 32k x 32k float32 matrix).
MAX_BUFFER_BYTES = 4 << 30
#: Dims of one buffer (NumPy 1.x handles no more).
MAX_DIMS = 32


def _reference_error(who: str, path: Path, doing: str, exc: BaseException) -> ConfigurationError:
    """The one-line error for a reference.py that raised (or exited) while ``doing``: what it raised and where."""
    return ConfigurationError(f"{who}: `{path} runs without raising` must hold, but {doing} raised "
                              f"{raised_in(path, exc)}. "
                              f"Fix {REFERENCE_FILE}: importing it must neither raise nor exit, and the reference "
                              "function must return the outputs for the generated inputs.")


@dataclass(frozen=True)
class BufferSpec:
    """One generated input or expected output buffer.

    Attributes:
        name: Buffer name: the key in input/output dicts and in launch args.
        dtype: One of ``DTYPES`` ("float16", "float32", "float64", signed and unsigned ints of 8 to 64 bits).
        shape: Ints, param names or expressions over params, e.g. ``("n * n",)``.
        init: How an input is filled: uniform in [-1, 1) ([-100, 100) for signed ints, [0, 100) for unsigned),
            normal, zeros, ones, arange (wrapping where the type is narrower than the count); None for outputs.
    """

    name: str
    dtype: str
    shape: tuple[int | str, ...]
    init: str | None = None


def refuse_fixed_controls(args: Sequence[str], who: str) -> None:
    """Refuse fixed arguments of a CUDA build that are compiler controls or output choices (``fixed_arg_problem``),
    naming the control and the fix.

    Raises:
        ConfigurationError: For the first such argument.
    """
    for arg in args:
        problem = fixed_arg_problem(arg)
        need(problem is None, who, FIXED_ARG_RULE, arg, fixed_arg_fix(str(problem)))


def derive_params(params: Mapping[str, int | float], derived: Mapping[str, str], who: str) -> dict[str, int | float]:
    """``params`` (in order) with each ``derived`` one set to its int expression's value over the int params before
    it (see ``eval_expr``).

    Raises:
        ConfigurationError: An expression is not integer arithmetic over the int params declared before it.
    """
    out: dict[str, int | float] = {}
    for k, v in params.items():
        if k in derived:
            ints = {n: x for n, x in out.items() if type(x) is int}
            try:
                v = eval_expr(derived[k], ints)
            except ConfigurationError as exc:
                raise ConfigurationError(f"{who}: param {k} = {derived[k]!r}: {exc} (an expression param uses the int "
                                         "params declared before it)") from None
        out[k] = v
    return out


@dataclass(frozen=True)
class KernelSpec:
    """A kernel and all that is needed to compile, feed, launch and check it (see kernel.toml).

    ``defines`` maps each -D knob to its values (first = default); ``params`` holds the scalars (ints, and for
    a CUDA or PTX kernel floats: shape and launch expressions use the ints); ``grid``/``block``/``shared_bytes``/
    ``args`` describe a CUDA launch, and ``arg_types`` the entry's PTX parameter types the scalars are passed as
    (set by the run from the kernel's PTX; empty: not read). ``derived`` holds the params given as int expressions
    over the params declared before them (``Tc = "(N + Bc - 1) // Bc"``), evaluated again for each workload. A spec
    without ``entry`` or outputs (e.g. a bare source file) is static-only: compiled, never run.
    ``spec_file`` is the kernel.toml it was read from (None for a bare source file); ``origin`` says how a
    generated source was made (e.g. the Triton function, signature, constexprs and versions of a Triton kernel's PTX);
    ``nvidia_acfs`` holds NVIDIA control files searched as one more control (by label).
    """

    name: str
    language: str
    source: str
    entry: str | None
    folder: Path
    source_path: Path
    description: str = ""
    defines: dict[str, tuple[Any, ...]] = field(default_factory=dict)
    params: dict[str, int | float] = field(default_factory=dict)
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
    arg_types: tuple[str, ...] = ()
    derived: dict[str, str] = field(default_factory=dict)
    workloads: dict[str, dict[str, int | float]] = field(default_factory=dict)
    workload: str | None = None
    spec_file: Path | None = None
    build: BuildContext = field(default_factory=BuildContext)
    origin: dict[str, Any] = field(default_factory=dict)
    nvidia_acfs: dict[str, NvidiaAcf] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.language == "cuda":
            refuse_fixed_controls(self.build.args, f"kernel {self.name!r}")
        cuda_only = [a for a in self.build.args if self.language == "c" and a.startswith(CUDA_ARG_PREFIXES)]
        need(not cuda_only, f"kernel {self.name!r}", "a C kernel's fixed arguments are ones its compiler takes",
             cuda_only[:1], "That is a CUDA compiler's switch, which gcc and clang refuse: drop it (theirs are "
             "-ffast-math, -fno-math-errno ...).")

    @property
    def int_params(self) -> dict[str, int]:
        """The int ``params``: the names shape and launch expressions may use."""
        return {k: v for k, v in self.params.items() if type(v) is int}

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
        return tuple(eval_expr(dim, self.int_params) for dim in buf.shape)

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
            values = {**self.int_params, **{k: v for k, v in zip(names, combo) if type(v) is int}}
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
        names = {**self.int_params, **{k: v for k, v in self.define_values(values).items() if type(v) is int}}
        grid, block = (tuple(eval_expr(e, names) for e in dims) + (1,) * (3 - len(dims))
                       for dims in (self.grid, self.block))
        return grid, block, eval_expr(self.shared_bytes, names)

    def make_inputs(self, seed: int | None = None) -> dict[str, np.ndarray]:
        """Generate the C-contiguous inputs, deterministic by ``seed`` (default: ``[run] seed``)."""
        rng = np.random.default_rng(self.seed if seed is None else seed)
        out: dict[str, np.ndarray] = {}
        for buf in self.inputs:
            shape, dtype, size = self.shape_of(buf), np.dtype(buf.dtype), int(np.prod(self.shape_of(buf)))
            data: np.ndarray
            if buf.init == "uniform":
                if dtype.kind in "iu":
                    data = rng.integers(-100 if dtype.kind == "i" else 0, 100, size)
                else:
                    data = rng.uniform(-1.0, 1.0, size)
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
        except KeyboardInterrupt:
            raise
        except BaseException as exc:  # noqa: BLE001 - SystemExit too: the user's file must not end this process
            raise _reference_error(who, path, "importing it", exc) from None
        finally:
            sys.modules.pop(mod_name, None)
        func = getattr(module, self.reference, None)
        if not callable(func):
            raise fail(who, f"{REFERENCE_FILE} defines {self.reference}()", func, "Define it or fix [check].")
        try:
            got = func({k: np.array(v, copy=True) for k, v in inputs.items()}, dict(self.params))
        except KeyboardInterrupt:
            raise
        except BaseException as exc:  # noqa: BLE001 - as above
            raise _reference_error(who, path, f"calling {self.reference}(inputs, params)", exc) from None
        need(isinstance(got, Mapping) and all(b.name in got for b in self.outputs), who,
              f"{self.reference}() returns a dict with keys {[b.name for b in self.outputs]}",
              sorted(map(repr, got)) if isinstance(got, Mapping) else type(got).__name__,
              "Return every [[outputs]] name.")
        expected: dict[str, np.ndarray] = {}
        for buf in self.outputs:
            shape = self.shape_of(buf)
            try:
                arr = np.asarray(got[buf.name])
            except Exception as exc:  # noqa: BLE001 - a ragged list, an object NumPy cannot take
                raise fail(who, f"the reference's {buf.name} is an array of numbers", type(got[buf.name]).__name__,
                           f"Return a NumPy array for {buf.name} ({type(exc).__name__}: {one_line(exc)}).") from None
            need(arr.dtype.kind in "biuf", who, f"the reference's {buf.name} is an array of numbers",
                 f"dtype {arr.dtype}", f"Return a NumPy array of numbers for {buf.name} from {REFERENCE_FILE}.")
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
        over = self.workloads[name]
        derived = {k: e for k, e in self.derived.items() if k not in over}  # a workload's own value wins
        params = derive_params({**self.params, **over}, derived, f"kernel {self.name!r} workload {name!r}")
        return dataclasses.replace(self, params=params, derived=derived, workload=name)

    def source_sha256(self) -> str:
        """Return the SHA-256 hex digest of the source file's bytes."""
        return hashlib.sha256(self.source_path.read_bytes()).hexdigest()

    def spec_sha256(self) -> str | None:
        """SHA-256 of what decides a kernel folder's inputs and output check: its kernel.toml and reference.py bytes
        (None for a bare file, which has neither)."""
        if self.spec_file is None:
            return None
        h = hashlib.sha256()
        for f in (self.spec_file, self.folder / REFERENCE_FILE):
            h.update(f.name.encode() + b"\0" + (f.read_bytes() if f.is_file() else b"") + b"\0")
        return h.hexdigest()
