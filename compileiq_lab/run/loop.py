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

__all__ = ["Deadline", "drive", "expired", "gated"]

Evaluate = Callable[[dict[str, Any]], Measurement]
#: When a run's time budget is spent, on ``time.monotonic()``'s clock: a fixed time, or one read at each check (the
#: budget of a run whose pauses do not count moves on while it is paused); None: no budget.
Deadline = float | Callable[[], float] | None


def expired(deadline: Deadline) -> bool:
    """Whether the run's time budget is spent (see ``Deadline``)."""
    if deadline is None:
        return False
    return time.monotonic() >= (deadline() if callable(deadline) else deadline)


def gated(evaluate: Evaluate, stop: threading.Event, gate: Callable[[], object] | None,
          deadline: Deadline = None) -> Callable[[dict[str, Any]], tuple[float, Measurement] | None]:
    """One evaluation as the loops submit it: past the gate (a paused run waits there), then, unless the run was
    stopped or its time budget spent meanwhile (None), its start time and Measurement."""
    def task(config: dict[str, Any]) -> tuple[float, Measurement] | None:
        if gate is not None:
            gate()
        if stop.is_set() or expired(deadline):
            return None
        return time.time(), evaluate(config)
    return task


def drive(engine: Engine, evaluate: Evaluate, emit: Callable[[RunEvent], None], stop: threading.Event,
          executor: Executor, gate: Callable[[], object] | None = None, deadline: Deadline = None) -> str:
    """Evaluate generation after generation until the search ends or ``stop`` is set.

    Args:
        engine: The engine (its store gets every new evaluation as soon as it is told).
        evaluate: Turns a config into a Measurement (thread-safe when the executor runs several at once).
        emit: Receives an EvaluationEvent per new row and a GenerationEvent per finished generation.
        stop: The run's one stop signal; checked before each evaluation starts.
        executor: Where evaluations run (its owner shuts it down). Each generation is asked ``executor.slots``
            candidates at a time (one at a time with one slot), so each part is chosen with every outcome before it;
            outcomes are told in candidate order.
        gate: Called before each evaluation starts (it may block, e.g. while a background run is paused).
        deadline: When the time budget is spent (``time.monotonic()``; None: no budget): no evaluation starts after
            it, and the search then ends ("finished", ``engine.stop_reason == "time_budget"``).

    Returns:
        How it ended: "finished", "exhausted", "baseline_failed" or "stopped".
    """
    task = gated(evaluate, stop, gate, deadline)
    jobs: list[tuple[Any, Any]] = []
    try:
        while True:
            if expired(deadline):
                engine.end("time_budget")
            batch = engine.ask(executor.slots)  # each part picked with every outcome before it
            for event in engine.take_generations():
                emit(event)
            if not batch:
                return engine.done_reason
            jobs = [(c, executor.submit(task, copy_config(c.config))) for c in batch]
            dropped = False
            for c, job in jobs:
                # after a stop, a call not started is dropped (a resumed run asks it) and one running or done is kept
                outcome = None if (stop.is_set() or dropped) and job.cancel() else job.result()
                if outcome is None:  # (or it saw the stop or the spent time budget as it was about to start)
                    dropped = True
                    continue
                emit(EvaluationEvent(engine.tell(c, outcome[1], outcome[0])))
                for event in engine.take_generations():
                    emit(event)
            if dropped:
                if stop.is_set() or not expired(deadline):
                    return "stopped"
                engine.end("time_budget")
                return engine.done_reason
    finally:
        for _, job in jobs:  # calls not started yet are dropped (the executor may serve another run after this one)
            job.cancel()
        engine.release()  # candidates not told (a stop, Ctrl-C, an error) are handed out again next time
