"""In-process CUDA compile with NVRTC (cuda-bindings + a pinned nvidia-cuda-nvrtc): no GPU, no nvcc needed."""

from __future__ import annotations

import hashlib
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from compileiq_lab.exceptions import OptionalDependencyError
from compileiq_lab.measure.build import CompileOutcome, write_atomic
from compileiq_lab.measure.nvcc import parse_ptxas_verbose

__all__ = ["NvrtcCompiler", "nvrtc_options"]


def _nvrtc() -> Any:
    try:
        from cuda.bindings import nvrtc
    except ImportError as exc:
        raise OptionalDependencyError(
            "the NVRTC backend needs cuda-bindings and the NVRTC library: "
            "pip install 'compileiq-lab[nvrtc]'") from exc
    return nvrtc


def nvrtc_options(frontend_argv: Sequence[str], backend_argv: Sequence[str]) -> list[str]:
    """NVRTC options for a two-stage argument set: front-end options as they are, ptxas ones via -Xptxas=."""
    return [*frontend_argv, *(f"-Xptxas={tok}" for tok in backend_argv)]


class NvrtcCompiler:
    """Compile CUDA source to a cubin in this process with NVRTC.

    NVRTC calls cannot be interrupted, so ``timeout_s`` does not apply here (use the nvcc
    backend for sources that may hang the compiler). Code differs slightly from nvcc's: NVRTC
    is its own front end, so compare NVRTC runs with NVRTC baselines.

    Args:
        arch: Target, e.g. "sm_90".
        workdir: Where cubins go.
    """

    def __init__(self, arch: str, workdir: str | Path) -> None:
        self.nvrtc = _nvrtc()
        self.arch = arch
        self.workdir = Path(workdir)
        (self.workdir / "cubin").mkdir(parents=True, exist_ok=True)
        _, major, minor = self.nvrtc.nvrtcVersion()
        self.version = f"NVRTC {major}.{minor}"

    def compile(self, source: Path, options: Sequence[str], entry: str | None = None) -> CompileOutcome:
        """Compile ``source`` with NVRTC ``options`` (plus ``-arch`` and ``-Xptxas=-v``)."""
        nv = self.nvrtc
        opts = [f"-arch={self.arch}", "-Xptxas=-v", f"-I{source.parent}", *options]
        t0 = time.perf_counter()
        err, prog = nv.nvrtcCreateProgram(source.read_bytes(), source.name.encode(), 0, [], [])
        try:
            (err,) = nv.nvrtcCompileProgram(prog, len(opts), [o.encode() for o in opts])
            _, size = nv.nvrtcGetProgramLogSize(prog)
            log = b" " * size
            nv.nvrtcGetProgramLog(prog, log)
            text = log.rstrip(b"\0 ").decode(errors="replace")
            if err != nv.nvrtcResult.NVRTC_SUCCESS:
                return CompileOutcome("compile_error", error=(text or str(err))[-2000:], argv=[["nvrtc", *opts]],
                                      stage="frontend")
            _, size = nv.nvrtcGetCUBINSize(prog)
            cubin = b" " * size
            nv.nvrtcGetCUBIN(prog, cubin)
        finally:
            nv.nvrtcDestroyProgram(prog)
        elapsed = time.perf_counter() - t0
        key = hashlib.sha256("\0".join([hashlib.sha256(source.read_bytes()).hexdigest(), *opts]).encode())
        out = self.workdir / "cubin" / f"nvrtc-{key.hexdigest()[:24]}.cubin"
        write_atomic(out, cubin)
        metrics = parse_ptxas_verbose(text, entry)
        metrics["backend_time_s"] = elapsed
        return CompileOutcome("ok", out, metrics=metrics, argv=[["nvrtc", *opts]], log=text)
