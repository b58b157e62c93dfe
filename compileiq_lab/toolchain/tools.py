"""Finding compiler executables (PATH, then the pinned CUDA wheels) and ending the processes we start."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
from pathlib import Path
from typing import Any

from compileiq_lab.exceptions import ConfigurationError

__all__ = ["find_tool", "kill_process_group"]


def _wheel_tool(name: str) -> str | None:
    """A CUDA tool installed from the pinned PyPI wheels (``nvidia/cu13/bin``), if any."""
    import importlib.util

    spec = importlib.util.find_spec("nvidia")
    for base in (spec.submodule_search_locations or []) if spec else []:
        candidate = Path(base) / "cu13" / "bin" / name
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    return None


def find_tool(name: str) -> str:
    """Path of a compiler executable (PATH first, then the CUDA wheels), or an error with an install hint."""
    path = shutil.which(name) or (_wheel_tool(name) if name in ("nvcc", "ptxas", "nvdisasm") else None)
    if path is None:
        hint = ("install the CUDA toolkit, or `pip install 'compileiq-lab[cuda]'` for pinned nvcc/ptxas wheels"
                if name in ("nvcc", "ptxas") else f"install {name} (e.g. apt-get install {name})")
        raise ConfigurationError(f"compiler {name!r} is not on PATH; {hint}")
    return path


def kill_process_group(proc: "subprocess.Popen[Any]") -> None:
    """SIGKILL a child started with ``start_new_session=True`` together with everything it started."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        proc.kill()
