"""The blocking search loop: drive an Engine to its end, emitting events, stoppable between calls."""

from __future__ import annotations

import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable

from compileiq_lab.measure.measurement import Measurement
from compileiq_lab.run.engine import Engine, copy_config

__all__ = ["drive", "Event", "StopRequested"]

log = logging.getLogger("compileiq_lab")
#: An event: a dict with "type" ("evaluation", "generation" or "finished") and its data.
Event = dict[str, Any]


class StopRequested(Exception):
    """Raised by an evaluation gate to end the loop before that evaluation starts (nothing is recorded)."""


def drive(engine: Engine, evaluate: Callable[[dict[str, Any]], Measurement],
          emit: Callable[[Event], None], stop: threading.Event, workers: int = 1) -> str:
    """Evaluate generation after generation until the search ends or ``stop`` is set.

    Args:
        engine: The engine (its store gets every new evaluation as soon as it is recorded).
        evaluate: Turns a config into a Measurement (thread-safe when ``workers > 1``).
        emit: Receives an "evaluation" event per new row and a "generation" event per generation.
        stop: Checked before each evaluation; when set, it is cleared and the loop returns.
        workers: Evaluations run at once (threads; for objectives that wait on subprocesses such
            as compilers). Rows are still recorded in candidate order.

    Returns:
        How it ended: "finished", "exhausted" or "stopped".
    """
    pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="compileiq-eval") if workers > 1 else None
    try:
        while True:
            candidates = engine.pending if engine.unfinished() else engine.next_generation()
            if not candidates:
                return engine.done_reason
            todo = [c for c in candidates if c.key not in engine.outcomes and engine.cached(c) is None]
            todo = list({c.key: c for c in todo}.values())
            if pool is None:
                for c in todo:
                    if stop.is_set():
                        stop.clear()
                        return "stopped"
                    try:
                        record = engine.run(c, evaluate)
                    except StopRequested:
                        return "stopped"
                    emit({"type": "evaluation", "record": record})
            elif _evaluate_parallel(engine, todo, evaluate, emit, stop, pool):
                stop.clear()
                return "stopped"
            emit(_generation_event(engine))
    finally:
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)


def _evaluate_parallel(engine: Engine, todo: list[Any], evaluate: Callable[[dict[str, Any]], Measurement],
                       emit: Callable[[Event], None], stop: threading.Event, pool: ThreadPoolExecutor) -> bool:
    """Evaluate candidates concurrently, recording each in order; True if stopped."""
    futures = [(c, time.time(), pool.submit(evaluate, copy_config(c.config))) for c in todo]
    for c, started, fut in futures:
        try:
            if stop.is_set():
                raise StopRequested()
            measurement = fut.result()
        except StopRequested:
            for _, _, f in futures:
                f.cancel()
            return True
        emit({"type": "evaluation", "record": engine.record(c, measurement, started)})
    return False


def _generation_event(engine: Engine) -> Event:
    failed = sum(not m.ok for m in engine.outcomes.values())
    best = engine.best_score()
    log.info("generation %d/%d: %d candidates, %d failed, best score_1 so far %s", engine.generation,
             engine.config.generations, len(engine.outcomes), failed, best)
    return {"type": "generation", "generation": engine.generation, "n_candidates": len(engine.outcomes),
            "n_failed": failed, "best_score_1": best, "n_evaluations": len(engine.store)}
