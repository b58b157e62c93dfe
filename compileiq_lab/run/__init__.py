"""Driving a search: the engine (ask, tell, store), executors, the loop, typed events, the Search facade and Run."""

from __future__ import annotations

from compileiq_lab.run.engine import Candidate, Engine
from compileiq_lab.run.events import EvaluationEvent, FailedEvent, FinishedEvent, GenerationEvent, RunEvent
from compileiq_lab.run.facade import Search
from compileiq_lab.run.problem import Problem
from compileiq_lab.run.replay import ReplayRun, replay_run
from compileiq_lab.run.thread import RUN_STATES, Run

__all__ = [
           "RUN_STATES",
           "Candidate",
           "Engine",
           "EvaluationEvent",
           "FailedEvent",
           "FinishedEvent",
           "GenerationEvent",
           "Problem",
           "ReplayRun",
           "Run",
           "RunEvent",
           "Search",
           "replay_run",
]
