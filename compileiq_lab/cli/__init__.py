"""The `compileiq-lab` command line: headless runs and run inspection."""

from __future__ import annotations

from compileiq_lab.cli.main import main

__all__ = ["main"]
