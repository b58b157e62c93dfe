"""Persistent run store (SQLite): every evaluation committed as it happens."""

from __future__ import annotations

from compileiq_lab.store.sqlite import DEFAULT_DIR, SCHEMA_VERSION, EvalRecord, RunStore, new_store_path

__all__ = ["RunStore", "EvalRecord", "SCHEMA_VERSION", "DEFAULT_DIR", "new_store_path"]
