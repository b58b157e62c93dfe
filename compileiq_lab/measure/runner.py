"""Running compiled candidates: one outcome type and the small protocol the CPU and GPU runners share."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

__all__ = ["RunOutcome", "Runner"]


@dataclass
class RunOutcome:
    """One run of a compiled kernel: status, measurements, and why it failed."""

    status: str  # ok | run_error | run_timeout | crashed | wrong_output
    error: str = ""
    metrics: dict[str, float] = field(default_factory=dict)


class Runner(Protocol):
    """Runs one compiled binary of a kernel, checks its output and measures it."""

    def metrics(self) -> frozenset[str]:
        """The objectives its runs measure."""
        ...

    def identity(self, defines: Mapping[str, Any] | None) -> str:
        """What besides the machine code makes two runs differ (e.g. the launch geometry); "" if nothing."""
        ...

    def run(self, binary: Path, defines: Mapping[str, Any] | None) -> RunOutcome:
        """Check and measure one binary."""
        ...

    @property
    def info(self) -> dict[str, Any]:
        """Facts about where it runs (the GPU's name, arch, driver; {} on the CPU)."""
        ...

    def close(self) -> None:
        """Release what it holds (worker processes)."""
        ...
