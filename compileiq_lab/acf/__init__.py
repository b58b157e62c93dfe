"""The open ACF: the document format, its shape and argument rules, and the ACF of a run's point."""

from __future__ import annotations

from compileiq_lab.acf.format import ACF, ACF_FORMAT, COMPILERS, SCHEMA_PATH, load_acf

__all__ = ["ACF", "ACF_FORMAT", "COMPILERS", "SCHEMA_PATH", "load_acf"]
