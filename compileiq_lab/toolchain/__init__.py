"""The installed compilers: finding them (PATH, then the pinned CUDA wheels) and running them safely."""

from __future__ import annotations

from compileiq_lab.toolchain.tools import find_tool, kill_process_group

__all__ = ["find_tool", "kill_process_group"]
