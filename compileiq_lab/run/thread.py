"""Run: a search driven in a background thread, with pause/resume/stop, events and read-only snapshots."""

from __future__ import annotations

import logging
import threading
import time
import traceback
from typing import TYPE_CHECKING, Any

from compileiq_lab.exceptions import SearchStateError
from compileiq_lab.run.engine import Constraint
from compileiq_lab.run.events import FailedEvent
from compileiq_lab.run.facade import ObjectiveFunction, Search
from compileiq_lab.run.observed import ObservedRun

if TYPE_CHECKING:
    from compileiq_lab.store.results import Results

__all__ = ["RUN_STATES", "Run"]

log = logging.getLogger("compileiq_lab")
#: What ``Run.state`` can say.
RUN_STATES = ("idle", "running", "paused", "stopping", "finished", "exhausted", "baseline_failed", "stopped",
              "interrupted", "failed")


class Run(ObservedRun):
    """Drive a ``Search`` in a background thread so a notebook stays usable.

    Events (``compileiq_lab.run.events``: EvaluationEvent, GenerationEvent, FinishedEvent, and
    FailedEvent with the error) go to every subscriber, called in the run thread: a subscriber
    must be quick and must not touch widgets
    (the lab's dashboard queues them). ``pause()`` holds the run before its next objective call,
    ``stop()`` ends it there; every finished evaluation is already in the run store, so a closed
    notebook loses nothing and ``Run.open(path, objective)`` continues it later. An exception in
    the run thread is kept (``error``) and raised again by ``join()``.

    Args:
        search: The search to drive (its objective function is required).
        workers: Objective calls at once (see ``Search.start``; None: 1, or every worker thread of a Dask executor).
    """

    def __init__(self, search: Search, workers: int | None = None) -> None:
        if search.objective_function is None:
            raise SearchStateError("a Run needs a Search with an objective_function; ask()/tell() runs are "
                                   "driven by you, not by a thread")
        self.search, self.workers = search, workers
        self._observed_init()
        self._open = threading.Event()  # set = may evaluate; cleared by pause()
        self._open.set()
        self._held_s = 0.0  # seconds paused before the current pause
        self._paused_at: float | None = None  # when the current pause began

    @classmethod
    def open(cls, path: str, objective_function: ObjectiveFunction, workers: int | None = None,
             generations: int | None = None, constraint: Constraint | None = None) -> Run:
        """A Run that continues the stored run at ``path`` (its evaluations are replayed, never redone)."""
        return cls(Search.open(path, objective_function, generations=generations, constraint=constraint), workers)

    # -- control -----------------------------------------------------------------------------
    def start(self) -> Run:
        """Start the run thread (once); returns self."""
        with self._lock:
            if self._thread is not None:
                raise SearchStateError(f"this run was already started (state {self._state!r}); make a new Run "
                                       "(Run.open(path, objective) continues a stored one)")
            self._state = "running"
            self._progress["started_at"] = time.time()
            self.search._stop.clear()  # from here on, stop() ends this run (even before its thread runs)
            self._thread = threading.Thread(target=self._main, name="compileiq-run", daemon=True)
        self._thread.start()
        return self

    def pause(self) -> None:
        """Hold the run before its next objective call (calls in flight finish)."""
        with self._lock:
            if self._state == "running":
                self._open.clear()
                self._state = "paused"
                self._paused_at = time.monotonic()

    def resume(self) -> None:
        """Continue a paused run."""
        with self._lock:
            if self._state == "paused":
                self._state = "running"
                self._end_pause()
                self._open.set()

    def stop(self) -> None:
        """End the run before its next objective call (a paused run ends without another call; calls in
        flight finish and are kept only if the loop already recorded them)."""
        with self._lock:
            if self._state in ("running", "paused"):
                self._end_pause()
                self._state = "stopping"
                self.search.stop()
                self._open.set()  # a paused run wakes, sees the stop and makes no further call

    def _end_pause(self) -> None:
        """Count the pause that ends now (the lock held)."""
        if self._paused_at is not None:
            self._held_s += time.monotonic() - self._paused_at
            self._paused_at = None

    def paused_s(self) -> float:
        """Seconds the run has been paused so far: its time budget (``time_budget_s``) does not count them."""
        with self._lock:
            now = time.monotonic() - self._paused_at if self._paused_at is not None else 0.0
            return self._held_s + now

    def results(self) -> Results:
        """A snapshot of the results so far (read from the run store)."""
        return self.search.results

    def progress(self) -> dict[str, Any]:
        """generation, generations, evaluations, failures by status, elapsed (running, not paused) and an ETA in
        seconds (None if unknown or paused)."""
        paused = self.paused_s()
        with self._lock:
            p = {**self._progress, "statuses": dict(self._progress["statuses"])}
        total = self.search.config.generations
        started = p["started_at"]
        end = p["finished_at"] or time.time()
        elapsed = max(0.0, end - started - paused) if started else 0.0  # the time it ran, its pauses not counted
        g = p["generation"]
        # the pace of this session's own generations (a reopened run replays the stored ones at once); no ETA while
        # paused: the time left is not running down
        done = g - self._first_generation if self._first_generation is not None else 0
        eta = elapsed / done * (total - g) if done > 0 and self._state == "running" else (
            0.0 if p["finished_at"] else None)
        failed = sum(n for s, n in p["statuses"].items() if s != "ok")
        return {**p, "generations": total, "failed": failed, "elapsed_s": elapsed, "eta_s": eta, "state": self._state}

    @property
    def store_path(self) -> str:
        """Where the run is stored."""
        return self.search.store_path

    def __repr__(self) -> str:
        p = self.progress()
        return (f"Run(state={self._state!r}, generation {p['generation']}/{p['generations']}, "
                f"{p['evaluations']} evaluations, store={self.store_path!r})")

    # -- the thread ----------------------------------------------------------------------------
    def _main(self) -> None:
        try:
            self.results_final = self.search._run(self._emit, self.workers, self._open.wait, paused=self.paused_s)
            final = self.results_final.status
        except BaseException as exc:  # noqa: BLE001 - kept and raised again by join()
            self.error, final = exc, "failed"
            self.error_text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)[-8:])
            log.error("run failed: %s: %s", type(exc).__name__, exc)
        with self._lock:
            self._end_pause()  # (a run paused during its last call: its time paused stops with it)
            self._state = final if final in RUN_STATES else "finished"
            self._progress["finished_at"] = time.time()
        if final == "failed":
            self._emit(FailedEvent(f"{type(self.error).__name__}: {self.error}", self.error_text))
