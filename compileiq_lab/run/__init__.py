"""Driving a search: the engine (ask, evaluate, tell, store) and the loops around it."""

from __future__ import annotations

from compileiq_lab.run.engine import Candidate, Engine, prepare_store
from compileiq_lab.run.loop import Event, drive
from compileiq_lab.run.thread import RUN_STATES, Run

__all__ = ["Candidate", "Engine", "Event", "Run", "RUN_STATES", "drive", "prepare_store"]
