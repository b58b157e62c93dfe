"""Driving a search: the engine (ask, evaluate, tell, store) and the loops around it."""

from __future__ import annotations

from compileiq_lab.run.engine import Candidate, Engine, prepare_store
from compileiq_lab.run.loop import Event, drive

__all__ = ["Candidate", "Engine", "Event", "drive", "prepare_store"]
