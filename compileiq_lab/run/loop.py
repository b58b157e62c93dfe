"""The search loop: ask a generation, evaluate it on an executor, tell each outcome in order; stoppable at any call."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from compileiq_lab.measure.measurement import Measurement
from compileiq_lab.run.engine import Engine, copy_config
from compileiq_lab.run.events import EvaluationEvent, RunEvent
from compileiq_lab.run.executor import Executor

__all__ = ["drive", "gated"]

Evaluate = Callable[[dict[str, Any]], Measurement]


def gated(evaluate: Evaluate, stop: threading.Event,
          gate: Callable[[], object] | None) -> Callable[[dict[str, Any]], tuple[float, Measurement] | None]:
    """One evaluation as the loops submit it: past the gate (a paused run waits there), then, unless the run was
    stopped meanwhile (None), its start time and Measurement."""
    def task(config: dict[str, Any]) -> tuple[float, Measurement] | None:
        if gate is not None:
            gate()
        if stop.is_set():
            return None
        return time.time(), evaluate(config)
    return task


def drive(engine: Engine, evaluate: Evaluate, emit: Callable[[RunEvent], None], stop: threading.Event,
          executor: Executor, gate: Callable[[], object] | None = None) -> str:
    """Evaluate generation after generation until the search ends or ``stop`` is set.

    Args:
        engine: The engine (its store gets every new evaluation as soon as it is told).
        evaluate: Turns a config into a Measurement (thread-safe when the executor runs several at once).
        emit: Receives an EvaluationEvent per new row and a GenerationEvent per finished generation.
        stop: The run's one stop signal; checked before each evaluation starts.
        executor: Where evaluations run (its owner shuts it down). Outcomes are told in candidate order.
        gate: Called before each evaluation starts (it may block, e.g. while a background run is paused).

    Returns:
        How it ended: "finished", "exhausted", "baseline_failed" or "stopped".
    """
    task = gated(evaluate, stop, gate)
    jobs: list[tuple[Any, Any]] = []
    try:
        while True:
            batch = engine.ask()
            for event in engine.take_generations():
                emit(event)
            if not batch:
                return engine.done_reason
            jobs = [(c, executor.submit(task, copy_config(c.config))) for c in batch]
            for i, (c, job) in enumerate(jobs):
                outcome = None if stop.is_set() else job.result()
                if outcome is None:
                    for _, later in jobs[i:]:
                        later.cancel()
                    return "stopped"
                emit(EvaluationEvent(engine.tell(c, outcome[1], outcome[0])))
                for event in engine.take_generations():
                    emit(event)
    finally:
        for _, job in jobs:  # calls not started yet are dropped (the executor may serve another run after this one)
            job.cancel()
        engine.release()  # candidates not told (a stop, Ctrl-C, an error) are handed out again next time
