"""EventBridge: queue a run's events from its thread, flush them in the notebook's thread at most ~4 times a second."""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable

from compileiq_lab.run.events import RunEvent

__all__ = ["EventBridge"]

log = logging.getLogger(__name__)


class EventBridge:
    """Hand events from a run thread to the thread that owns the widgets.

    ``push(event)`` may be called from any thread; it only queues. The flush function runs in
    the thread of the event loop captured at construction (the notebook kernel's), at most once
    per ``interval_s``, with every event queued since the last flush. Without a running loop
    (plain Python, tests), call ``flush()`` yourself.

    Args:
        on_flush: Called with the list of queued events (in the loop's thread).
        interval_s: Least time between flushes.
        loop: The loop to flush on (default: the running loop of this thread, if any).
    """

    def __init__(self, on_flush: Callable[[list[RunEvent]], None], interval_s: float = 0.25,
                 loop: asyncio.AbstractEventLoop | None = None) -> None:
        self.on_flush, self.interval_s = on_flush, interval_s
        if loop is None:
            try:
                loop = asyncio.get_event_loop()
            except RuntimeError:
                loop = None
        self.loop = loop if loop is not None and loop.is_running() else None
        self._queue: list[RunEvent] = []
        self._lock = threading.Lock()
        self._scheduled = False
        self.flushes = 0

    def push(self, event: RunEvent) -> None:
        """Queue an event (any thread) and make sure a flush is scheduled."""
        with self._lock:
            self._queue.append(event)
            if self._scheduled or self.loop is None:
                return
            self._scheduled = True
        try:
            self.loop.call_soon_threadsafe(self._arm)
        except RuntimeError:  # the loop closed (kernel shutting down)
            with self._lock:
                self._scheduled = False

    def _arm(self) -> None:
        assert self.loop is not None
        self.loop.call_later(self.interval_s, self.flush)

    def flush(self) -> int:
        """Apply every queued event now (in the calling thread); returns how many."""
        with self._lock:
            events, self._queue = self._queue, []
            self._scheduled = False
        if events:
            self.flushes += 1
            try:
                self.on_flush(events)
            except Exception:
                log.exception("dashboard update failed")
        return len(events)

    def discard(self) -> int:
        """Drop every queued event (a new run is attached: the old run's events must not reach it)."""
        with self._lock:
            dropped, self._queue = len(self._queue), []
        return dropped

    @property
    def pending(self) -> int:
        """Events queued and not yet flushed."""
        with self._lock:
            return len(self._queue)
