"""A running run's wall time, recorded in its header from a thread of its own while it runs."""

from __future__ import annotations

import logging
import sqlite3
import threading
import time
from collections.abc import Callable

from compileiq_lab.exceptions import StoreError
from compileiq_lab.store.sqlite import RunStore

__all__ = ["RUN_TIME_EVERY_S", "RunClock"]

log = logging.getLogger(__name__)

#: Seconds between two records of a running run's wall time in its header.
RUN_TIME_EVERY_S = 1.0


class RunClock:
    """The wall time of a run so far, written to its header's ``run_time_s`` every ``RUN_TIME_EVERY_S`` until
    ``stop``, whatever the run is doing (a long compile, a call that hangs): a process killed mid-run leaves its time
    counted, which ``time_budget_s`` counts when the run is resumed.

    Args:
        store: The run's store, this process being its writer while the clock runs.
        before_s: The time of the run's earlier sessions.
        paused: The seconds this session has been paused so far (a lab Run's pauses), which count for nothing.
    """

    def __init__(self, store: RunStore, before_s: float, paused: Callable[[], float] | None = None) -> None:
        self.store, self.before_s = store, before_s
        self.paused = paused or (lambda: 0.0)
        self.began = time.monotonic()
        self._done = threading.Event()
        self._thread: threading.Thread | None = None

    def elapsed(self) -> float:
        """The run's wall time so far, its earlier sessions included, its pauses not."""
        return self.before_s + max(0.0, time.monotonic() - self.began - self.paused())

    def start(self) -> RunClock:
        """Start recording (once)."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._record, name="compileiq-run-clock", daemon=True)
            self._thread.start()
        return self

    def stop(self) -> None:
        """Stop recording, and wait until no record is being written (before the run gives up its store)."""
        self._done.set()
        if self._thread is not None:
            self._thread.join()

    def _record(self) -> None:
        while not self._done.wait(RUN_TIME_EVERY_S):
            try:
                self.store.update_header(run_time_s=self.elapsed())
            except (StoreError, sqlite3.Error) as exc:  # a full disk: the run's own writes will say so
                log.debug("run time not recorded in %s: %s", self.store.path, exc)
