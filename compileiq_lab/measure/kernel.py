"""What measurement needs of a kernel: the protocols a kernel spec (``compileiq_lab.kernels.KernelSpec``) satisfies."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from compileiq_lab.toolchain.nvidia_acf import NvidiaAcf

__all__ = ["Buffer", "Kernel"]


class Buffer(Protocol):
    """An input or output buffer of a kernel."""

    @property
    def name(self) -> str: ...

    @property
    def dtype(self) -> str: ...


class Kernel(Protocol):
    """A kernel as the compile backends, the runners and the evaluator see it."""

    @property
    def name(self) -> str: ...

    @property
    def language(self) -> str: ...

    @property
    def entry(self) -> str | None: ...

    @property
    def source_path(self) -> Path: ...

    @property
    def params(self) -> Mapping[str, int | float]: ...

    @property
    def inputs(self) -> tuple[Buffer, ...]: ...

    @property
    def outputs(self) -> tuple[Buffer, ...]: ...

    @property
    def defines(self) -> Mapping[str, tuple[Any, ...]]: ...

    @property
    def nvidia_acfs(self) -> Mapping[str, NvidiaAcf]: ...

    @property
    def args(self) -> tuple[str, ...] | None: ...

    @property
    def arg_types(self) -> tuple[str, ...]: ...

    @property
    def grid(self) -> tuple[int | str, ...] | None: ...

    @property
    def repeats(self) -> int: ...

    @property
    def workload(self) -> str | None: ...

    @property
    def static_only(self) -> bool: ...

    def source_sha256(self) -> str: ...

    def shape_of(self, buf: Any) -> tuple[int, ...]: ...

    def define_args(self, values: Mapping[str, Any] | None = None) -> list[str]: ...

    def launch_dims(self, values: Mapping[str, Any] | None = None) -> tuple[tuple[int, ...], tuple[int, ...], int]: ...

    def make_inputs(self, seed: int | None = None) -> dict[str, np.ndarray]: ...

    def reference_outputs(self, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]: ...

    def check(self, outputs: Mapping[str, np.ndarray], expected: Mapping[str, np.ndarray]) -> tuple[bool, str]: ...

    def with_workload(self, name: str | None) -> Kernel: ...
