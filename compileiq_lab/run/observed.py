"""What a Run and a ReplayRun share: subscribers, the state, the thread, joining, and counting events as they go."""

from __future__ import annotations

import abc
import logging
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from compileiq_lab.run.events import EvaluationEvent, GenerationEvent, RunEvent

if TYPE_CHECKING:
    from compileiq_lab.store.results import Results

__all__ = ["ObservedRun"]

log = logging.getLogger("compileiq_lab")


class ObservedRun(abc.ABC):
    """A run in a background thread that others watch: ``subscribe``, ``state``, ``running``, ``join``, ``front``,
    ``owns_current_thread``, and ``_emit`` (count an event into the progress, then call every subscriber; a failing
    subscriber is logged, never ends the run). Subclasses set the attributes in ``_observed_init`` and implement
    ``results()``."""

    def _observed_init(self) -> None:
        self.error: BaseException | None = None
        self.error_text = ""
        self.results_final: Results | None = None
        self._subscribers: list[Callable[[RunEvent], None]] = []
        self._lock = threading.Lock()  # subscribers and progress
        self._thread: threading.Thread | None = None
        self._state = "idle"
        self._progress: dict[str, Any] = {"generation": 0, "evaluations": 0, "statuses": {}, "started_at": None,
                                          "finished_at": None}
        self._first_generation: int | None = None  # the generation this session's first evaluation came in

    @abc.abstractmethod
    def results(self) -> Results:
        """A snapshot of the run so far."""

    def join(self, timeout: float | None = None) -> Results | None:
        """Wait for the thread to end; returns the results (None if still going after ``timeout``).

        Raises:
            The exception that ended the thread, if one did.
        """
        if self._thread is not None:
            self._thread.join(timeout)
            if self._thread.is_alive():
                return None
        if self.error is not None:
            raise self.error
        return self.results_final

    def subscribe(self, callback: Callable[[RunEvent], None]) -> Callable[[], None]:
        """Call ``callback(event)`` for each event (in the run's thread); returns the function that unsubscribes."""
        with self._lock:
            self._subscribers.append(callback)

        def unsubscribe() -> None:
            with self._lock:
                if callback in self._subscribers:
                    self._subscribers.remove(callback)
        return unsubscribe

    @property
    def state(self) -> str:
        """One of ``RUN_STATES``."""
        return self._state

    @property
    def running(self) -> bool:
        """Whether the thread is alive."""
        return self._thread is not None and self._thread.is_alive()

    def front(self) -> list[dict[str, Any]]:
        """The current Pareto front (rows as in ``Results.pareto_front``)."""
        return self.results().pareto_front()

    def owns_current_thread(self) -> bool:
        """Whether the calling code runs in this run's thread (e.g. to route its log records)."""
        return self._thread is not None and self._thread is threading.current_thread()

    def _counted(self, event: RunEvent) -> None:  # noqa: B027 - a hook: most runs keep nothing of their own
        """Hook: called under the lock for each event before it is counted (a replay keeps its rows here)."""

    def _emit(self, event: RunEvent) -> None:
        with self._lock:
            self._counted(event)
            if isinstance(event, EvaluationEvent):
                if self._first_generation is None:  # (the generations before it were replayed from the store)
                    self._first_generation = self._progress["generation"]
                self._progress["evaluations"] += 1
                st = self._progress["statuses"]
                st[event.record.status] = st.get(event.record.status, 0) + 1
            elif isinstance(event, GenerationEvent):
                self._progress["generation"] = event.generation
            subscribers = list(self._subscribers)
        for callback in subscribers:
            try:
                callback(event)
            except (Exception, SystemExit):  # a subscriber's sys.exit() must not end the run behind the user's back
                log.exception("run event subscriber %r failed", callback)
