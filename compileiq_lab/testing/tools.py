"""Whether a compiler is usable here, the way the package finds it (PATH, then the pinned CUDA wheels)."""

from __future__ import annotations

from compileiq_lab.exceptions import ConfigurationError
from compileiq_lab.toolchain.tools import find_tool

__all__ = ["tool_available"]


def tool_available(name: str) -> bool:
    """True when ``find_tool(name)`` finds the executable (so a test needing it can run, e.g. in CI where
    nvcc/ptxas come from pip wheels and are not on PATH)."""
    try:
        find_tool(name)
    except ConfigurationError:
        return False
    return True
