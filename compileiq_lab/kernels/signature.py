"""Whether a kernel spec's launch arguments fit the kernel's parameters, as its PTX declares them."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from compileiq_lab.exceptions import ConfigurationError
from compileiq_lab.kernels.spec import KernelSpec
from compileiq_lab.measure.entries import ptx_entries, ptx_param_types, resolve_entry
from compileiq_lab.measure.nvcc import CudaCompiler

__all__ = ["launch_problem", "signature_problem"]

#: How each kind of launch argument is passed: a buffer as a device pointer, a param as a 32-bit int.
_POINTER, _INT32 = ("u64", "s64", "b64"), ("u32", "s32", "b32")
_KINDS = {"f32": "a float", "f64": "a double", "u64": "a 64-bit integer (size_t, long)",
          "s64": "a 64-bit integer (size_t, long)", "u16": "a 16-bit integer", "s16": "a 16-bit integer",
          "u8": "an 8-bit integer", "s8": "an 8-bit integer"}


def signature_problem(kernel: KernelSpec, entry: str, types: Sequence[str]) -> str:
    """Why ``kernel``'s ``[launch] args`` do not fit the parameters ``types`` (``ptx_param_types``) of ``entry``, or
    "" when they do: a buffer is passed as a device pointer (64 bits), a ``[params]`` value as a 32-bit int."""
    args = list(kernel.args or ())
    buffers = {b.name for b in kernel.inputs + kernel.outputs}
    where = f"kernel {kernel.name!r}: [launch] args"
    if len(args) != len(types):
        return (f"{where} must give one value per parameter of {entry}, but it names {len(args)} ({', '.join(args)}) "
                f"and the kernel takes {len(types)} (PTX types {', '.join(types) or 'none'}); list them in the order "
                "of the kernel's parameters")
    bad = []
    for i, (arg, ptx) in enumerate(zip(args, types)):
        if arg in buffers and ptx not in _POINTER:
            bad.append(f"{arg} is a buffer, passed as a pointer, where parameter {i} is .{ptx}")
        elif arg not in buffers and ptx not in _INT32:
            kind = _KINDS.get(ptx, "a struct passed by value" if "[" in ptx else f"a .{ptx}")
            bad.append(f"{arg} is a [params] value, passed as a 32-bit int, where parameter {i} is {kind} (.{ptx})")
    if not bad:
        return ""
    return (f"{where} must fit {entry}'s parameters, but {'; '.join(bad)}. Buffers go to pointer parameters and "
            "[params] to int parameters (float, 64-bit and struct scalar arguments are not supported): declare the "
            "parameter int, or make the value a -D knob ([defines]) the kernel reads")


def launch_problem(kernel: KernelSpec, arch: str, workdir: Path, timeout_s: float) -> str:
    """``signature_problem`` of a CUDA or PTX kernel with a ``[launch]``, its PTX made once with the knobs' defaults
    (a ``.cu`` source, by ``nvcc -ptx``), or "" when it has no launch or its PTX does not build (the run says why)."""
    if not kernel.args or kernel.language not in ("cuda", "ptx"):
        return ""
    if kernel.language == "ptx":
        text = kernel.source_path.read_text(errors="replace")
    else:
        try:
            outcome = CudaCompiler(arch, workdir, timeout_s, kernel.build).ptx(kernel.source_path,
                                                                               kernel.define_args())
        except ConfigurationError:
            return ""
        if not outcome.ok or outcome.path is None:
            return ""
        text = outcome.path.read_text(errors="replace")
    try:
        entry = resolve_entry(kernel.entry or "", ptx_entries(text), kernel.source)
    except ConfigurationError:
        return ""  # the run's own build names the entry problem
    types = ptx_param_types(text, entry)
    return "" if types is None else signature_problem(kernel, entry, types)
