"""The compile-path protocol: arguments per stage in, a binary with its static metrics out."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Protocol

from compileiq_lab.exceptions import ConfigurationError
from compileiq_lab.measure.build import CompileOutcome
from compileiq_lab.measure.entries import resolve_entry

__all__ = ["CUBIN_METRICS", "HOST_METRICS", "Backend", "EntryResolver"]

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


class EntryResolver:
    """The symbol of a kernel run's entry in each compiled module (a plain C++ name becomes its mangled symbol; a
    -D knob may change which template instantiations exist, so each module is asked once).

    Args:
        entry: The entry as the user spells it, or None (no entry: the whole module).
        source: The kernel's source (its name goes in messages; a CUDA source's template kernels are named in them).
    """

    def __init__(self, entry: str | None, source: Path) -> None:
        self.entry, self.source = entry, source
        self._known: dict[str, tuple[str | None, str]] = {}
        self._lock = threading.Lock()

    def resolve(self, module: str, entries: Callable[[], Sequence[str]]) -> tuple[str | None, str]:
        """(symbol, "") for the module at ``module`` whose kernels ``entries()`` lists, or (None, why not)."""
        if self.entry is None:
            return None, ""
        with self._lock:
            if module in self._known:
                return self._known[module]
        try:
            found: tuple[str | None, str] = (resolve_entry(self.entry, entries(), self.source.name, self.source), "")
        except ConfigurationError as exc:
            found = (None, str(exc))
        with self._lock:
            self._known[module] = found
        return found
