"""The asynchronous steady-state search: a new candidate whenever a slot frees up, each result told as it arrives."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, wait
from typing import Any

import numpy as np

from compileiq_lab.measure.measurement import Measurement
from compileiq_lab.run.build import Constraint, baseline_config, build_strategy, learn_conflicts
from compileiq_lab.run.engine import Candidate, commit, copy_config, stored_measurement
from compileiq_lab.run.events import EvaluationEvent, GenerationEvent, RunEvent
from compileiq_lab.run.executor import Executor
from compileiq_lab.run.loop import Deadline, expired, gated
from compileiq_lab.search.config import SearchConfiguration
from compileiq_lab.search.conflicts import NamedConflicts
from compileiq_lab.space.objectives import signs
from compileiq_lab.space.space import SearchSpace, config_key
from compileiq_lab.store.sqlite import EvalRecord, RunStore

__all__ = ["SteadyEngine", "drive_steady"]

log = logging.getLogger(__name__)
#: Bounded staleness, in pools: a new candidate is proposed only while fewer than LAG_POOLS x pool_size candidates
#: were proposed since the oldest one still out (0: unbounded). Measured in bench/bench_dask.py (8 slots, pool 8, 30
#: seeds, three runs): where the good candidates take 10x longer, unbounded spends 27-39 % of its calls on them
#: (synchronous 58 %); 1.5 pools 46-52 % at 1.2-1.3x the synchronous speed; where evaluation times are unrelated to
#: quality, 1.5 pools runs 1.5x faster than synchronous (unbounded 1.9-2.0x); 1 pool removes the bias and the speed-up.
LAG_POOLS = 1.5


class SteadyEngine:
    """The steady-state counterpart of ``Engine``: the same store, baseline, budget and events, no generation barrier.

    The budget is ``generations x pool_size`` searched candidates (as in the generational engine). Rows are numbered
    into generations of ``pool_size`` in the order their candidates were proposed; a GenerationEvent is emitted each
    time another ``pool_size`` results have arrived. A resumed run's stored rows are told to the strategy first and
    count toward the budget (arrival order decided what was asked, so the asks cannot be replayed one by one).
    Staleness is bounded (``lag``, from ``LAG_POOLS``): no candidate is proposed ``lag`` or more proposals after the
    oldest one still out, so a slow candidate is overtaken by at most that many offspring bred without it.

    Args: as for ``Engine``.
    """

    def __init__(self, space: SearchSpace, config: SearchConfiguration, store: RunStore,
                 constraint: Constraint | None = None,
                 baseline_check: Callable[[EvalRecord], str | None] | None = None) -> None:
        self._space, self._store, self._baseline_check = space, store, baseline_check
        self.objectives = config.objectives()
        self._sign = np.asarray(signs(self.objectives), dtype=float)
        self.conflicts = NamedConflicts(space) if config.learn_conflicts and space.n_genes else None
        self._strategy = build_strategy(space, config, constraint, self.conflicts)
        self._pool = config.resolve(space.n_genes).pool_size
        self._budget = config.generations * self._pool
        self._limit = config.max_evaluations  # rows in the store at most (the baseline and earlier sessions count)
        self._baseline = baseline_config(space, config)
        self._pooled: np.ndarray | None = None  # the baseline's genome when the strategy learns its result
        if self._baseline is not None and space.is_point(self._baseline):
            genome = space.encode(self._baseline)[None, :]
            if config.pools_baseline(space, self._baseline) and space.n_genes:
                self._strategy.open_with(genome)
                self._pooled = genome
            else:
                self._strategy.mark_seen(genome)
        self.stop_reason = ""
        self._done_reason = ""
        self._proposed = 0  # searched candidates proposed so far (stored ones included)
        self._told = 0
        self._failed_since = 0
        self._best: float | None = None
        self._out: dict[str, Candidate] = {}
        self._order: dict[str, int] = {}
        self.lag = round(LAG_POOLS * self._pool)
        self._events: list[GenerationEvent] = []
        self._replay()

    @property
    def done_reason(self) -> str:
        """"finished", "exhausted" or "baseline_failed" once the search has ended, else ""."""
        return self._done_reason

    def end(self, reason: str) -> None:
        """End the search now ("finished", ``stop_reason = reason``, e.g. "time_budget"), unless it has ended."""
        if not self._done_reason:
            self._done_reason, self.stop_reason = "finished", reason
            log.info("the run ends after %d evaluations: %s reached", len(self._store), reason)

    @property
    def in_flight(self) -> int:
        """Candidates handed out without an outcome."""
        return len(self._out)

    def take_generations(self) -> list[GenerationEvent]:
        """The GenerationEvents since the last call."""
        done, self._events = self._events, []
        return done

    def baseline(self) -> Candidate | None:
        """The baseline candidate when it still needs its evaluation (None when there is none or it is stored)."""
        if self._baseline is None:
            return None
        key = config_key(self._baseline)
        rec = self._store.lookup(key)
        if rec is None:
            c = Candidate(0, copy_config(self._baseline), key)
            self._out[key] = c
            return c
        self._check_baseline(rec)
        return None

    def ask(self, n: int) -> list[Candidate]:
        """Up to ``n`` new candidates ([] while the budget is handed out or nothing new can be proposed)."""
        if self._done_reason or n < 1:
            return []
        n = min(n, self._budget - self._proposed)
        if self._limit is not None:  # the stored rows and those still out leave room for so many more
            n = min(n, self._limit - len(self._store) - len(self._out))
        if self.lag:  # bounded staleness: at most `lag` proposals from the oldest one still out on
            oldest = min((self._order[k] for k in self._out if k in self._order), default=self._proposed)
            n = min(n, oldest + self.lag - self._proposed)
            if n <= 0:
                return []
        X = self._strategy.propose(n) if n > 0 else np.zeros((0, self._space.n_genes), dtype=np.int64)
        if len(X) == 0:
            if not self._out:
                self._finish_or_exhaust()
            return []
        batch = []
        for x in X:
            config = self._space.decode(x)
            c = Candidate(1 + self._proposed // self._pool, config, config_key(config), x)
            self._order[c.key] = self._proposed
            self._proposed += 1
            self._out[c.key] = c
            batch.append(c)
        return batch

    def tell(self, c: Candidate, m: Measurement, started_at: float | None = None) -> EvalRecord:
        """Commit an outcome and tell the strategy at once."""
        rec = commit(self._store, c, m, started_at)
        self._out.pop(c.key, None)
        self._order.pop(c.key, None)
        if c.is_baseline:
            self._check_baseline(rec)
            self._learn_baseline(m)
            return rec
        self._learn([c.genome], [m])
        if not self._out:
            self._finish_or_exhaust(exhausted=False)
        return rec

    def release(self, c: Candidate) -> None:
        """Give up a handed-out candidate (a stopped run): it is not stored, and a resumed run may ask it again."""
        self._out.pop(c.key, None)
        self._order.pop(c.key, None)

    # -- internals ---------------------------------------------------------------------------
    def _replay(self) -> None:
        rows = [r for r in self._store.records() if not r.is_baseline]
        stored = self._store.lookup(config_key(self._baseline)) if self._baseline is not None else None
        if stored is not None:  # first, as it was learned first
            self._learn_baseline(stored_measurement(stored))
        genomes, outcomes = [], []
        for r in rows:
            if self._space.is_point(r.params):
                genomes.append(self._space.encode(r.params))
                outcomes.append(stored_measurement(r))
        self._proposed = len(rows)
        if genomes:
            self._learn(genomes, outcomes, replayed=True)
        self._finish_or_exhaust(exhausted=False)

    def _finish_or_exhaust(self, exhausted: bool = True) -> None:
        """With nothing out: end the search at a limit it reached ("finished"), else (``exhausted``: nothing new could
        be proposed) as "exhausted"."""
        if self._proposed >= self._budget:
            self._done_reason, self.stop_reason = "finished", "generations"
        elif self._limit is not None and len(self._store) >= self._limit:
            self.end("max_evaluations")
        elif exhausted:
            self._done_reason = "exhausted"
            log.info("search space exhausted after %d evaluations", len(self._store))

    def _learn_baseline(self, m: Measurement) -> None:
        """The strategy learns the baseline's result (``baseline_in_pool``): it joins pymoo's initial pool and the
        screen's history; it is not one of the searched candidates the budget and the generation events count."""
        if self._pooled is not None:
            self._tell_strategy(self._pooled, [m])

    def _tell_strategy(self, X: np.ndarray, outcomes: list[Measurement]) -> np.ndarray:
        """Tell the strategy (and the named conflicts) these results as minimisation scores; returns which were
        feasible."""
        F = np.zeros((len(outcomes), len(self.objectives)))
        feasible = np.array([m.ok and m.scores is not None for m in outcomes], dtype=bool)
        for i in np.flatnonzero(feasible):
            F[i] = np.asarray(outcomes[i].scores) * self._sign
        learn_conflicts(self.conflicts, list(X), outcomes)
        self._strategy.observe(X, F, feasible)
        return feasible

    def _learn(self, genomes: list[Any], outcomes: list[Measurement], replayed: bool = False) -> None:
        X = np.asarray(genomes, dtype=np.int64).reshape(len(genomes), self._space.n_genes)
        for m in outcomes:
            if m.ok and m.scores is not None:
                first = float(m.scores[0])
                if self._best is None or (first - self._best) * self._sign[0] < 0:
                    self._best = first
        feasible = self._tell_strategy(X, outcomes)
        for ok in feasible:
            self._told += 1
            self._failed_since += not ok
            if self._told % self._pool == 0 and not replayed:
                self._events.append(GenerationEvent(self._told // self._pool, self._pool, self._failed_since,
                                                    self._best, len(self._store)))
            if self._told % self._pool == 0:
                self._failed_since = 0

    def _check_baseline(self, rec: EvalRecord) -> None:
        why = self._baseline_check(rec) if self._baseline_check is not None else None
        if why:
            self._done_reason, self.stop_reason = "baseline_failed", why
            log.warning("the run stops after the baseline: %s", why, extra={"stop_reason": why})


def drive_steady(engine: SteadyEngine, evaluate: Callable[[dict[str, Any]], Measurement],
                 emit: Callable[[RunEvent], None], stop: threading.Event, executor: Executor, slots: int,
                 gate: Callable[[], object] | None = None, deadline: Deadline = None) -> str:
    """Keep ``slots`` evaluations running until the budget is spent or ``stop`` is set (see ``drive``).

    The baseline runs first, alone; then every free slot gets a new candidate at once, and each outcome is committed
    and told the moment it arrives. Past ``deadline`` (the time budget) nothing new starts; the calls running finish
    and are kept, and the search ends ("finished", ``engine.stop_reason == "time_budget"``).

    Returns:
        How it ended: "finished", "exhausted", "baseline_failed" or "stopped".
    """
    task = gated(evaluate, stop, gate, deadline)
    out: dict[Future[tuple[float, Measurement] | None], Candidate] = {}

    def submit(c: Candidate) -> None:
        job = executor.submit(task, copy_config(c.config))
        if not isinstance(job, Future):  # an executor that runs a call only when asked for it: run it now
            done: Future[tuple[float, Measurement] | None] = Future()
            done.set_result(job.result())
            job = done
        out[job] = c

    try:
        first = engine.baseline()
        if first is not None:
            submit(first)
        while True:
            if first is None and not stop.is_set() and not expired(deadline):
                for c in engine.ask(slots - len(out)):
                    submit(c)
            if not out:
                if stop.is_set() and not engine.done_reason:
                    return "stopped"
                if expired(deadline):
                    engine.end("time_budget")
                return engine.done_reason or "finished"
            done, _ = wait(list(out), return_when=FIRST_COMPLETED)
            for job in [j for j in out if j in done]:  # submission order among those that finished together
                c = out.pop(job)
                outcome = job.result()
                if outcome is None:
                    engine.release(c)
                    continue
                emit(EvaluationEvent(engine.tell(c, outcome[1], outcome[0])))
                for event in engine.take_generations():
                    emit(event)
                if c is first:
                    first = None
            if stop.is_set():  # calls not started are dropped; those running finish and are kept
                for job, c in list(out.items()):
                    if job.cancel():
                        engine.release(c)
                        del out[job]
    finally:
        for job, c in out.items():  # calls not started yet are dropped; the executor's owner shuts it down
            job.cancel()
            engine.release(c)
