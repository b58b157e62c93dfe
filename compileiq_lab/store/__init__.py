"""Persistent run store (SQLite): every evaluation committed as it happens; the typed header; Results snapshots."""

from __future__ import annotations

from compileiq_lab.store.header import SCHEMA_VERSION, KernelMeta, RunHeader, Validation
from compileiq_lab.store.lock import writer_pid
from compileiq_lab.store.results import Results, load_results
from compileiq_lab.store.sqlite import DEFAULT_DIR, MEMORY, EvalRecord, RunStore, new_store_path

__all__ = [
           "DEFAULT_DIR",
           "MEMORY",
           "SCHEMA_VERSION",
           "EvalRecord",
           "KernelMeta",
           "Results",
           "RunHeader",
           "RunStore",
           "Validation",
           "load_results",
           "new_store_path",
           "writer_pid",
]
