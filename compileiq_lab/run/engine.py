"""Engine: ask -> (evaluate) -> tell -> store, generation by generation; stored rows are replayed, never redone."""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from compileiq_lab.exceptions import SearchStateError
from compileiq_lab.measure.measurement import Measurement
from compileiq_lab.run.build import Constraint, baseline_config, build_strategy, encode_all, learn_conflicts
from compileiq_lab.run.events import GenerationEvent
from compileiq_lab.search.config import SearchConfiguration
from compileiq_lab.search.conflicts import NamedConflicts
from compileiq_lab.space.objectives import Objective, signs
from compileiq_lab.space.space import SearchSpace, config_key
from compileiq_lab.store.sqlite import EvalRecord, RunStore

# (Constraint, baseline_config, build_strategy, encode_all and learn_conflicts live in run.build, re-exported here)
__all__ = ["Candidate", "Constraint", "Engine", "baseline_config", "build_strategy", "commit", "copy_config",
           "encode_all", "learn_conflicts", "stored_measurement"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, eq=False)
class Candidate:
    """A config to evaluate.

    Attributes:
        generation: 0 for the baseline (the compiler defaults), then 1..generations.
        config: The config dict the objective receives.
        key: Canonical identity of the config.
        genome: The integer genome (None for the baseline).
    """

    generation: int
    config: dict[str, Any]
    key: str
    genome: np.ndarray | None = None

    @property
    def is_baseline(self) -> bool:
        """Whether this is the baseline (the compiler defaults: see ``SearchSpace.baseline``)."""
        return self.genome is None

    @property
    def params(self) -> dict[str, Any]:
        """The config (CompileIQ's name for it)."""
        return self.config

    @property
    def param_id(self) -> str:
        """The candidate's identity for ``Search.tell([Score(..., param_id=...)])`` (CompileIQ's name)."""
        return self.key


class Engine:
    """Drives one search over a store; knows nothing of threads, widgets or compilers.

    ``ask`` hands out the candidates of the current generation that still need an evaluation
    (configs already in the store are replayed from it) and opens the next generation once every
    candidate of the current one has its outcome; ``tell`` commits an outcome. The strategy is
    built here with its hooks (the constraint, the surrogate screen) and is never changed afterwards.

    Args:
        space: The search space.
        config: The search settings.
        store: Where evaluations are committed (its rows are replayed, never re-evaluated).
        constraint: Why a config is never worth evaluating (None for valid ones).
        baseline_check: Given the baseline's stored evaluation, why the search cannot get anywhere (it then
            ends after the baseline, ``done_reason == "baseline_failed"``), or None to search on.
    """

    def __init__(self, space: SearchSpace, config: SearchConfiguration, store: RunStore,
                 constraint: Constraint | None = None,
                 baseline_check: Callable[[EvalRecord], str | None] | None = None) -> None:
        self._space, self._config, self._store = space, config, store
        self._baseline_check = baseline_check
        self.stop_reason = ""  # which limit ended the search, or ("baseline_failed") the check's reason
        self.objectives: list[Objective] = config.objectives()
        self._sign = signs(self.objectives)
        self.conflicts = NamedConflicts(space) if config.learn_conflicts and space.n_genes else None
        self._strategy = build_strategy(space, config, constraint, self.conflicts)
        self._generation = -1  # -1: nothing asked yet; 0: baseline; 1..: generations
        self._pending: list[Candidate] = []
        self._handed = 0  # candidates of the current generation given out by ask()
        self._outcomes: dict[str, Measurement] = {}
        self._left = 0  # distinct candidates of the current generation without an outcome
        self._told = 0  # candidates of the current generation whose outcomes the strategy has
        self._completed: list[GenerationEvent] = []
        self._completed_count = 0
        self._done_reason = ""
        # the run's rows so far in its trajectory (told, or replayed from the store) and their best first score: what a
        # generation's event reports, the same for a generation replayed by a resumed run as when it was first run
        self._rows: set[str] = set()
        self._best: float | None = None
        self._stored_rows = len(store)  # rows stored before this engine opened the run, and those replayed so far
        self._replayed: set[str] = set()
        #: How many candidates at a time the run asked from which row on ((first row, size), in row order): while
        #: stored rows are replayed, parts are asked in the size they were first asked in (``Search.start`` sets it)
        self.replay_parts: list[tuple[int, int]] = []
        self._baseline = baseline_config(space, config)
        self._pooled = ""  # the baseline's key when it is one of generation 1's candidates (its row is generation 0's)
        if self._baseline is not None and space.is_point(self._baseline):
            genome = space.encode(self._baseline)[None, :]
            if config.pools_baseline(space, self._baseline):  # replayed from its stored row, not evaluated again
                self._strategy.open_with(genome)
                self._pooled = config_key(self._baseline)
            else:
                self._strategy.mark_seen(genome)
        elif config.baseline and config.normalize and space.baseline() is None:
            log.warning("normalize=True: parameters %s have no default, so the baseline is the empty config "
                        "(CompileIQ's BASELINE_CONFIG) and the objective must accept it; declare default= for them "
                        "to normalise by a real baseline", ", ".join(space.baseline_blockers()))
        elif self._baseline is None and config.baseline:
            log.warning("no baseline row: parameters %s can be neither knocked out nor left at a default; declare "
                        "default= for them (e.g. ss.range(1, 9, default=4)) to compare with a baseline",
                        ", ".join(space.baseline_blockers()))

    # -- state -------------------------------------------------------------------------------
    @property
    def generation(self) -> int:
        """The current generation (-1 before the first ask, 0 for the baseline)."""
        return self._generation

    @property
    def generations(self) -> int:
        """The configured number of generations."""
        return self._config.generations

    @property
    def completed(self) -> int:
        """Searched generations (the baseline not counted) whose every candidate has its outcome."""
        return self._completed_count

    def _part(self, n: int | None) -> int | None:
        """How many to ask at a time: while rows stored before this engine opened the run are asked again (a resumed
        run replaying its trajectory), the size its part at the next stored row was asked in (``replay_parts``), else
        ``n``."""
        at = len(self._replayed)
        if at >= self._stored_rows or not self.replay_parts:
            return n
        size = next((size for first, size in reversed(self.replay_parts) if first <= at), n)
        return size or None  # (0: the rest of the generation, as ask() takes it)

    @property
    def done_reason(self) -> str:
        """"finished", "exhausted" or "baseline_failed" (see ``stop_reason``) once the search has ended, else ""."""
        return self._done_reason

    def end(self, reason: str) -> None:
        """End the search now ("finished", ``stop_reason = reason``, e.g. "time_budget"), unless it has ended."""
        if not self._done_reason:
            self._done_reason, self.stop_reason = "finished", reason
            log.info("the run ends after %d evaluations: %s reached", len(self._store), reason)

    def awaiting(self) -> list[Candidate]:
        """Candidates handed out by ``ask`` that have no outcome yet."""
        return [c for c in self._pending[: self._handed] if c.key not in self._outcomes]

    def release(self) -> None:
        """Take back every handed-out candidate without an outcome (a stopped loop); ``ask`` hands them out again."""
        self._handed = 0

    def take_generations(self) -> list[GenerationEvent]:
        """The generations completed since the last call, in order."""
        done, self._completed = self._completed, []
        return done

    # -- ask / tell --------------------------------------------------------------------------
    def ask(self, n: int | None = None) -> list[Candidate]:
        """Up to ``n`` (all if None) candidates of the current generation that need an evaluation.

        Returns [] once the search has ended (see ``done_reason``). With ``max_evaluations``, no more candidates
        are handed out than the stored rows and those awaiting ``tell`` leave room for (the generation is cut short).

        Raises:
            SearchStateError: Every candidate of the generation (or of the evaluation budget) was handed out and some
                await ``tell``.
        """
        limit = self._config.max_evaluations
        while not self._done_reason:
            room = None if limit is None else limit - len(self._store) - len(self.awaiting())
            last = self._handed >= len(self._pending) and self._generation >= self._config.generations
            if room is not None and room <= 0 and not last:  # (at the last generation's end, "generations" ends it)
                if self.awaiting():
                    raise SearchStateError(f"max_evaluations={limit} candidates were asked and "
                                           f"{len(self.awaiting())} await tell(); tell their scores first")
                self.end("max_evaluations")
                break
            if self._handed < len(self._pending):
                end = len(self._pending) if n is None else min(len(self._pending), self._handed + n)
                batch = self._pending[self._handed:end]
                fresh = list({c.key: c for c in batch if not self._known(c)}.values())
                if room is not None and len(fresh) > room:  # hand out what the budget leaves room for, no more
                    fresh = fresh[:room]
                    end = self._handed + max(i for i, c in enumerate(batch) if c is fresh[-1]) + 1
                self._handed = end
                if fresh:
                    return fresh
                continue
            waiting = self.awaiting()
            if waiting:
                raise SearchStateError(
                    f"{len(waiting)} asked candidates of generation {self._generation} await tell(), and the next "
                    "ones are chosen with their scores (a generation is picked part by part, each part with the "
                    "results before it); tell their scores first")
            self._advance(self._part(n))
        return []

    def check_awaiting(self, candidates: Sequence[Candidate]) -> None:
        """Refuse (before anything is recorded) candidates that were not handed out or were told already.

        Raises:
            SearchStateError: A candidate appears twice, was told already, or is not awaiting a score.
        """
        keys = [c.key for c in candidates]
        if len(set(keys)) != len(keys):
            raise SearchStateError("tell() got the same candidate twice; give each candidate one score")
        handed = {c.key: c for c in self._pending[: self._handed]}
        for c in candidates:
            if handed.get(c.key) is c and c.key in self._outcomes:
                raise SearchStateError(f"candidate {c.config!r} was already told; each takes one score")
            if handed.get(c.key) is not c:
                raise SearchStateError(f"candidate {c.config!r} is not awaiting a score in generation "
                                       f"{self._generation}; tell only what the last ask() returned")

    def tell(self, c: Candidate, m: Measurement, started_at: float | None = None) -> EvalRecord:
        """Commit the outcome of a handed-out candidate to the store (before anything else is evaluated)."""
        rec = commit(self._store, c, m, started_at)
        self._record(c, m)
        return rec

    # -- internals ---------------------------------------------------------------------------
    def _known(self, c: Candidate) -> bool:
        """Whether a candidate already has its outcome (told, or stored by an earlier run: replayed)."""
        if c.key in self._outcomes:
            return True
        rec = self._stored(c)
        if rec is None:
            return False
        self._replayed.add(rec.config_key)
        self._record(c, stored_measurement(rec))
        return True

    def _stored(self, c: Candidate) -> EvalRecord | None:
        """The stored evaluation of a candidate, if any."""
        rec = self._store.lookup(c.key)
        if rec is None and c.is_baseline:  # a run made by an older version stored its baseline as {}
            rec = next((r for r in self._store.records() if r.is_baseline), None)
        return rec

    def _record(self, c: Candidate, m: Measurement) -> None:
        new = c.key not in self._outcomes
        self._outcomes[c.key] = m
        self._rows.add(c.key)
        if m.ok and m.scores and (self._best is None or (m.scores[0] - self._best) * self._sign[0] < 0):
            self._best = float(m.scores[0])
        if new:
            self._left -= 1
            if self._left == 0 and not (self._generation >= 1 and self._strategy.in_generation):
                self._complete()

    def _complete(self) -> None:
        """The current generation has every outcome (and the strategy has nothing more to ask in it)."""
        event = self._summary()
        if event.n_candidates or self._generation == 0:  # (a generation 1 of only the pooled baseline has no rows)
            self._completed.append(event)
        self._completed_count += self._generation >= 1

    def _summary(self) -> GenerationEvent:
        # a generation's own rows: generation 1 leaves out the baseline's, which generation 0 counted
        own = [m for k, m in self._outcomes.items() if self._generation == 0 or k != self._pooled]
        failed = sum(not m.ok for m in own)
        log.info("generation %d/%d: %d candidates, %d failed, best %s so far %s", self._generation,
                 self._config.generations, len(self._outcomes), failed, self.objectives[0].name, self._best)
        return GenerationEvent(self._generation, len(own), failed, self._best, len(self._rows))

    def _advance(self, n: int | None = None) -> None:
        """Tell the strategy the outcomes of the part just evaluated; then ask it for up to ``n`` more candidates of the
        current generation (each part is chosen with every outcome before it), or open the next generation (or end
        the search)."""
        if self._told < len(self._pending) and self._generation >= 1:
            part = self._pending[self._told:]
            F = np.zeros((len(part), len(self.objectives)))
            feasible = np.zeros(len(part), dtype=bool)
            for i, c in enumerate(part):
                m = self._outcomes[c.key]
                if m.ok and m.scores is not None:
                    F[i], feasible[i] = np.asarray(m.scores) * self._sign, True
            learn_conflicts(self.conflicts, [c.genome for c in part], [self._outcomes[c.key] for c in part])
            self._strategy.tell(F, feasible)
            self._told = len(self._pending)
        if self._generation >= 1 and self._strategy.in_generation:
            X = self._strategy.ask(n)
            if len(X):
                self._open(self._pending + [self._candidate(x) for x in X])
                return
            self._complete()  # nothing new could be asked for the rest of it: the generation ends short
        if self._generation == 0 and self._pending and self._baseline_check is not None:
            rec = self._stored(self._pending[0])
            why = self._baseline_check(rec) if rec is not None else None
            if why:
                self._done_reason, self.stop_reason = "baseline_failed", why
                log.warning("the run stops after the baseline: %s", why, extra={"stop_reason": why})
                return
        self._pending, self._outcomes, self._handed, self._left, self._told = [], {}, 0, 0, 0
        if self._generation < 0 and self._baseline is not None:
            self._generation = 0
            self._open([Candidate(0, copy_config(self._baseline), config_key(self._baseline))])
            return
        self._generation = max(self._generation, 0) + 1
        if self._generation > self._config.generations:
            if self._strategy.spent:  # the last generation evaluated what was left of the space
                self._done_reason = "exhausted"
                log.info("search space exhausted after %d evaluations", len(self._store))
            else:
                self._done_reason, self.stop_reason = "finished", "generations"
            return
        X = self._strategy.ask(n)
        if len(X) == 0:
            self._done_reason = "exhausted"
            log.info("search space exhausted after %d evaluations", len(self._store))
            return
        self._open([self._candidate(x) for x in X])

    def _open(self, candidates: list[Candidate]) -> None:
        """The current generation's candidates so far (a new part appended to the ones before it)."""
        self._left += len({c.key for c in candidates}) - len({c.key for c in self._pending})
        self._pending = candidates

    def _candidate(self, x: np.ndarray) -> Candidate:
        config = self._space.decode(x)
        return Candidate(self._generation, config, config_key(config), x)


def commit(store: RunStore, c: Candidate, m: Measurement, started_at: float | None = None) -> EvalRecord:
    """Append a candidate's outcome to the store as its next row; returns the row. What a store cannot hold is made
    storable, never a reason to lose the row: an error text with undecodable bytes (a compiler's output decoded with
    ``surrogateescape``) gets them replaced, and an elapsed time that is not a finite number >= 0 is recorded as 0."""
    elapsed = float(m.elapsed_s) if isinstance(m.elapsed_s, (int, float)) and math.isfinite(m.elapsed_s) else 0.0
    rec = EvalRecord(eval_id=len(store), generation=c.generation, config_key=c.key, params=c.config, status=m.status,
                     error=_storable_text(m.error), scores=list(m.scores) if m.scores is not None else None,
                     elapsed_s=max(0.0, elapsed), started_at=time.time() if started_at is None else started_at,
                     is_baseline=c.is_baseline, detail=m.detail)
    store.append(rec)
    return rec


def _storable_text(text: object) -> str:
    """``text`` as a string UTF-8 can encode (lone surrogates, from bytes decoded as ``surrogateescape``, replaced)."""
    return str(text).encode("utf-8", errors="replace").decode("utf-8")


def stored_measurement(rec: EvalRecord) -> Measurement:
    """The Measurement a stored row records."""
    return Measurement(rec.status, tuple(rec.scores) if rec.scores is not None else None, rec.error, rec.elapsed_s,
                       rec.detail)


def copy_config(config: dict[str, Any]) -> dict[str, Any]:
    """A copy of a config deep enough that changing it cannot reach the space or the store."""
    return {k: copy_config(v) if isinstance(v, dict) else list(v) if isinstance(v, list) else v
            for k, v in config.items()}
