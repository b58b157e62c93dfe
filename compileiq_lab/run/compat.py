"""CompileIQ 1.1's vocabulary for code written against it: WorkerTypes, EngineConfig, Score and the checks of the
Search arguments that do the equivalent here or are refused with it."""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import os
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from compileiq_lab.exceptions import ConfigurationError, SearchFailedError
from compileiq_lab.measure.objective import INVALID_SCORE
from compileiq_lab.run.events import EvaluationEvent, GenerationEvent, RunEvent
from compileiq_lab.search.config import SearchConfiguration
from compileiq_lab.search.factory import STRATEGIES
from compileiq_lab.store.guard import overwrite_problem
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
    "dump",
    "search_options",
    "start_workers",
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
                   debug: bool = False, cache_folder: Any = None, dump_results: Any = None,
                   store: str | os.PathLike[str] | None = None) -> SearchOptions:
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
    if dump_results is not None:  # refused, or its folder made, before anything is evaluated (as the store's is)
        if os.path.isdir(dump_results):
            raise ConfigurationError(f"dump_results names a CSV file to write, but got the folder "
                                     f"{str(dump_results)!r}; pass a file path such as 'results.csv'")
        if problem := overwrite_problem(dump_results, None if store is None else os.fspath(store)):
            raise ConfigurationError(f"dump_results names a CSV file to write, but {str(dump_results)!r}: {problem}; "
                                     "pass another path such as 'results.csv'")
        os.makedirs(os.path.dirname(os.path.abspath(dump_results)), exist_ok=True)
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
        """``emit`` with the hooks applied first (and, after the first searched generation, a warning where every
        evaluation so far was invalid: the objective's answer, not a config, is at fault)."""
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
                if not self._judged:
                    self._judged = True  # the first searched generation only
                    records = [] if self._ok_seen else list(results().records)
                    why = self.verdict(records) if records and self.verdict is not None else None
                    if why:
                        self.stopped_because = why
                        log.warning("the run stops after its first generation: %s", why)
                        self.stop.set()
                    elif records and all(r.status == "invalid" for r in records):
                        log.warning("every evaluation so far (%d) was invalid, first: %s; the objective gives no "
                                    "usable score for any config: check what it returns (a number, or a tuple of "
                                    "num_objectives numbers)", len(records), records[0].error[:300])
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
