"""Whether a kernel spec's launch arguments fit the kernel's parameters, as its PTX declares them."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from compileiq_lab.exceptions import ConfigurationError
from compileiq_lab.kernels.spec import KernelSpec
from compileiq_lab.measure.entries import ptx_entries, ptx_param_types, resolve_entry
from compileiq_lab.measure.nvcc import CudaCompiler
from compileiq_lab.measure.scalars import POINTER_TYPES, scalar_problem

__all__ = ["launch_problem", "launch_types", "signature_problem"]


def signature_problem(kernel: KernelSpec, entry: str, types: Sequence[str]) -> str:
    """Why ``kernel``'s ``[launch] args`` do not fit the parameters ``types`` (``ptx_param_types``) of ``entry``, or
    "" when they do: a buffer is passed as a device pointer (64 bits), a ``[params]`` value with its parameter's type
    (an int to an integer of any width it fits, an int or float to a float or double)."""
    args = list(kernel.args or ())
    buffers = {b.name for b in kernel.inputs + kernel.outputs}
    where = f"kernel {kernel.name!r}: [launch] args"
    if len(args) != len(types):
        return (f"{where} must give one value per parameter of {entry}, but it names {len(args)} ({', '.join(args)}) "
                f"and the kernel takes {len(types)} (PTX types {', '.join(types) or 'none'}); list them in the order "
                "of the kernel's parameters")
    bad = []
    for i, (arg, ptx) in enumerate(zip(args, types)):
        if arg in buffers:
            if ptx not in POINTER_TYPES:
                bad.append(f"{arg} is a buffer, passed as a pointer, where parameter {i} is .{ptx}")
        elif why := scalar_problem(kernel.params[arg], ptx):
            bad.append(f"[params] {arg} = {kernel.params[arg]!r} goes to parameter {i}, which needs {why}")
    if not bad:
        return ""
    return (f"{where} must fit {entry}'s parameters, but {'; '.join(bad)}. Buffers go to pointer parameters and "
            "[params] values to int, float or double parameters (a struct or __half by value is not supported): fix "
            "the value or the order, or make the value a -D knob ([defines]) the kernel reads")


def launch_types(kernel: KernelSpec, arch: str, workdir: Path, timeout_s: float) -> tuple[str, tuple[str, ...]]:
    """``signature_problem`` of a CUDA or PTX kernel with a ``[launch]`` and its entry's PTX parameter types, the PTX
    made once with the knobs' defaults (a ``.cu`` source, by ``nvcc -ptx``); ("", ()) when it has no launch or its PTX
    does not build (the run says why)."""
    if not kernel.args or kernel.language not in ("cuda", "ptx"):
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
    for variant in [kernel] + [kernel.with_workload(w) for w in kernel.workloads]:  # each workload's values too
        problem = signature_problem(variant, entry, types)
        if problem:
            return (problem.replace("[launch] args", f"workload {variant.workload!r}: [launch] args", 1)
                    if variant.workload else problem), tuple(types)
    return "", tuple(types)


def launch_problem(kernel: KernelSpec, arch: str, workdir: Path, timeout_s: float) -> str:
    """``launch_types``' problem alone: why the kernel's launch arguments do not fit its entry, or ""."""
    return launch_types(kernel, arch, workdir, timeout_s)[0]
