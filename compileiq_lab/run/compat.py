"""CompileIQ 1.1's vocabulary for code written against it: WorkerTypes, EngineConfig, Score and the checks of the
Search arguments that do the equivalent here or are refused with it."""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import os
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from compileiq_lab.exceptions import ConfigurationError, SearchFailedError, SearchStateError
from compileiq_lab.measure.measurement import Measurement
from compileiq_lab.measure.objective import INVALID_SCORE, classify_return
from compileiq_lab.run.engine import Candidate
from compileiq_lab.run.events import EvaluationEvent, GenerationEvent, RunEvent
from compileiq_lab.search.config import SearchConfiguration
from compileiq_lab.search.factory import STRATEGIES
from compileiq_lab.store.results import Results
from compileiq_lab.store.sqlite import EvalRecord

__all__ = [
    "BASELINE_CONFIG",
    "INVALID_SCORE",
    "EngineConfig",
    "MultiProcessWorker",
    "RunHooks",
    "Score",
    "SearchOptions",
    "Worker",
    "WorkerTypes",
    "checked_times",
    "dump",
    "search_options",
    "start_workers",
    "told",
]

log = logging.getLogger(__name__)

#: CompileIQ's baseline: the empty config (here: where a space declares no baseline of its own).
BASELINE_CONFIG: dict[str, Any] = {}
_ENGINES = ("amber", "auto", *STRATEGIES)


class WorkerTypes(StrEnum):
    """Where CompileIQ runs the objective; what each does here (see ``Search(worker_type=...)``)."""

    NATIVE = "native"  # in this process; start(workers=N) runs N at once in threads
    DEFAULT = "native"
    ISOLATED = "isolated"  # in a killable worker process, replaced after a crash or a timeout
    RAY = "ray"  # refused: Ray is not used here
    ASYNC = "async"  # refused: pass a plain function
    MANUAL = "manual"  # no managed execution: ask() and tell() only


class Worker:
    """CompileIQ's base class for custom workers, kept so that such code imports; ``Search`` refuses a subclass
    and names the equivalent (``worker_type=WorkerTypes.MANUAL`` with ``ask()``/``tell()``, where your own loop
    evaluates each batch as it likes)."""


#: CompileIQ's process-pool worker: here the objective runs in killable worker processes, one per
#: ``start(num_workers=N)``.
MultiProcessWorker = WorkerTypes.ISOLATED


@dataclass(frozen=True)
class EngineConfig:
    """CompileIQ's engine choice. ``name="amber"`` (CompileIQ's NSGA-III) runs compileiq-lab's default strategy
    (GA for one objective, NSGA-II for several; a strategy name works too); ``options`` maps onto its settings."""

    name: str
    options: Mapping[str, Any] = field(default_factory=dict)


@dataclass
class Score:
    """One evaluated candidate for ``Search.tell(scores)`` (CompileIQ's form of a tell).

    Attributes:
        score: The objective's value(s); ``INVALID_SCORE`` ("*") or NaN for a failure.
        param_id: The candidate's ``param_id`` (from ``ask()``).
        num_objectives: How many values ``score`` holds.
        metadata: Kept with the row (its ``detail["metadata"]``): as given where JSON holds it, else as text.
        norm_score, params, is_baseline: Accepted for compatibility; compileiq-lab normalises from its own baseline
            row and keeps the params of the asked candidate.
    """

    score: Any
    param_id: str
    num_objectives: int = 1
    norm_score: Any = None
    params: Any = None
    metadata: str = ""
    is_baseline: bool = False


#: The per-call limit of an isolated objective without timeout_s: it still runs in a killable worker process.
ISOLATED_TIMEOUT_S = 7 * 24 * 3600.0


@dataclass(frozen=True)
class SearchOptions:
    """The CompileIQ Search arguments, resolved: what they change here."""

    manual: bool = False
    isolated: bool = False
    exit_on_failure: bool = False
    dump_results: str | None = None
    strategy: str | None = None
    settings: Mapping[str, Any] = field(default_factory=dict)

    def apply(self, config: SearchConfiguration) -> SearchConfiguration:
        """The settings with the engine's choices (strategy, seed, mutation rate) applied.

        Raises:
            ConfigurationError: The engine and the settings name two values for one setting.
        """
        changes = dict(self.settings)
        if self.strategy is not None:
            changes["strategy"] = self.strategy
        defaults = SearchConfiguration.defaults()
        clash = [k for k, v in changes.items() if getattr(config, k) not in (defaults[k], v)]
        if clash:
            raise ConfigurationError(f"{clash} are given twice, by the engine and by the SearchConfiguration, with "
                                     "different values; set them in one place")
        return dataclasses.replace(config, **changes) if changes else config

    def timeout(self, timeout_s: float | None) -> float | None:
        """The per-call limit: the given one, or for an isolated objective one that keeps it in a worker process."""
        return timeout_s if timeout_s is not None or not self.isolated else ISOLATED_TIMEOUT_S


# engine option -> the SearchConfiguration setting it sets
_ENGINE_OPTIONS = {"seed": "seed", "mutation_probability": "mutate_rate"}


def search_options(worker_type: Any = None, engine: str | EngineConfig | None = None, *,
                   disable_progress_bar: bool = False, exit_on_failure: bool = False, tracker_config: Any = None,
                   debug: bool = False, cache_folder: Any = None, dump_results: Any = None) -> SearchOptions:
    """Check CompileIQ's Search arguments: each does the equivalent here, or is refused naming the equivalent.

    Raises:
        ConfigurationError: An argument with no equivalent here (the message names what to use instead).
    """
    if tracker_config is not None:
        raise ConfigurationError("Search(tracker_config=...) is not used here: every evaluation is in the run store "
                                 "(store=path) and Run.subscribe(callback) streams typed events; drop tracker_config")
    if cache_folder is not None:
        raise ConfigurationError(f"Search(cache_folder={cache_folder!r}) is not used here: pass store='run.db' to "
                                 "keep the run (kernel runs take KernelRun(workdir=...) for their scratch files)")
    if debug:
        logging.getLogger("compileiq_lab").setLevel(logging.DEBUG)
    del disable_progress_bar  # Search shows no progress bar here (the CLI does)
    manual, isolated = _worker(worker_type)
    strategy, settings = _engine(engine)
    return SearchOptions(manual=manual, isolated=isolated, exit_on_failure=bool(exit_on_failure),
                         dump_results=None if dump_results is None else str(dump_results), strategy=strategy,
                         settings=settings)


def start_workers(workers: int | None, num_workers: int | None, task_timeout: float | None,
                  worker_kwargs: Mapping[str, Any]) -> int | None:
    """Check ``Search.start``'s worker arguments, CompileIQ's names among them; returns the objective calls to run at
    once (None: the default).

    Raises:
        ConfigurationError: Arguments for a custom Worker, workers given twice with different values, a
            ``task_timeout`` that is no positive finite number, or workers that are no int >= 1.
    """
    if worker_kwargs:
        raise ConfigurationError(f"start() got {sorted(worker_kwargs)}: CompileIQ passes such arguments to a "
                                 "custom Worker, which compileiq-lab has none of; bind them into the objective "
                                 "(functools.partial) instead")
    if num_workers is not None and workers is not None and num_workers != workers:
        raise ConfigurationError(f"start(): workers is given twice, as workers={workers!r} and "
                                 f"num_workers={num_workers!r}; pass one of them")
    n = num_workers if num_workers is not None else workers
    if task_timeout is not None and (isinstance(task_timeout, bool) or not isinstance(task_timeout, (int, float))
                                     or not 0 < task_timeout < math.inf):
        raise ConfigurationError(f"start(): `0 < task_timeout < inf` must hold, but got "
                                 f"task_timeout={task_timeout!r}; pass seconds per objective call as a positive "
                                 "number, or None for no limit")
    if n is not None and (isinstance(n, bool) or not isinstance(n, int) or n < 1):
        raise ConfigurationError(f"start(): `workers is an int >= 1` must hold, but got workers={n!r}; pass the "
                                 "number of objective calls to run at once")
    return n


def _worker(worker_type: Any) -> tuple[bool, bool]:
    if worker_type is None:
        return False, False
    if isinstance(worker_type, type):
        raise ConfigurationError(f"Search(worker_type={worker_type.__name__}): custom Worker classes are not used "
                                 "here. To evaluate batches your own way, pass worker_type=WorkerTypes.MANUAL and "
                                 "loop over ask()/tell(); otherwise leave worker_type out (the objective runs in "
                                 "this process, start(num_workers=N) runs N at once) or pass "
                                 "WorkerTypes.ISOLATED (killable worker processes)")
    try:
        kind = WorkerTypes(str(worker_type).lower())
    except ValueError:
        raise ConfigurationError(f"worker_type must be one of {sorted({w.value for w in WorkerTypes})}, but got "
                                 f"{worker_type!r}") from None
    if kind is WorkerTypes.RAY:
        raise ConfigurationError("worker_type=RAY is not available here: run N evaluations at once with "
                                 "start(workers=N) (threads, for objectives that wait on compilers), or each in a "
                                 "killable worker process with worker_type='isolated'")
    if kind is WorkerTypes.ASYNC:
        raise ConfigurationError("worker_type=ASYNC is not available here: pass a plain (synchronous) function; "
                                 "start(workers=N) runs N calls at once")
    return kind is WorkerTypes.MANUAL, kind is WorkerTypes.ISOLATED


def _engine(engine: str | EngineConfig | None) -> tuple[str | None, dict[str, Any]]:
    if engine is None:
        return None, {}
    name, options = (engine, {}) if isinstance(engine, str) else (engine.name, dict(engine.options))
    name = str(name).strip().lower()
    if name not in _ENGINES:
        raise ConfigurationError(f"engine must be one of {list(_ENGINES)} ('amber' runs the default strategy), but "
                                 f"got {name!r}")
    unknown = sorted(set(options) - set(_ENGINE_OPTIONS))
    if unknown:
        raise ConfigurationError(f"engine options {unknown} have no equivalent here; the ones that do are "
                                 f"{sorted(_ENGINE_OPTIONS)} (as SearchConfiguration seed and mutate_rate); set "
                                 "pool_size for the survivors")
    return (None if name in ("amber", "auto") else name), {_ENGINE_OPTIONS[k]: v for k, v in options.items()
                                                           if v is not None}


def told(candidates: Any, scores: Any, awaiting: Sequence[Candidate], num_objectives: int,
         elapsed_s: Any = None) -> list[tuple[Candidate, Measurement]]:
    """What a ``tell`` records, checked before anything is: each candidate with its measurement (a ``Score``'s
    ``metadata`` kept in its detail), from ``tell(candidates, scores)`` or CompileIQ's ``tell([Score(...), ...])``.

    Raises:
        ConfigurationError: Candidates that are not those ask() returned (their configs, their param_ids), Score
            objects with a scores list as well, not one score (and time) per candidate, a param_id given twice.
        SearchStateError: A param_id that awaits no score.
    """
    items = _listed("candidates", candidates)
    notes: list[Any] = []
    if scores is None:
        items, values, notes = _scores_by_id(items, awaiting)
    else:
        if any(isinstance(c, Score) for c in items):
            raise ConfigurationError("tell(Score objects, scores): a Score carries its own score; call "
                                     "tell([Score(...), ...]) alone, or tell(candidates, scores) with ask()'s list")
        values = _listed("scores", scores)
        if any(isinstance(v, Score) for v in values):
            raise ConfigurationError("tell(candidates, [Score(...), ...]): a Score names its candidate itself; call "
                                     "tell([Score(...), ...]) alone, or give plain scores with ask()'s candidates")
    wrong = next((c for c in items if not isinstance(c, Candidate)), None)
    if wrong is not None:
        raise ConfigurationError(f"tell(candidates, scores) takes the Candidate objects ask() returned, but got "
                                 f"{type(wrong).__name__} {str(wrong)[:80]}; pass ask()'s list itself (evaluate each "
                                 "candidate's .config), or Score(score=..., param_id=c.param_id) objects alone")
    if len(items) != len(values):
        raise ConfigurationError(f"tell() needs one score per candidate, but got {len(items)} "
                                 f"candidates and {len(values)} scores")
    times = checked_times(elapsed_s, len(items)) if elapsed_s is not None else None
    out = []
    for i, (c, value) in enumerate(zip(items, values)):
        m = classify_return(value, num_objectives)
        if times is not None:
            m.elapsed_s = times[i]
        if notes and notes[i] not in (None, ""):
            m.detail["metadata"] = notes[i]
        out.append((c, m))
    return out


def _listed(what: str, values: Any) -> list[Any]:
    """A tell argument as a list: a list, a tuple or any other iterable of items (not one item)."""
    if isinstance(values, (str, bytes, Mapping, Candidate, Score)) or not isinstance(values, Iterable):
        raise ConfigurationError(f"tell(): `{what} is a list, one item per candidate` must hold, but got "
                                 f"{type(values).__name__} {str(values)[:80]}; pass a list even for one "
                                 f"candidate, e.g. tell([c], [score])")
    return list(values)


def _scores_by_id(scores: Sequence[Any], awaiting: Sequence[Candidate]) -> tuple[list[Any], list[Any], list[Any]]:
    """The candidates, scores and metadata of a CompileIQ-style ``tell([Score(...), ...])``, matched by param_id among
    the candidates ``awaiting`` a score."""
    out: dict[str, Score] = {}
    for s in scores:
        if not isinstance(s, Score):
            raise ConfigurationError(f"tell(scores) takes Score objects (Score(score=..., param_id=c.param_id)), but "
                                     f"got {type(s).__name__}; or call tell(candidates, scores)")
        if s.param_id in out:
            raise ConfigurationError(f"tell() got param_id {s.param_id!r} twice; give each candidate one score")
        out[s.param_id] = s
    by_id = {c.param_id: c for c in awaiting}
    unknown = sorted(set(out) - set(by_id))
    if unknown:
        raise SearchStateError(f"param_ids {unknown[:3]} are not awaiting a score; tell only what the last ask() "
                               "returned")
    return [by_id[k] for k in out], [s.score for s in out.values()], [_stored(s.metadata) for s in out.values()]


def _stored(metadata: Any) -> Any:
    """A Score's metadata as its row keeps it: as given where JSON holds it (text, a dict of numbers ...), else its
    text."""
    try:
        json.dumps(metadata, allow_nan=False)
    except (TypeError, ValueError):
        return str(metadata)
    return metadata


class RunHooks:
    """What CompileIQ's ``exit_on_failure`` and ``dump_results`` do during a run, on top of its events, and the
    objective's ``first_generation_verdict``.

    Args:
        options: The resolved Search arguments.
        stop: The run's stop signal (set when the first generation failed entirely).
        verdict: Given the run's records once its first searched generation ended with no searched config ok, why
            searching on is pointless (the run then stops, the reason in ``stopped_because``), or None to search on
            (``KernelRun.first_generation_verdict``: every output so far differs from the reference).
    """

    def __init__(self, options: SearchOptions, stop: threading.Event,
                 verdict: Callable[[list[EvalRecord]], str | None] | None = None) -> None:
        self.options, self.stop, self.verdict = options, stop, verdict
        self.failed_first = False
        self.stopped_because = ""
        self._ok_seen = False
        self._judged = False

    def wrap(self, emit: Callable[[RunEvent], None], results: Callable[[], Results]) -> Callable[[RunEvent], None]:
        """``emit`` with the hooks applied first."""
        if not (self.options.exit_on_failure or self.options.dump_results or self.verdict):
            return emit

        def hooked(event: RunEvent) -> None:
            if isinstance(event, EvaluationEvent):
                # the baseline (generation 0) does not count: CompileIQ asks whether the searched configs all failed
                self._ok_seen |= event.record.status == "ok" and event.record.generation >= 1
            elif isinstance(event, GenerationEvent) and event.generation >= 1:
                if self.options.dump_results:
                    dump(results(), self.options.dump_results)
                if self.options.exit_on_failure and not self._ok_seen and not self.failed_first:
                    self.failed_first = True
                    self.stop.set()
                if self.verdict is not None and not self._judged:
                    self._judged = True  # the first searched generation only
                    why = None if self._ok_seen else self.verdict(list(results().records))
                    if why:
                        self.stopped_because = why
                        log.warning("the run stops after its first generation: %s", why)
                        self.stop.set()
            emit(event)
        return hooked

    def finish(self, results: Results) -> None:
        """After the run: the last CSV, and the error of a run ended by ``exit_on_failure``.

        Raises:
            SearchFailedError: Every evaluation up to the first searched generation failed.
        """
        if self.options.dump_results:
            dump(results, self.options.dump_results)
        if self.failed_first:
            first = next((r for r in results.records if r.status != "ok"), None)
            why = f"{first.status}: {first.error[:300]}" if first is not None else "no evaluation"
            raise SearchFailedError(f"every evaluation of the first generation failed (first: {why}); the run "
                                    f"stopped (exit_on_failure=True) and its rows are in {results.store_path}. Fix "
                                    "the objective, or pass exit_on_failure=False to search on")


def dump(results: Results, path: str) -> None:
    """Write the results table as CSV (CompileIQ's ``dump_results``), params as JSON, atomically."""
    df = results.get_results()
    df["params"] = [json.dumps(p, sort_keys=True) for p in df["params"]]
    tmp = f"{path}.tmp"
    df.to_csv(tmp, index=False)
    os.replace(tmp, path)


def checked_times(elapsed_s: Sequence[Any], n: int) -> list[float]:
    """``tell``'s evaluation times, checked before anything is recorded: one finite number >= 0 per candidate.

    Raises:
        ConfigurationError: Another count, or a time that is not such a number.
    """
    times = list(elapsed_s)
    if len(times) != n:
        raise ConfigurationError(f"tell(elapsed_s=...): one time per candidate must be given, but got {len(times)} "
                                 f"times for {n} candidates; give one per candidate, or leave elapsed_s out")
    out = []
    for i, t in enumerate(times):
        try:
            value = float(t)
        except (TypeError, ValueError):
            value = float("nan")
        if not math.isfinite(value) or value < 0:
            raise ConfigurationError(f"tell(elapsed_s=...): each time must be a finite number of seconds >= 0, but "
                                     f"elapsed_s[{i}] is {t!r}; give the measured time, or 0 where it is unknown")
        out.append(value)
    return out
