"""Search: the CompileIQ-compatible entry point (start(), ask/tell, resume) over a run store."""

from __future__ import annotations

import dataclasses
import logging
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from compileiq_lab.exceptions import ConfigurationError, SearchStateError, StoreError
from compileiq_lab.run.build import check_search_arguments
from compileiq_lab.run.clock import RunClock
from compileiq_lab.run.compat import (
    EngineConfig,
    RunHooks,
    Score,
    search_options,
    start_workers,
)
from compileiq_lab.run.engine import Candidate, Constraint, Engine
from compileiq_lab.run.events import FinishedEvent, RunEvent
from compileiq_lab.run.executor import ExecutorSpec, open_executor
from compileiq_lab.run.loop import Deadline, drive
from compileiq_lab.run.problem import Problem
from compileiq_lab.run.start import (
    call_limit,
    carried_settings,
    name_of,
    new_header,
    nothing_left,
    prepare_store,
    record_parts,
    reopened_config,
)
from compileiq_lab.run.steady import SteadyEngine, drive_steady
from compileiq_lab.run.told import told
from compileiq_lab.search.config import SearchConfiguration
from compileiq_lab.space.objectives import Objective
from compileiq_lab.space.space import SearchSpace
from compileiq_lab.store.results import Results
from compileiq_lab.store.sqlite import EvalRecord, RunStore, new_store_path

__all__ = ["Problem", "Search"]

log = logging.getLogger("compileiq_lab")
ObjectiveFunction = Callable[[dict[str, Any]], Any]


class Search:
    """A search of ``search_space`` for the configs that optimise ``objective_function``.

    Args:
        objective_function: Called with a config dict; returns a number, or a tuple of
            ``num_objectives`` numbers (raising, None, NaN or a wrong arity are recorded as failures).
            May be None when you evaluate yourself through ``ask``/``tell``.
        search_space: A dict of parameters (``compileiq_lab.space``), nested dicts allowed.
        search_config: The settings (a SearchConfiguration or a dict of its arguments).
        store: None (a new file under ./compileiq_runs/), ":memory:" (nothing persisted) or a
            path; an existing path with the same space and settings continues that run.
        constraint: Optional ``config -> reason (str) | None``: searched configs with a reason are never asked
            (the baseline is); another answer (a bool) or an exception is a ConfigurationError naming the config.
            Its verdict on each config is cached. Not stored: pass the same one when resuming.
        metadata: JSON-serialisable facts stored in a new run's header (kernel, toolchain, ...).
        baseline_check: Given the baseline's evaluation, why searching on is pointless (the run then ends
            after it with status "baseline_failed" and the reason in the header's ``stop_reason``), or None;
            default: the objective's ``baseline_verdict`` where it has one (``KernelRun`` does).
        executor: Where the objective is called: None or "local" (this process; ``start(workers=n)`` for n at
            once), "dask" (a Dask LocalCluster on this machine), "dask-cuda" (one worker per GPU), a Dask scheduler
            address such as "tcp://scheduler:8786", a ``distributed.Client``, or an object of the
            ``compileiq_lab.run.executor.Executor`` protocol. Results always come back to this process, which
            alone writes the store. With ``asynchronous=True`` in the settings, no generation barrier.
        worker_type, engine, disable_progress_bar, exit_on_failure, tracker_config, debug, cache_folder,
            dump_results: CompileIQ 1.1's arguments, for code written against it: each does the
            equivalent here or is refused naming it (see ``compileiq_lab.run.compat``). ``worker_type``:
            NATIVE in this process, ISOLATED in a killable worker process, MANUAL ask()/tell() only;
            ``engine="amber"`` (or ``EngineConfig``) the default strategy, its ``seed`` and
            ``mutation_probability`` options as ``seed`` and ``mutate_rate``; ``exit_on_failure=True``
            stops the run and raises SearchFailedError when the first generation failed entirely;
            ``dump_results`` writes the results table as CSV after every generation.
    """

    def __init__(self, objective_function: ObjectiveFunction | None = None,
                 search_space: Mapping[str, Any] | SearchSpace | None = None,
                 search_config: SearchConfiguration | Mapping[str, Any] | None = None,
                 store: str | os.PathLike[str] | None = None, constraint: Constraint | None = None,
                 metadata: Mapping[str, Any] | None = None, *,
                 baseline_check: Callable[[EvalRecord], str | None] | None = None, worker_type: Any = None,
                 engine: str | EngineConfig | None = None, disable_progress_bar: bool = False,
                 exit_on_failure: bool = False, tracker_config: Any = None, debug: bool = False,
                 cache_folder: Any = None, dump_results: str | os.PathLike[str] | None = None,
                 executor: ExecutorSpec = None) -> None:
        check_search_arguments(objective_function, search_space, search_config, constraint)
        assert search_space is not None and search_config is not None  # (checked: for the type checker)
        self._options = search_options(worker_type, engine, disable_progress_bar=disable_progress_bar,
                                       exit_on_failure=exit_on_failure, tracker_config=tracker_config, debug=debug,
                                       cache_folder=cache_folder, dump_results=dump_results, store=store)
        self.objective_function = objective_function
        self.space = SearchSpace(search_space)
        self.config = self._options.apply(search_config if isinstance(search_config, SearchConfiguration)
                                          else SearchConfiguration.from_dict(dict(search_config)))
        header = new_header(self.space, self.config, name_of(objective_function), metadata)
        # opening with a header takes the writer lock first: a store another run is writing is refused
        # before anything in it changes, and two creators of one new file cannot replace each other
        self.store = RunStore(new_store_path() if store is None else store, header=header)
        try:
            resolved = prepare_store(self.store, header)
            self.objectives: list[Objective] = (self.store.header() or header).objectives  # as stored: with units
            self.config, dump = carried_settings(self.store, self.config, self._options.dump_results, resolved)
            self._options = dataclasses.replace(self._options, dump_results=dump)
            self.store.release()
        except BaseException:
            self.store.close()
            raise
        stored_pool = resolved.get("pool_size")
        if self.config.pool_size is None and stored_pool and stored_pool != header.resolved["pool_size"]:
            # stored with the default pool of an earlier version: the run continues with the pool it was made with
            self.config = dataclasses.replace(self.config, pool_size=int(stored_pool))
        check = baseline_check if baseline_check is not None else getattr(objective_function, "baseline_verdict", None)
        self._constraint, self._check = constraint, check if callable(check) else None
        self.executor = executor
        self._engine = Engine(self.space, self.config, self.store, constraint, self._check)
        self._stop = threading.Event()  # the one way to stop this search, from any thread

    # -- construction ------------------------------------------------------------------------
    @classmethod
    def of(cls, problem: Problem, store: str | os.PathLike[str] | None = None,
           metadata: Mapping[str, Any] | None = None, executor: ExecutorSpec = None, **settings: Any) -> Search:
        """A search of a problem that describes itself: its objective, space, objectives, constraint and metadata.

        Args:
            problem: E.g. a ``KernelRun``.
            store: As for ``Search``.
            metadata: Header facts to store instead of ``problem.metadata()``.
            executor: As for ``Search``.
            **settings: The other SearchConfiguration arguments (generations, pool_size, seed, warm_start, ...).
        """
        objectives = list(problem.objectives)
        config = SearchConfiguration(num_objectives=len(objectives), problem_type=[o.direction for o in objectives],
                                     objective_names=[o.name for o in objectives], **settings)
        return cls(problem, problem.search_space(), config, store=store, constraint=problem.constraint,
                   metadata=problem.metadata() if metadata is None else metadata, executor=executor)

    @classmethod
    def open(cls, path: str | os.PathLike[str], objective_function: ObjectiveFunction | None = None,
             generations: int | None = None, timeout_s: float | None = None,
             constraint: Constraint | None = None, executor: ExecutorSpec = None, *,
             max_evaluations: int | None = None, time_budget_s: float | None = None) -> Search:
        """Reopen a stored run (space and settings come from its header) to continue it.

        Args:
            path: The run's .db file.
            objective_function: The objective (None for ask/tell use).
            generations: Continue to this many generations instead of the stored number.
            timeout_s: A new per-call limit (None keeps the stored one).
            constraint: The constraint the run was made with, if any.
            executor: Where to evaluate (as for ``Search``; need not be where the run started).
            max_evaluations, time_budget_s: New budgets (None keeps the stored ones): a run a budget ended continues
                with a larger one (both count the whole run: its stored rows, the time of its earlier sessions).
        """
        store = RunStore(path, readonly=True)
        h = store.header()
        store.close()
        if h is None or not h.space:
            raise ConfigurationError(f"{str(path)!r} holds no run header; it was not written by a Search")
        cfg = reopened_config(h.config, generations=generations, timeout_s=timeout_s,
                              max_evaluations=max_evaluations, time_budget_s=time_budget_s)
        return cls(objective_function, SearchSpace.from_spec(h.space), cfg, store=path, constraint=constraint,
                   executor=executor)

    @classmethod
    def resume(cls, path: str | os.PathLike[str], objective_function: ObjectiveFunction,
               generations: int | None = None, callback: Callable[[RunEvent], None] | None = None,
               constraint: Constraint | None = None, workers: int | None = None,
               executor: ExecutorSpec = None, *, max_evaluations: int | None = None,
               time_budget_s: float | None = None) -> Results:
        """Continue a stopped or killed run to its configured generations (and budgets) and return its results.

        Stored evaluations are replayed (never re-evaluated), so the resumed run asks exactly
        the candidates an uninterrupted run would have asked with as many ``workers`` (each generation is picked as
        many candidates at a time as there are evaluation slots; with other ``workers`` the rows stored are kept
        and the search goes on from where the picks part).
        """
        search = cls.open(path, objective_function, generations=generations, constraint=constraint,
                          executor=executor, max_evaluations=max_evaluations, time_budget_s=time_budget_s)
        return search.start(callback=callback, workers=workers)

    # -- blocking run ------------------------------------------------------------------------
    def start(self, callback: Callable[[RunEvent], None] | None = None, workers: int | None = None,
              gate: Callable[[], object] | None = None, *, num_workers: int | None = None,
              task_timeout: float | None = None, **worker_kwargs: Any) -> Results:
        """Run the search to its end (or to Ctrl-C / ``stop()``) and return the results.

        Args:
            callback: Called with each event (``compileiq_lab.run.events``) in this thread.
            workers: Objective calls run at once: in threads (for objectives that wait on compilers
                or other processes; the objective must be thread-safe), or with a per-call limit in as
                many worker processes; default 1, or with a Dask executor every worker thread of the cluster.
            gate: Called before each objective call in this process (it may block, e.g. to pause
                a background run).
            num_workers: CompileIQ's name for ``workers``.
            task_timeout: CompileIQ's per-call limit in seconds (the objective then runs in a killable
                worker process, as with ``timeout_s``).
            **worker_kwargs: Refused: CompileIQ hands them to custom workers, which do not exist here.

        Returns:
            The results; ``results.status`` says how the run ended.

        Raises:
            SearchStateError: A MANUAL (ask/tell) search.
            SearchFailedError: ``exit_on_failure=True`` and the first generation failed entirely.
        """
        if self._options.manual:
            raise SearchStateError("start() is unavailable with worker_type=MANUAL: evaluate with ask() and tell()")
        n = start_workers(workers, num_workers, task_timeout, worker_kwargs)
        self._stop.clear()  # a stop() issued while nothing ran must not end this run at once
        return self._run(callback, n, gate, task_timeout)

    def _run(self, callback: Callable[[RunEvent], None] | None, workers: int | None,
             gate: Callable[[], object] | None, task_timeout: float | None = None,
             paused: Callable[[], float] | None = None) -> Results:
        """``start`` without clearing an earlier ``stop()`` (a Run clears it when it starts). ``paused``: the seconds
        the run has been paused so far (a Run's pauses), which neither its time budget nor its run time counts."""
        objective = self._startable()
        self._engine.take_generations()  # generations finished through ask()/tell() were not this call's events
        self.store.acquire()
        header = self.store.update_header(status="running", updated_at=time.time())  # a killed process leaves it so
        clock, budget = RunClock(self.store, header.run_time_s, paused), self.config.time_budget_s
        end = None if budget is None else clock.began + budget - header.run_time_s
        deadline: Deadline = end if end is None or paused is None else (lambda: end + clock.paused())
        timeout = self._options.timeout(task_timeout if task_timeout is not None else self.config.timeout_s)
        executor, owned = None, False
        try:  # the steady engine first (it replays the store), then the executor and the objective's evaluator
            if said := nothing_left(self.config, header, self.store):
                log.warning("run %s: %s", self.store.path, said)
            self.config = call_limit(self.store, self.config, timeout)  # a resumed run calls as this one does
            steady = SteadyEngine(self.space, self.config, self.store, self._constraint, self._check) \
                if self.config.asynchronous else None
            executor, owned = open_executor(self.executor, workers)
            evaluate, closer = executor.evaluator(objective, self.config.num_objectives, timeout)
        except BaseException as exc:  # nothing was evaluated: the header says why the run could not start
            if executor is not None and owned:
                executor.shutdown()
            self._close_header("failed", f"{type(exc).__name__}: {exc}"[:2000], header.run_time_s)
            raise
        if steady is None:
            self._warn_idle_slots(executor.slots)
        hooks = RunHooks(self._options, self._stop, getattr(self.objective_function, "first_generation_verdict", None))
        emit = hooks.wrap(callback or (lambda event: None), lambda: self.results)
        status, reason = "running", ""
        clock.start()
        try:
            if steady is not None:
                status = drive_steady(steady, evaluate, emit, self._stop, executor, executor.slots, gate, deadline)
            else:
                self._engine.replay_parts = record_parts(self.store, executor.slots)
                status = drive(self._engine, evaluate, emit, self._stop, executor, gate, deadline)
        except KeyboardInterrupt:
            status = "interrupted"
            log.warning("search interrupted after %d evaluations; every finished one is kept in %s",
                        len(self.store), self.store.path)
        except BaseException as exc:  # a callback, the machine (disk full) or a bug: the header says so, then raise
            status, reason = "failed", f"{type(exc).__name__}: {exc}"[:2000]
            raise
        finally:  # the stop stays set: evaluations still waiting at the gate must see it
            closer()
            if owned:
                executor.shutdown()
            reason = reason or ("exit_on_failure" if hooks.failed_first else
                                hooks.stopped_because or (steady or self._engine).stop_reason)
            clock.stop()
            self._close_header(status, reason, clock.elapsed())
        results = self.results
        hooks.finish(results)  # a run ended by exit_on_failure raises here: it fails (FailedEvent), it never finishes
        emit(FinishedEvent(status, len(results), reason))
        return results

    def _startable(self) -> ObjectiveFunction:
        """The objective function ``start`` evaluates; refused where there is none, or where asked candidates still
        await ``tell``."""
        if self.objective_function is None:
            raise ConfigurationError("start() needs an objective_function; pass one to Search(...) "
                                     "or evaluate yourself with ask()/tell()")
        awaiting = self._engine.awaiting()
        if awaiting:
            raise SearchStateError(f"{len(awaiting)} asked candidates await tell(); tell their scores "
                                   "before start()")
        return self.objective_function

    def _warn_idle_slots(self, slots: int) -> None:
        """Warn where a generational run has more evaluation slots than candidates per generation."""
        pool = self.config.resolve(self.space.n_genes).pool_size
        if slots > pool:
            log.warning("%d evaluation slots but generations of %d candidates: %d slots wait each generation; "
                        "a new run with pool_size=%d (--pool-size %d in the CLI), or asynchronous=True "
                        "(--asynchronous), keeps every slot busy", slots, pool, slots - pool, slots, slots)

    def _close_header(self, status: str, reason: str, run_time_s: float) -> None:
        """Record how ``start`` ended (and the run's wall time so far) and stop being the writer; a store that cannot
        take the write (a full disk) keeps its last header, which a resumed run replaces."""
        try:
            self.store.update_header(status=status, updated_at=time.time(), stop_reason=reason, run_time_s=run_time_s)
        except (StoreError, sqlite3.Error) as exc:
            log.warning("could not record status %r in %s: %s", status, self.store.path, exc)
        finally:
            self.store.release()

    def stop(self) -> None:
        """Ask a running ``start()`` (in another thread) to stop before its next evaluation."""
        self._stop.set()

    # -- ask / tell --------------------------------------------------------------------------
    def ask(self, n: int | None = None) -> list[Candidate]:
        """Candidates for you to evaluate: up to ``n`` of the current generation (all if None).

        The first ask returns the baseline (the compiler defaults: every knock-out-able parameter
        absent, every other at its default; see ``SearchSpace.baseline``) alone when the configuration
        has ``baseline=True`` and the space has one. Configs evaluated before are answered from the store and never
        returned. An empty list means the search is done.
        """
        if self.config.asynchronous:
            raise SearchStateError("ask()/tell() hand out whole generations; asynchronous=True is for start(), which "
                                   "keeps every slot busy. Use asynchronous=False to evaluate yourself")
        if n is not None and (not isinstance(n, int) or isinstance(n, bool) or n < 1):
            raise ConfigurationError(f"ask(n): `n is None or an int >= 1` must hold, but got n={n!r}; "
                                     "pass a positive batch size or None for the whole generation")
        self.store.acquire()  # asked again in these parts when the run is reopened (none when all are handed out)
        self._engine.replay_parts = record_parts(self.store, n or 0, len(self.store) + len(self._engine.awaiting()))
        batch = self._engine.ask(n)
        if not batch:
            self.store.update_header(status=self._engine.done_reason, updated_at=time.time(),
                                     stop_reason=self._engine.stop_reason)
        return batch

    def tell(self, candidates: Sequence[Candidate] | Sequence[Score], scores: Sequence[Any] | None = None,
             elapsed_s: Sequence[float] | None = None) -> list[EvalRecord]:
        """Record your evaluations of asked candidates (each committed to the store at once).

        Args:
            candidates: Candidates returned by ``ask`` (or, CompileIQ's form, ``Score`` objects naming them
                by ``param_id``, with ``scores`` left out).
            scores: Per candidate: a number, a tuple of numbers, None/NaN (recorded as invalid)
                or a Measurement.
            elapsed_s: Optional evaluation times to record.

        Returns:
            The stored rows.
        """
        pairs = told(candidates, scores, self._engine.awaiting(), self.config.num_objectives, elapsed_s)
        self._engine.check_awaiting([c for c, _ in pairs])  # all of them, before recording any
        return [self._engine.tell(c, m) for c, m in pairs]

    # -- state -------------------------------------------------------------------------------
    @property
    def current_generation(self) -> int:
        """Searched generations completed so far (CompileIQ's counter; the baseline is not counted)."""
        return self._engine.completed

    @property
    def result(self) -> Results:
        """CompileIQ's name for ``results``."""
        return self.results

    @property
    def engine(self) -> Engine:
        """The engine driving this search."""
        return self._engine

    @property
    def results(self) -> Results:
        """A snapshot of the results so far."""
        return Results.from_store(self.store)

    @property
    def store_path(self) -> str:
        """Where the run is stored (":memory:" if nowhere)."""
        return self.store.path

    def close(self) -> None:
        """Close the store (results already returned stay usable)."""
        self.store.close()

    def __enter__(self) -> Search:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

