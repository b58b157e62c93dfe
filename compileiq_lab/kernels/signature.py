"""Whether a kernel spec's launch fits the kernel as its PTX declares it: the arguments its parameters (and, for a C++
kernel, its mangled name's types), the block its threads-per-block directives."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path

from compileiq_lab.exceptions import ConfigurationError
from compileiq_lab.kernels.spec import GPU_LANGUAGES, KernelSpec
from compileiq_lab.measure.entries import (
    cpp_param_types,
    demangle,
    ptx_entries,
    ptx_entry_threads,
    ptx_param_types,
    resolve_entry,
)
from compileiq_lab.measure.nvcc import CudaCompiler
from compileiq_lab.measure.scalars import buffer_problem, scalar_problem

__all__ = ["block_problem", "launch_problem", "launch_types", "signature_problem"]

#: A message names at most this many mismatched arguments.
_LISTED = 4


def signature_problem(kernel: KernelSpec, entry: str, types: Sequence[str], cpp: Sequence[str] | None = None) -> str:
    """Why ``kernel``'s ``[launch] args`` do not fit the parameters of ``entry`` (the kernel as a message names it: its
    demangled signature), or "" when they do. ``types``: their PTX types (``ptx_param_types``); ``cpp``: their C++
    types (``cpp_param_types``, a C++ kernel's), which tell a pointer from a 64-bit int, signed from unsigned and a
    pointer's element type. A buffer goes to a pointer (of its dtype's element type where that is a plain number), a
    ``[params]`` value to a number parameter it fits."""
    args = list(kernel.args or ())
    buffers = {b.name: b for b in kernel.inputs + kernel.outputs}
    where = f"kernel {kernel.name!r}: [launch] args"
    known: Sequence[str | None] = cpp if cpp is not None and len(cpp) == len(types) else [None] * len(types)
    shown = [c if c is not None else f".{t}" for c, t in zip(known, types)]
    if len(args) != len(types):
        return (f"{where} must give one value per parameter of {entry}, but it names {len(args)} "
                f"({', '.join(args)}) and the kernel takes {len(types)} ({', '.join(shown) or 'none'}); list them in "
                "the order of the kernel's parameters")
    bad = []
    for i, (arg, ptx, c) in enumerate(zip(args, types, known)):
        at = f"parameter {i + 1} ({shown[i]})"
        if arg in buffers:
            if why := buffer_problem(buffers[arg].dtype, ptx, c):
                bad.append(f"buffer {arg} ({buffers[arg].dtype}) goes to {at}, which needs {why}")
        elif why := scalar_problem(kernel.params[arg], ptx, c):
            bad.append(f"[params] {arg} = {kernel.params[arg]!r} goes to {at}, which needs {why}")
    if not bad:
        return ""
    more = f"; and {len(bad) - _LISTED} more" if len(bad) > _LISTED else ""
    return (f"{where} must fit the parameters of {entry}, but {'; '.join(bad[:_LISTED])}{more}. Buffers go to "
            "pointer parameters and [params] values to number parameters, in the kernel's order: fix the order, the "
            "dtype or the value (a struct or __half passed by value is not supported: launch a wrapper kernel that "
            "takes numbers)")


def block_problem(kernel: KernelSpec, entry: str, threads: Mapping[str, tuple[int, int, int]]) -> str:
    """Why ``kernel``'s ``[launch] block`` (at its knobs' defaults) cannot launch ``entry``, whose PTX declares
    ``threads`` (``ptx_entry_threads``: ``__launch_bounds__`` writes ``.maxntid``), or "" when it can: a launch with
    more threads than ``.maxntid``, or another block than ``.reqntid``, fails on every config."""
    if not threads:
        return ""
    try:
        block = kernel.launch_dims()[1]
    except (ConfigurationError, KeyError, ValueError, ZeroDivisionError):
        return ""  # a block its expressions cannot give: the run's own checks say so
    where = f"kernel {kernel.name!r}: [launch] block"
    shown = "x".join(map(str, block))
    required = threads.get("reqntid")
    if required is not None and tuple(block) != required:
        return (f"{where} must be the block {entry} requires (.reqntid {', '.join(map(str, required))}), but it is "
                f"{shown}; a launch with any other block fails: launch it with that block, or drop the "
                ".reqntid directive")
    most = threads.get("maxntid")
    if most is not None and math.prod(block) > math.prod(most):
        return (f"{where} must have at most the threads per block {entry} allows ({math.prod(most)}: .maxntid "
                f"{', '.join(map(str, most))}, which __launch_bounds__ writes), but it has {math.prod(block)} "
                f"({shown}); a launch with more fails: launch at most {math.prod(most)} threads per block, or raise "
                "the kernel's bound")
    return ""


def launch_types(kernel: KernelSpec, arch: str, workdir: Path, timeout_s: float) -> tuple[str, tuple[str, ...]]:
    """``signature_problem`` (else ``block_problem``) of a CUDA or PTX kernel with a ``[launch]`` and its entry's PTX
    parameter types, the PTX made once with the knobs' defaults (a ``.cu`` source, by ``nvcc -ptx``); ("", ()) when it
    has no launch or its PTX does not build (the run says why)."""
    if not kernel.args or kernel.language not in GPU_LANGUAGES:
        return "", ()
    if kernel.language == "ptx":
        text = kernel.source_path.read_text(errors="replace")
    else:
        try:
            outcome = CudaCompiler(arch, workdir, timeout_s, kernel.build).ptx(kernel.source_path,
                                                                               kernel.define_args())
        except ConfigurationError:
            return "", ()
        if not outcome.ok or outcome.path is None:
            return "", ()
        text = outcome.path.read_text(errors="replace")
    try:
        entry = resolve_entry(kernel.entry or "", ptx_entries(text), kernel.source)
    except ConfigurationError:
        return "", ()  # the run's own build names the entry problem
    types = ptx_param_types(text, entry)
    if types is None:
        return "", ()
    readable = demangle([entry])[entry]  # once: each workload's check names it
    cpp = cpp_param_types(readable)
    threads = ptx_entry_threads(text, entry)
    for variant in [kernel] + [kernel.with_workload(w) for w in kernel.workloads]:  # each workload's values too
        problem = signature_problem(variant, readable, types, cpp) or block_problem(variant, readable, threads)
        if problem:
            if variant.workload:  # (the first "[launch] " is the message's subject, args or block)
                problem = problem.replace("[launch] ", f"workload {variant.workload!r}: [launch] ", 1)
            return problem, tuple(types)
    return "", tuple(types)


def launch_problem(kernel: KernelSpec, arch: str, workdir: Path, timeout_s: float) -> str:
    """``launch_types``' problem alone: why the kernel's launch arguments do not fit its entry, or ""."""
    return launch_types(kernel, arch, workdir, timeout_s)[0]
