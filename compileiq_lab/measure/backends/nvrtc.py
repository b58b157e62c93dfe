"""CUDA through NVRTC, in this process: no GPU and no nvcc needed."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from compileiq_lab.measure.backends.base import CUBIN_METRICS
from compileiq_lab.measure.build import CompileOutcome
from compileiq_lab.measure.nvrtc import NvrtcCompiler, nvrtc_options

__all__ = ["Nvrtc"]


class Nvrtc:
    """Compile the .cu file with NVRTC (front-end options as they are, ptxas ones through ``-Xptxas=``).

    Args:
        source: The .cu file.
        entry: The kernel whose ptxas metrics are reported.
        arch: Target, e.g. "sm_90".
        workdir: Where cubins go.
    """

    name: str = "nvrtc"
    stages: tuple[str, ...] = ("frontend", "backend")
    binary_kind: str = "cubin"

    def __init__(self, source: Path, entry: str | None, arch: str, workdir: Path) -> None:
        self.source, self.entry = source, entry
        self.compiler = NvrtcCompiler(arch, workdir)

    def compile(self, argv: Mapping[str, Sequence[str]]) -> CompileOutcome:
        return self.compiler.compile(self.source, nvrtc_options(argv["frontend"], argv["backend"]), self.entry)

    def metrics(self) -> frozenset[str]:
        return CUBIN_METRICS

    def toolchain(self) -> dict[str, str]:
        return {"nvrtc": self.compiler.version}
