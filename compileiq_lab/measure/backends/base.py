"""The compile-path protocol: arguments per stage in, a binary with its static metrics out."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

from compileiq_lab.measure.build import CompileOutcome

__all__ = ["CUBIN_METRICS", "HOST_METRICS", "Backend"]

#: Static objectives of a host build (an object file or an executable).
HOST_METRICS = frozenset({"text_bytes", "binary_size", "compile_time"})
#: Static objectives of a CUDA build (ptxas -v and the cubin's sections).
CUBIN_METRICS = HOST_METRICS | {"registers", "spill_bytes", "stack_bytes", "smem_bytes", "sass_instructions"}


class Backend(Protocol):
    """One way to compile a kernel (CUDA two-stage, full nvcc, NVRTC, C host, ...), chosen once per kernel run.

    Attributes:
        name: Short name ("cuda", "nvcc", "nvrtc", "c").
        stages: The argument stages ``compile`` takes, in order ("frontend", "backend" for CUDA; "c").
        binary_kind: How the output is read ("cubin" or "host").
    """

    name: str
    stages: tuple[str, ...]
    binary_kind: str

    def compile(self, argv: Mapping[str, Sequence[str]]) -> CompileOutcome:
        """Build the kernel under these arguments per stage (cached where the same build was made before)."""
        ...

    def metrics(self) -> frozenset[str]:
        """The static objectives its builds report."""
        ...

    def toolchain(self) -> dict[str, str]:
        """The compiler versions it uses (for the run header)."""
        ...
