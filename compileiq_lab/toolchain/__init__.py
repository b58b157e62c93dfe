"""The installed compilers: finding them (PATH, then the pinned CUDA wheels), running them safely, their versions."""

from __future__ import annotations

from compileiq_lab.toolchain.tools import ToolResult, find_tool, kill_process_group, run_tool, tool_version

__all__ = ["ToolResult", "find_tool", "kill_process_group", "run_tool", "tool_version"]
