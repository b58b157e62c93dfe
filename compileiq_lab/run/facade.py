"""Search: the CompileIQ-compatible entry point (start(), ask/tell, resume) over a run store."""

from __future__ import annotations

import logging
import os
import threading
import time
from typing import Any, Callable, Mapping, Sequence

from compileiq_lab.search.config import SearchConfiguration
from compileiq_lab.exceptions import ConfigurationError, SearchStateError
from compileiq_lab.measure.objective import classify_return, make_evaluator
from compileiq_lab.store.results import Results
from compileiq_lab.run.engine import Candidate, Engine, new_header, prepare_store
from compileiq_lab.run.loop import Event, drive
from compileiq_lab.space.space import SearchSpace
from compileiq_lab.store.sqlite import EvalRecord, RunStore, new_store_path

__all__ = ["Search", "Event"]

log = logging.getLogger("compileiq_lab")
Objective = Callable[[dict[str, Any]], Any]


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
        constraint: Optional ``config -> reason | None``; configs with a reason (e.g. flag
            combinations the compiler rejects) are never asked. Not stored: pass the same one
            when resuming.
        metadata: JSON-serialisable facts stored in a new run's header (kernel, toolchain, ...).
    """

    def __init__(self, objective_function: Objective | None = None,
                 search_space: Mapping[str, Any] | SearchSpace | None = None,
                 search_config: SearchConfiguration | Mapping[str, Any] | None = None,
                 store: str | os.PathLike[str] | None = None,
                 constraint: Callable[[dict[str, Any]], str | None] | None = None,
                 metadata: Mapping[str, Any] | None = None) -> None:
        if search_space is None:
            raise ConfigurationError("Search needs search_space, e.g. {'x': ss.range(1, 10)}")
        if search_config is None:
            raise ConfigurationError("Search needs search_config, e.g. SearchConfiguration(generations=10)")
        if objective_function is not None and not callable(objective_function):
            raise ConfigurationError(f"objective_function must be callable, but got "
                                     f"{type(objective_function).__name__}; pass a function of one config dict")
        self.objective_function = objective_function
        self.space = SearchSpace(search_space)
        self.config = (search_config if isinstance(search_config, SearchConfiguration)
                       else SearchConfiguration.from_dict(dict(search_config)))
        path = new_store_path() if store is None else store
        header = new_header(self.space, self.config, _name_of(objective_function))
        if metadata:
            header["metadata"] = dict(metadata)
        self.store = RunStore(path, header=header)
        try:
            prepare_store(self.store, self.space, self.config, _name_of(objective_function),
                          dict(metadata) if metadata else None)
            self.store.acquire()  # refuse at once a store another run is writing
            self.store.release()
        except BaseException:
            self.store.close()
            raise
        self.engine = Engine(self.space, self.config, self.store, constraint)
        self._stop = threading.Event()
        self._handed: int = 0  # candidates of the current generation given out by ask()

    # -- construction from a stored run ------------------------------------------------------
    @classmethod
    def open(cls, path: str | os.PathLike[str], objective_function: Objective | None = None,
             generations: int | None = None, timeout_s: float | None = None,
             constraint: Callable[[dict[str, Any]], str | None] | None = None) -> "Search":
        """Reopen a stored run (space and settings come from its header) to continue it.

        Args:
            path: The run's .db file.
            objective_function: The objective (None for ask/tell use).
            generations: Continue to this many generations instead of the stored number.
            timeout_s: A new per-call limit (None keeps the stored one).
            constraint: The constraint the run was made with, if any.
        """
        store = RunStore(path, readonly=True)
        h = store.header()
        store.close()
        if "space" not in h:
            raise ConfigurationError(f"{str(path)!r} holds no run header; it was not written by a Search")
        cfg = dict(h["config"])
        if generations is not None:
            cfg["generations"] = generations
        if timeout_s is not None:
            cfg["timeout_s"] = timeout_s
        return cls(objective_function, SearchSpace.from_spec(h["space"]),
                   SearchConfiguration.from_dict(cfg), store=path, constraint=constraint)

    @classmethod
    def resume(cls, path: str | os.PathLike[str], objective_function: Objective,
               generations: int | None = None, callback: Callable[[Event], None] | None = None,
               constraint: Callable[[dict[str, Any]], str | None] | None = None, workers: int = 1) -> Results:
        """Continue a stopped or killed run to its configured generations and return its results.

        Stored evaluations are replayed (never re-evaluated), so the resumed run asks exactly
        the candidates an uninterrupted run would have asked.
        """
        search = cls.open(path, objective_function, generations=generations, constraint=constraint)
        return search.start(callback=callback, workers=workers)

    # -- blocking run ------------------------------------------------------------------------
    def start(self, callback: Callable[[Event], None] | None = None, workers: int = 1,
              gate: Callable[[], None] | None = None) -> Results:
        """Run the search to its end (or to Ctrl-C / ``stop()``) and return the results.

        Args:
            callback: Called with each event (see ``Event``) in this thread.
            workers: Objective calls run at once in threads (for objectives that wait on
                compilers or other processes; the objective must be thread-safe). In-process only.
            gate: Called before each objective call in this process (it may block, e.g. to pause
                a background run).

        Returns:
            The results; ``results.status`` says how the run ended.
        """
        if self.objective_function is None:
            raise ConfigurationError("start() needs an objective_function; pass one to Search(...) "
                                     "or evaluate yourself with ask()/tell()")
        engine = self.engine
        awaiting = [c for c in engine.pending[: self._handed] if c.key not in engine.outcomes]
        if awaiting:
            raise SearchStateError(f"{len(awaiting)} asked candidates await tell(); tell their scores "
                                   "before start()")
        self._handed = 0
        self._stop.clear()  # a stop() issued while nothing ran must not end this run at once
        self.store.acquire()
        try:
            evaluate, closer = make_evaluator(self.objective_function, self.config.num_objectives,
                                              self.config.timeout_s)
        except BaseException:
            self.store.release()
            raise
        if gate is not None:
            inner = evaluate

            def evaluate(config: dict[str, Any]) -> Any:
                gate()
                return inner(config)
        emit = callback or (lambda event: None)
        status = "running"
        try:
            status = drive(self.engine, evaluate, emit, self._stop,
                           workers=workers if self.config.timeout_s is None else 1)
        except KeyboardInterrupt:
            status = "interrupted"
            log.warning("search interrupted after %d evaluations; every finished one is kept in %s",
                        len(self.store), self.store.path)
        finally:
            closer()
            self.store.set_header(status=status, updated_at=time.time())
            self.store.release()
        results = self.results
        emit({"type": "finished", "status": status, "n_evaluations": len(results)})
        return results

    def stop(self) -> None:
        """Ask a running ``start()`` (in another thread) to stop before its next evaluation."""
        self._stop.set()

    # -- ask / tell --------------------------------------------------------------------------
    def ask(self, n: int | None = None) -> list[Candidate]:
        """Candidates for you to evaluate: up to ``n`` of the current generation (all if None).

        The first ask returns the baseline (the empty config) alone when the configuration has
        ``baseline=True``. Configs evaluated before are answered from the store and never
        returned. An empty list means the search is done.
        """
        if n is not None and (not isinstance(n, int) or isinstance(n, bool) or n < 1):
            raise ConfigurationError(f"ask(n): `n is None or an int >= 1` must hold, but got n={n!r}; "
                                     "pass a positive batch size or None for the whole generation")
        engine = self.engine
        self.store.acquire()
        while True:
            if self._handed < len(engine.pending):
                start = self._handed
                end = len(engine.pending) if n is None else min(len(engine.pending), start + n)
                batch = engine.pending[start:end]
                self._handed = end
                fresh = [c for c in batch if engine.cached(c) is None]
                if fresh:
                    return fresh
                continue
            if engine.unfinished():
                waiting = sum(c.key not in engine.outcomes for c in engine.pending)
                raise SearchStateError(
                    f"all {len(engine.pending)} candidates of generation {engine.generation} were asked and "
                    f"{waiting} await tell(); tell their scores first")
            self._handed = 0
            if not engine.next_generation():
                self.store.set_header(status=engine.done_reason, updated_at=time.time())
                return []

    def tell(self, candidates: Sequence[Candidate], scores: Sequence[Any],
             elapsed_s: Sequence[float] | None = None) -> list[EvalRecord]:
        """Record your evaluations of asked candidates (each committed to the store at once).

        Args:
            candidates: Candidates returned by ``ask``.
            scores: Per candidate: a number, a tuple of numbers, None/NaN (recorded as invalid)
                or a Measurement.
            elapsed_s: Optional evaluation times to record.

        Returns:
            The stored rows.
        """
        if len(candidates) != len(scores):
            raise ConfigurationError(f"tell() needs one score per candidate, but got {len(candidates)} "
                                     f"candidates and {len(scores)} scores")
        pending = {c.key: c for c in self.engine.pending[: self._handed]}
        keys = [c.key for c in candidates]
        if len(set(keys)) != len(keys):
            raise SearchStateError("tell() got the same candidate twice; give each candidate one score")
        for c in candidates:  # check them all before recording any
            if c.key in self.engine.outcomes and pending.get(c.key) is c:
                raise SearchStateError(f"candidate {c.config!r} was already told; each takes one score")
            if pending.get(c.key) is not c:
                raise SearchStateError(f"candidate {c.config!r} is not awaiting a score in generation "
                                       f"{self.engine.generation}; tell only what the last ask() returned")
        records = []
        for i, (c, s) in enumerate(zip(candidates, scores)):
            m = classify_return(s, self.config.num_objectives)
            if elapsed_s is not None:
                m.elapsed_s = float(elapsed_s[i])
            records.append(self.engine.record(c, m, time.time()))
        return records

    # -- state -------------------------------------------------------------------------------
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

    def __enter__(self) -> "Search":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _name_of(fn: Objective | None) -> str:
    if fn is None:
        return "(ask/tell)"
    if hasattr(fn, "__qualname__"):
        return f"{getattr(fn, '__module__', '?')}.{fn.__qualname__}"
    return repr(fn)  # a callable object: its own description

