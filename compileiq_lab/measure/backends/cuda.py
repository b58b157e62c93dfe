"""CUDA through nvcc and ptxas: two-stage (cached PTX, then ptxas per back-end set) or one full nvcc call each."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from pathlib import Path

from compileiq_lab.measure.backends.base import CUBIN_METRICS
from compileiq_lab.measure.build import CompileOutcome
from compileiq_lab.measure.nvcc import CudaCompiler
from compileiq_lab.toolchain.tools import tool_version

__all__ = ["CudaFull", "CudaTwoStage"]


class CudaTwoStage:
    """``nvcc -ptx`` once per front-end argument set (cached on disk), then ``ptxas -v`` per back-end set.

    Args:
        source: The .cu file.
        entry: The kernel whose ptxas metrics are reported (None: the worst over all kernels).
        arch: Target, e.g. "sm_90".
        workdir: Where the PTX cache and cubins go.
        timeout_s: Limit per compiler process.
    """

    name: str = "cuda"
    stages: tuple[str, ...] = ("frontend", "backend")
    binary_kind: str = "cubin"

    def __init__(self, source: Path, entry: str | None, arch: str, workdir: Path, timeout_s: float) -> None:
        self.source, self.entry = source, entry
        self.cc = CudaCompiler(arch, workdir, timeout_s)

    def compile(self, argv: Mapping[str, Sequence[str]]) -> CompileOutcome:
        ptx = self.cc.ptx(self.source, argv["frontend"])
        if not ptx.ok or ptx.path is None:
            return dataclasses.replace(ptx, stage="frontend")
        out = self.cc.cubin(ptx.path, argv["backend"], self.entry)
        out.metrics.update(ptx.metrics)
        return out if out.ok else dataclasses.replace(out, stage="backend")

    def metrics(self) -> frozenset[str]:
        return CUBIN_METRICS

    def toolchain(self) -> dict[str, str]:
        return {"nvcc": self.cc.version, "ptxas": tool_version(self.cc.ptxas)}


class CudaFull(CudaTwoStage):
    """One full ``nvcc -cubin`` call per candidate (back-end arguments through ``-Xptxas``)."""

    name: str = "nvcc"

    def compile(self, argv: Mapping[str, Sequence[str]]) -> CompileOutcome:
        return self.cc.full(self.source, argv["frontend"], argv["backend"], self.entry)
