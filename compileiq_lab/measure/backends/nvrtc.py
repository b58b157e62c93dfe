"""CUDA through NVRTC, in this process: no GPU and no nvcc needed."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from compileiq_lab.measure.backends.base import CUBIN_METRICS, EntryResolver
from compileiq_lab.measure.backends.cuda import resolve_in_cubin
from compileiq_lab.measure.build import CompileOutcome
from compileiq_lab.measure.nvrtc import NvrtcCompiler, nvrtc_options
from compileiq_lab.toolchain.context import BuildContext
from compileiq_lab.toolchain.tools import cuda_include_dirs

__all__ = ["Nvrtc"]


class Nvrtc:
    """Compile the .cu file with NVRTC (front-end options as they are, ptxas ones through ``-Xptxas=``).

    The build context (include directories, defines, extra arguments) and the CUDA toolkit's header folders
    are passed as options.

    Args:
        source: The .cu file.
        entry: The kernel whose ptxas metrics and code are reported (see ``CudaTwoStage``).
        arch: Target, e.g. "sm_90".
        workdir: Where cubins go.
        context: The kernel's build context.
    """

    name: str = "nvrtc"
    stages: tuple[str, ...] = ("frontend", "backend")
    binary_kind: str = "cubin"

    def __init__(self, source: Path, entry: str | None, arch: str, workdir: Path,
                 context: BuildContext | None = None) -> None:
        self.source, self.entry = source, entry
        self.compiler = NvrtcCompiler(arch, workdir)
        self.context = context or BuildContext()
        self.resolver = EntryResolver(entry, source)
        self._fixed = [*self.context.argv(), *(f"-I{d}" for d in cuda_include_dirs())]

    def compile(self, argv: Mapping[str, Sequence[str]]) -> CompileOutcome:
        options = [*self._fixed, *nvrtc_options(argv["frontend"], argv["backend"])]
        return resolve_in_cubin(self.compiler.compile(self.source, options, None), self.resolver)

    def metrics(self) -> frozenset[str]:
        return CUBIN_METRICS

    def toolchain(self) -> dict[str, str]:
        return {"nvrtc": self.compiler.version}
