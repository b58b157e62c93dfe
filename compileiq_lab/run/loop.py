"""The blocking search loop: drive an Engine to its end, emitting events, stoppable between calls."""

from __future__ import annotations

import logging
import threading
from typing import Any, Callable

from compileiq_lab.measure.measurement import Measurement
from compileiq_lab.run.engine import Engine

__all__ = ["drive", "Event"]

log = logging.getLogger("compileiq_lab")
#: An event: a dict with "type" ("evaluation", "generation" or "finished") and its data.
Event = dict[str, Any]


def drive(engine: Engine, evaluate: Callable[[dict[str, Any]], Measurement],
          emit: Callable[[Event], None], stop: threading.Event) -> str:
    """Evaluate generation after generation until the search ends or ``stop`` is set.

    Args:
        engine: The engine (its store gets every new evaluation before the next one starts).
        evaluate: Turns a config into a Measurement.
        emit: Receives an "evaluation" event per new row and a "generation" event per generation.
        stop: Checked before each evaluation; when set, it is cleared and the loop returns.

    Returns:
        How it ended: "finished", "exhausted" or "stopped".
    """
    while True:
        candidates = engine.pending if engine.unfinished() else engine.next_generation()
        if not candidates:
            return engine.done_reason
        for c in candidates:
            if c.key in engine.outcomes:
                continue
            if stop.is_set():
                stop.clear()
                return "stopped"
            rec, _ = engine.evaluate(c, evaluate)
            if rec is not None:
                emit({"type": "evaluation", "record": rec})
        emit(_generation_event(engine))


def _generation_event(engine: Engine) -> Event:
    failed = sum(not m.ok for m in engine.outcomes.values())
    best = engine.best_score()
    log.info("generation %d/%d: %d candidates, %d failed, best score_1 so far %s", engine.generation,
             engine.config.generations, len(engine.outcomes), failed, best)
    return {"type": "generation", "generation": engine.generation, "n_candidates": len(engine.outcomes),
            "n_failed": failed, "best_score_1": best, "n_evaluations": len(engine.store)}
