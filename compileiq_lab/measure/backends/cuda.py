"""CUDA through nvcc and ptxas: two-stage (cached PTX, then ptxas per back-end set), one full nvcc call each, or a
given PTX module through ptxas alone."""

from __future__ import annotations

import dataclasses
import hashlib
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path

from compileiq_lab.exceptions import ConfigurationError
from compileiq_lab.measure.backends.base import CUBIN_METRICS, EntryResolver
from compileiq_lab.measure.build import CompileOutcome
from compileiq_lab.measure.entries import cubin_entries, ptx_entries, ptx_header
from compileiq_lab.measure.nvcc import CudaCompiler, parse_ptxas_verbose, ptx_problem
from compileiq_lab.toolchain.context import BuildContext
from compileiq_lab.toolchain.tools import tool_version

__all__ = ["CudaFull", "CudaTwoStage", "PtxModule"]


class CudaTwoStage:
    """``nvcc -ptx`` once per front-end argument set (cached on disk), then ``ptxas -v`` per back-end set.

    Args:
        source: The .cu file.
        entry: The kernel whose metrics and code are reported, as the user spells it (plain C++ name, mangled name,
            or a demangled template instantiation); None: the whole module (ptxas metrics: the worst kernel).
        arch: Target, e.g. "sm_90".
        workdir: Where the PTX cache and cubins go.
        timeout_s: Limit per compiler process.
        context: Include directories, fixed defines and extra arguments of every front-end call.
    """

    name: str = "cuda"
    stages: tuple[str, ...] = ("frontend", "backend")
    binary_kind: str = "cubin"

    def __init__(self, source: Path, entry: str | None, arch: str, workdir: Path, timeout_s: float,
                 context: BuildContext | None = None) -> None:
        self.source, self.entry = source, entry
        self.cc = CudaCompiler(arch, workdir, timeout_s, context)
        self.resolver = EntryResolver(entry, source)

    def compile(self, argv: Mapping[str, Sequence[str]]) -> CompileOutcome:
        ptx = self.cc.ptx(self.source, argv["frontend"])
        if not ptx.ok or ptx.path is None:
            return dataclasses.replace(ptx, stage="frontend")
        path = ptx.path
        symbol, problem = self.resolver.resolve(str(path), lambda: ptx_entries(path.read_text(errors="replace")))
        if problem:
            return CompileOutcome("compile_error", error=problem, argv=ptx.argv, stage="entry", log=ptx.log)
        out = self.cc.cubin(path, argv["backend"], symbol, source=self.source)
        out.metrics.update(ptx.metrics)
        out.log, out.symbol = ptx.log + out.log, symbol
        return out if out.ok else dataclasses.replace(out, stage="backend")

    def metrics(self) -> frozenset[str]:
        return CUBIN_METRICS

    def toolchain(self) -> dict[str, str]:
        return {"nvcc": self.cc.version, "ptxas": tool_version(self.cc.ptxas)}


class CudaFull(CudaTwoStage):
    """One full ``nvcc -cubin`` call per candidate (back-end arguments through ``-Xptxas``)."""

    name: str = "nvcc"

    def compile(self, argv: Mapping[str, Sequence[str]]) -> CompileOutcome:
        out = self.cc.full(self.source, argv["frontend"], argv["backend"], None)
        return resolve_in_cubin(out, self.resolver)


class PtxModule:
    """A PTX file (from ``nvcc -ptx``, Triton, or written by hand) assembled by ptxas alone, per back-end set.

    The module is copied into the work folder under a name made of its content and the arch, so an edited file is
    a new cache entry. Its ``.version`` and ``.target`` are checked against ``arch`` and the installed ptxas first.

    Args:
        source: The .ptx file.
        entry: The kernel whose metrics and code are reported (its name in the PTX), or None: the whole module.
        arch: Target, e.g. "sm_90a" (by default the module's own ``.target``).
        workdir: Where the copied module and the cubins go.
        timeout_s: Limit per ptxas process.

    Raises:
        ConfigurationError: ptxas cannot assemble this module's ISA version or target for ``arch`` (the message
            names both and what ptxas said).
    """

    name: str = "ptx"
    stages: tuple[str, ...] = ("frontend", "backend")
    binary_kind: str = "cubin"

    def __init__(self, source: Path, entry: str | None, arch: str, workdir: Path, timeout_s: float) -> None:
        self.source, self.entry = source, entry
        self.cc = CudaCompiler(arch, workdir, timeout_s, front_end=False)
        text = source.read_text(errors="replace")
        self.header = ptx_header(text)
        problem = ptx_problem(self.cc.ptxas, self.header.version, self.header.target, arch)
        if problem:
            raise ConfigurationError(f"{source.name}: {problem}")
        digest = hashlib.sha256(source.read_bytes() + arch.encode()).hexdigest()[:24]
        self.module = self.cc.workdir / "ptx" / f"{digest}.ptx"
        if not self.module.exists():
            shutil.copyfile(source, self.module)
        self.resolver = EntryResolver(entry, source)

    def compile(self, argv: Mapping[str, Sequence[str]]) -> CompileOutcome:
        if argv.get("frontend"):
            return CompileOutcome("compile_error", stage="frontend", argv=[list(argv["frontend"])],
                                  error=f"a PTX kernel has no front end, but front-end arguments "
                                        f"{list(argv['frontend'])} were given; search ptxas controls only")
        path = self.module
        symbol, problem = self.resolver.resolve(str(self.source), lambda: ptx_entries(path.read_text(errors="replace")))
        if problem:
            return CompileOutcome("compile_error", error=problem, stage="entry")
        out = self.cc.cubin(path, argv["backend"], symbol)
        out.symbol = symbol
        return out if out.ok else dataclasses.replace(out, stage="backend")

    def metrics(self) -> frozenset[str]:
        return CUBIN_METRICS

    def toolchain(self) -> dict[str, str]:
        return {"ptxas": self.cc.version}


def resolve_in_cubin(out: CompileOutcome, resolver: EntryResolver) -> CompileOutcome:
    """A one-call compile's outcome with its entry resolved from the cubin's kernels (and its ptxas metrics then
    taken for that kernel alone)."""
    if not out.ok or out.path is None or resolver.entry is None:
        return out
    path = out.path
    symbol, problem = resolver.resolve(str(path), lambda: cubin_entries(path))
    if problem:
        return CompileOutcome("compile_error", error=problem, argv=out.argv, stage="entry", log=out.log)
    times = {k: v for k, v in out.metrics.items() if k.endswith("_time_s")}
    return dataclasses.replace(out, symbol=symbol, metrics={**parse_ptxas_verbose(out.log, symbol), **times})
