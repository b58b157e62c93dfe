"""NVIDIA's own control files as one more searched control: ``--apply-controls FILE`` (ptxas and nvcc 13.3 on)."""

from __future__ import annotations

import functools
import hashlib
import os
import re
import stat
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from compileiq_lab.exceptions import ConfigurationError
from compileiq_lab.toolchain.tools import probe_tool, tool_version

__all__ = ["FLAG", "KEY", "MAX_FILE_BYTES", "MIN_VERSION", "NvidiaAcf", "apply_args", "apply_controls_problem",
           "load_nvidia_acfs"]

#: The search-space key of the control: its value is one file's label; absent means none of them.
KEY = "nvidia_acf"
#: How the tools take such a file.
FLAG = "--apply-controls"
#: The first CUDA release whose ptxas and nvcc take ``--apply-controls``.
MIN_VERSION = "13.3"
#: Size of one control file read at all (NVIDIA's are a few KiB).
MAX_FILE_BYTES = 16 << 20
_LABEL = re.compile(r"[^A-Za-z0-9_.-]+")


@dataclass(frozen=True)
class NvidiaAcf:
    """One of NVIDIA's control files: its label in the search space, where it is, and its content's sha256."""

    label: str
    path: Path
    sha256: str


def load_nvidia_acfs(paths: Sequence[str | os.PathLike[str]], where: str = "--nvidia-acf") -> dict[str, NvidiaAcf]:
    """The files as searchable choices, by label (``<stem>-<first 8 hex digits of the sha256>``).

    Raises:
        ConfigurationError: A path is not a regular file, is larger than ``MAX_FILE_BYTES``, or two paths hold the
            same content (one choice would be searched twice).
    """
    out: dict[str, NvidiaAcf] = {}
    seen: dict[str, Path] = {}
    for given in paths:
        path = Path(given).expanduser().resolve()
        try:
            info = path.stat()
        except OSError as exc:
            raise ConfigurationError(f"{where}: `each file exists` must hold, but got {str(given)!r} "
                                     f"({exc.strerror}). Pass the path of one of NVIDIA's control files.") from None
        if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_FILE_BYTES:
            raise ConfigurationError(f"{where}: `each is a regular file of at most {MAX_FILE_BYTES >> 20} MiB` must "
                                     f"hold, but got {str(given)!r} ({info.st_size} bytes"
                                     f"{'' if stat.S_ISREG(info.st_mode) else ', not a regular file'}). Pass the "
                                     "control file itself.")
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
        if digest in seen:
            raise ConfigurationError(f"{where}: `the files differ` must hold, but {str(given)!r} has the same content "
                                     f"as {str(seen[digest])!r}. Pass each control file once.")
        seen[digest] = path
        label = f"{_LABEL.sub('_', path.stem)[:40] or 'acf'}-{digest[:8]}"
        out[label] = NvidiaAcf(label, path, digest)
    return out


def apply_args(path: str | os.PathLike[str]) -> list[str]:
    """The back-end (ptxas) arguments that apply one control file."""
    return [FLAG, str(path)]


@functools.lru_cache(maxsize=16)
def apply_controls_problem(ptxas: str) -> str:
    """Why this ptxas cannot apply NVIDIA control files (its ``--help`` lists no ``--apply-controls``), or ""."""
    res = probe_tool([ptxas, "--help"])
    if FLAG in res.stdout + res.stderr:
        return ""
    return (f"--nvidia-acf needs a ptxas with {FLAG} (CUDA {MIN_VERSION} or newer), but the installed ptxas "
            f"({tool_version(ptxas)}, {ptxas}) has none; install one (e.g. pip install 'nvidia-cuda-nvcc>="
            f"{MIN_VERSION}') and put its bin folder first on PATH, or drop --nvidia-acf")

