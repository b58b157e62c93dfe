"""Replay of a stored run at its recorded pace: a Run's events, read from a run store, for teaching without a GPU."""

from __future__ import annotations

import dataclasses
import logging
import math
import threading
import time
import traceback
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from compileiq_lab.exceptions import CompileIQLabError, ConfigurationError, SearchStateError
from compileiq_lab.run.events import EvaluationEvent, FailedEvent, FinishedEvent, GenerationEvent, RunEvent
from compileiq_lab.run.observed import ObservedRun
from compileiq_lab.run.start import reopened_config
from compileiq_lab.run.thread import RUN_STATES
from compileiq_lab.search.config import SearchConfiguration
from compileiq_lab.space.objectives import Objective, signs
from compileiq_lab.space.space import SearchSpace
from compileiq_lab.store.results import Results
from compileiq_lab.store.sqlite import EvalRecord, RunStore

__all__ = ["ReplayRun", "ReplaySearch", "recorded_gaps", "replay_events", "replay_run"]

log = logging.getLogger("compileiq_lab")
#: How a replay ends when its source ended one of these ways; any other stored status (a run killed while
#: "running", one that "failed") ends its replay as "interrupted".
_ENDINGS = ("finished", "exhausted", "baseline_failed", "stopped", "interrupted")


@dataclass(frozen=True)
class ReplaySearch:
    """What a dashboard reads of ``Run.search``, for a replay: the stored run's objectives and settings.

    Attributes:
        objectives: The run's objectives (from its header).
        config: Its settings (``generations`` covers every stored generation).
        store_path: The source store.
        objective_function: Always None: a replay calls no objective.
    """

    objectives: list[Objective]
    config: SearchConfiguration
    store_path: str
    objective_function: None = None


@dataclass(frozen=True)
class _Step:
    """Recorded seconds before an evaluation's events, and the events (its EvaluationEvent, then generations)."""

    gap_s: float
    events: list[RunEvent] = field(default_factory=list)


def recorded_gaps(records: Sequence[EvalRecord]) -> list[float]:
    """Seconds between the ends of consecutive evaluations (``started_at + elapsed_s``), in eval-id order: when
    each one's event reached the subscribers of the live run. The first is its own ``elapsed_s``; a negative gap
    (calls overlapping on several workers) or an unusable time is 0."""
    gaps, last = [], None
    for r in sorted(records, key=lambda r: r.eval_id):
        elapsed = r.elapsed_s if math.isfinite(r.elapsed_s) else 0.0
        end = r.started_at + elapsed
        gap = elapsed if last is None else end - last
        gaps.append(max(0.0, gap) if math.isfinite(gap) else 0.0)
        if math.isfinite(end):
            last = end if last is None else max(last, end)
    return gaps


def _best(best: float | None, rec: EvalRecord, sign: float) -> float | None:
    """The best first score so far, after ``rec`` (as the engines keep it)."""
    if rec.status != "ok" or not rec.scores:
        return best
    first = float(rec.scores[0])
    return first if best is None or (first - best) * sign < 0 else best


def replay_events(results: Results,
                  config: SearchConfiguration | None = None) -> list[tuple[float, list[RunEvent]]]:
    """The events the run behind ``results`` emitted, per stored evaluation: (recorded gap in seconds before it,
    [its EvaluationEvent, then the GenerationEvents it completed]) in eval-id order (no FinishedEvent).

    Generational runs: a generation's event follows its last row, carrying its rows and failures, the best first
    score stored so far (the baseline included) and the rows so far, as ``Engine`` emits it; the last stored
    generation counts as complete when the run ended on its own ("finished" after its generations, "exhausted",
    "baseline_failed") or holds ``pool_size`` rows (a budget may have cut it short). Steady-state runs
    (``asynchronous=True``): one after every ``pool_size`` searched rows, as ``SteadyEngine`` emits them (the
    baseline neither counted nor scored). ``config``: the run's settings as read from its header (default: read
    here).
    """
    records = sorted(results.records, key=lambda r: r.eval_id)
    header = results.header
    sign = float(signs(results.objectives)[0]) if results.objectives else 1.0
    pool = int(header.resolved.get("pool_size") or header.config.get("pool_size") or 0)
    # the last stored generation ended with the run unless a budget cut it short (then only if it is full)
    ended = header.status in ("exhausted", "baseline_failed") or (
        header.status == "finished" and header.stop_reason not in ("max_evaluations", "time_budget"))
    steady = bool(header.config.get("asynchronous"))
    first = pool - _pooled_baseline(results, config)  # the rows of a complete generation 1 (the baseline may be one)
    out: list[tuple[float, list[RunEvent]]] = []
    best: float | None = None
    count = failed = 0
    for i, (gap, rec) in enumerate(zip(recorded_gaps(records), records)):
        events: list[RunEvent] = [EvaluationEvent(rec)]
        if steady:
            if not rec.is_baseline:
                best = _best(best, rec, sign)
                count, failed = count + 1, failed + (rec.status != "ok")
                if pool and count % pool == 0:
                    events.append(GenerationEvent(count // pool, pool, failed, best, i + 1))
                    failed = 0
        else:
            best = _best(best, rec, sign)
            count, failed = count + 1, failed + (rec.status != "ok")
            nxt = records[i + 1] if i + 1 < len(records) else None
            full = count >= (1 if rec.generation == 0 else first if rec.generation == 1 else pool)
            if (nxt is not None and nxt.generation != rec.generation) or (nxt is None and (ended or full)):
                events.append(GenerationEvent(rec.generation, count, failed, best, i + 1))
                count = failed = 0
        out.append((gap, events))
    return out


def _pooled_baseline(results: Results, config: SearchConfiguration | None) -> int:
    """1 when the run's baseline row was also one of generation 1's candidates (``baseline_in_pool``), else 0;
    ``config``: the run's settings (None: read from its header here; a run stored before the setting kept it apart)."""
    row = next((r for r in results.records if r.is_baseline), None)
    space = SearchSpace.from_spec(results.header.space)
    return int((config or _config(results)).pools_baseline(space, row.params if row is not None else None))


def _load(store_path: str) -> Results:
    """The stored run at ``store_path``, read once, read-only."""
    fix = "pass the path of a run's .db file (e.g. bench/results/runs/matmul_c-cpu.db)"
    if not Path(store_path).is_file():
        raise ConfigurationError(f"replay_run: `store_path names a run store file` must hold, but {store_path!r} "
                                 f"{'is a folder' if Path(store_path).is_dir() else 'does not exist'}; {fix}")
    try:
        store = RunStore(store_path, readonly=True)
    except CompileIQLabError as exc:
        raise ConfigurationError(f"replay_run: {store_path!r} is not a readable run store ({exc}); {fix}") from exc
    try:
        header = store.header()
        results = Results.from_store(store)
    finally:
        store.close()
    if header is None or not header.space:
        raise ConfigurationError(f"replay_run: {store_path!r} holds no run header, so it was not written by a "
                                 f"Search (a run store has one from its creation); {fix}")
    return results


def _config(results: Results) -> SearchConfiguration:
    """The stored settings as the run searched with them (a setting it predates at the value it then had, as a resumed
    run reads them), with ``generations`` covering every stored generation (a damaged header: defaults)."""
    top = max((r.generation for r in results.records), default=1)
    try:
        config = reopened_config(results.header.config)
    except (CompileIQLabError, TypeError, ValueError) as exc:
        log.warning("replay: the stored settings cannot be read (%s); showing %d generations", exc, top)
        return SearchConfiguration(generations=max(1, top),
                                   baseline_in_pool=results.header.config.get("baseline_in_pool") is True)
    return config if config.asynchronous or top <= config.generations else dataclasses.replace(config,
                                                                                                generations=top)


def replay_run(store_path: str, speed: float = 1.0, max_gap_s: float = 2.0) -> ReplayRun:
    """A not yet started ``ReplayRun`` of the stored run at ``store_path`` (see ``ReplayRun``).

    Args:
        store_path: The run's .db file (never written: it is read once, read-only).
        speed: How much faster than recorded (2: twice as fast); the wait before an evaluation's events is its
            recorded gap divided by ``speed``.
        max_gap_s: The longest wait, in seconds of the replay, before any one evaluation (a 10-minute compile
            does not stall a lesson); 0 replays without pauses.

    Raises:
        ConfigurationError: A bad ``speed``/``max_gap_s``, or a path that is not a run store.
    """
    if isinstance(speed, bool) or not isinstance(speed, (int, float)) or not speed > 0:
        raise ConfigurationError(f"replay_run: `speed > 0` must hold, but got speed={speed!r}; pass e.g. 1.0 for the "
                                 "recorded pace or 10 for ten times faster")
    if isinstance(max_gap_s, bool) or not isinstance(max_gap_s, (int, float)) or not max_gap_s >= 0:
        raise ConfigurationError(f"replay_run: `max_gap_s >= 0` must hold, but got max_gap_s={max_gap_s!r}; pass "
                                 "the longest wait in seconds (e.g. 2.0), or 0 for none")
    return ReplayRun(_load(str(store_path)), speed=float(speed), max_gap_s=float(max_gap_s))


class ReplayRun(ObservedRun):
    """A stored run played back in a background thread with a ``Run``'s public surface, so a dashboard watches it
    unchanged: the same events (an EvaluationEvent per stored row in eval-id order, GenerationEvents as the engine
    emitted them, a FinishedEvent with the source's ending), each evaluation's after its recorded gap divided by
    ``speed`` and capped at ``max_gap_s``.

    ``pause()`` holds it (no event after pause() returns until ``resume()``; the wait left of the current gap is
    kept), ``stop()`` ends it with state "stopped". Subscribers are called in the replay thread and must be quick;
    pause/resume/stop wait while one runs. The source store is never written: ``results()`` holds the rows replayed
    so far, with the source's header, objectives and ``store_path`` (export and argv read it as they would a run).

    Args:
        source: The stored run (see ``replay_run``, which reads it from a path).
        speed: How much faster than recorded.
        max_gap_s: The longest wait before one evaluation, in seconds.

    Attributes:
        source: The full stored run.
        search: Its objectives and settings, where a dashboard reads them of a Run.
    """

    def __init__(self, source: Results, speed: float = 1.0, max_gap_s: float = 2.0) -> None:
        self.source, self.speed, self.max_gap_s = source, speed, max_gap_s
        config = _config(source)
        self.search = ReplaySearch(list(source.objectives), config, source.store_path)
        self._steps = [_Step(min(gap / speed, max_gap_s), events) for gap, events in replay_events(source, config)]
        self._observed_init()
        self._gate = threading.Condition(threading.RLock())  # state changes, and emitting against pause/stop
        self._records: list[EvalRecord] = []
        self._next = 0  # the step replayed next

    # -- control -----------------------------------------------------------------------------
    def start(self) -> ReplayRun:
        """Start the replay thread (once); returns self."""
        with self._gate:
            if self._thread is not None:
                raise SearchStateError(f"this replay was already started (state {self._state!r}); make a new one "
                                       f"with replay_run({self.store_path!r})")
            self._state = "running"
            self._progress["started_at"] = time.time()
            self._thread = threading.Thread(target=self._main, name="compileiq-replay", daemon=True)
        self._thread.start()
        return self

    def pause(self) -> None:
        """Hold the replay: no event after this returns until ``resume()``."""
        with self._gate:
            if self._state == "running":
                self._state = "paused"
                self._gate.notify_all()

    def resume(self) -> None:
        """Continue a paused replay (the rest of the gap it was in, then the next events)."""
        with self._gate:
            if self._state == "paused":
                self._state = "running"
                self._gate.notify_all()

    def stop(self) -> None:
        """End the replay before its next evaluation's events (a FinishedEvent "stopped" follows)."""
        with self._gate:
            if self._state in ("running", "paused"):
                self._state = "stopping"
                self._gate.notify_all()

    def results(self) -> Results:
        """The rows replayed so far, as Results of the source store (status "running" until the replay ends)."""
        with self._lock:
            records = list(self._records)
        ended = self._progress["finished_at"] is not None
        out = Results(records, objectives=self.source.objectives, header=self.source.header,
                      status=self._state if ended else "running", store_path=self.source.store_path)
        out.damage = list(self.source.damage)
        return out

    def progress(self) -> dict[str, Any]:
        """generation, generations, evaluations, failures by status, elapsed and the replay's time left in seconds
        (None while paused or not started), as ``Run.progress``."""
        with self._lock:
            p = {**self._progress, "statuses": dict(self._progress["statuses"])}
            left = sum(s.gap_s for s in self._steps[self._next:])
        started, finished = p["started_at"], p["finished_at"]
        elapsed = (finished or time.time()) - started if started else 0.0
        eta = 0.0 if finished else (left if self._state == "running" else None)
        failed = sum(n for s, n in p["statuses"].items() if s != "ok")
        return {**p, "generations": self.search.config.generations, "failed": failed, "elapsed_s": elapsed,
                "eta_s": eta, "state": self._state}

    @property
    def store_path(self) -> str:
        """The source store (read, never written)."""
        return self.source.store_path

    def __repr__(self) -> str:
        p = self.progress()
        return (f"ReplayRun(state={self._state!r}, generation {p['generation']}/{p['generations']}, "
                f"{p['evaluations']}/{len(self._steps)} evaluations, speed={self.speed:g}, "
                f"store={self.store_path!r})")

    # -- the thread ----------------------------------------------------------------------------
    def _counted(self, event: RunEvent) -> None:
        if isinstance(event, EvaluationEvent):  # the rows replayed so far: what results() shows
            self._records.append(event.record)

    def _play(self) -> str:
        """Every step at its pace, unless stopped; how it ended."""
        for i, step in enumerate(self._steps):
            left = step.gap_s
            with self._gate:
                while self._state != "stopping":
                    if self._state != "running":
                        self._gate.wait()  # paused: the rest of the gap waits for resume()
                    elif left > 0:
                        t0 = time.monotonic()
                        self._gate.wait(left)  # woken early by pause/stop
                        left -= time.monotonic() - t0
                    else:
                        with self._lock:
                            self._next = i + 1
                        for event in step.events:  # atomically against pause(): all of a row's events or none
                            self._emit(event)
                        break
                else:
                    return "stopped"
        status = self.source.status
        return status if status in _ENDINGS else "interrupted"

    def _main(self) -> None:
        try:
            final = self._play()
        except BaseException as exc:  # noqa: BLE001 - kept and raised again by join()
            self.error, final = exc, "failed"
            self.error_text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)[-8:])
            log.error("replay failed: %s: %s", type(exc).__name__, exc)
        with self._gate:
            self._state = final if final in RUN_STATES else "finished"
            with self._lock:
                self._progress["finished_at"] = time.time()
                n = len(self._records)
        self.results_final = self.results()
        if final == "failed":
            self._emit(FailedEvent(f"{type(self.error).__name__}: {self.error}", self.error_text))
        else:
            reason = self.source.header.stop_reason if final == self.source.status else ""  # a stopped replay: none
            self._emit(FinishedEvent(final, n, reason))
