"""The files a source reads outside the toolchain, from its compiler's own scan (``-MM``), and their digest."""

from __future__ import annotations

import hashlib
import os
import shlex
from collections.abc import Sequence
from pathlib import Path

from compileiq_lab.toolchain.tools import probe_tool

__all__ = ["HEADER_SUFFIXES", "headers_digest", "scan_deps"]

#: Header files taken instead when the scan fails (a missing header, say): those beside the source.
HEADER_SUFFIXES = (".h", ".cuh", ".hpp", ".hh", ".inc", ".inl")


def scan_deps(argv: Sequence[str], source: Path, timeout_s: float, toolkit: Path | None = None) -> tuple[Path, ...]:
    """The files ``source`` reads, sorted: the make rule of ``[*argv, source]`` (a compiler with ``-MM`` and its
    arguments, run in the source's folder), without the source itself, system headers (``-MM`` leaves them out) and
    files under ``toolkit`` (the CUDA toolkit's, which its version covers); when the scan fails, the header files
    beside the source instead.

    Raises:
        ConfigurationError: If the compiler cannot be started or hangs (limit ``timeout_s``).
    """
    res = probe_tool([*argv, str(source)], timeout_s, cwd=source.parent)
    if res.returncode != 0:
        return tuple(sorted(f for f in source.parent.iterdir() if f.suffix in HEADER_SUFFIXES and f.is_file()))
    _, _, deps = res.stdout.replace("\\\n", " ").partition(":")
    out = set()
    for tok in shlex.split(deps):
        path = (source.parent / tok).resolve()
        if path != source.resolve() and not (toolkit and path.is_relative_to(toolkit)) and path.is_file():
            out.add(path)
    return tuple(sorted(out))


def headers_digest(source: Path, deps: Sequence[Path]) -> str | None:
    """SHA-256 of the files a source reads (each one's path relative to the source's folder, then its bytes), or None
    when it reads none: the same for a copy of the whole tree elsewhere, another when a header changes."""
    if not deps:
        return None
    h = hashlib.sha256()
    for f in sorted(deps):
        h.update(os.path.relpath(f, source.parent).encode() + b"\0")
        try:
            h.update(f.read_bytes())
        except OSError:  # gone since the scan: a compile says so
            h.update(b"\0missing")
        h.update(b"\0")
    return h.hexdigest()
