"""Driving a search: the engine (ask, evaluate, tell, store) and the loops around it."""

from __future__ import annotations

from compileiq_lab.run.engine import Candidate, Engine, prepare_store

__all__ = ["Candidate", "Engine", "prepare_store"]
