"""Engine: ask -> evaluate -> tell -> store, with stored evaluations replayed on resume."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from compileiq_lab._version import __version__
from compileiq_lab.search.config import TRAJECTORY_KEYS, SearchConfiguration
from compileiq_lab.exceptions import StoreMismatchError
from compileiq_lab.measure.measurement import Measurement
from compileiq_lab.search import make_strategy
from compileiq_lab.space.space import SearchSpace, config_key
from compileiq_lab.store.sqlite import SCHEMA_VERSION, EvalRecord, RunStore

__all__ = ["Candidate", "Engine", "new_header", "prepare_store"]

log = logging.getLogger(__name__)
Evaluate = Callable[[dict[str, Any]], Measurement]


@dataclass(frozen=True, eq=False)
class Candidate:
    """A config to evaluate.

    Attributes:
        generation: 0 for the baseline (empty config), then 1..generations.
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
        """Whether this is the empty config (compiler defaults)."""
        return self.genome is None


def new_header(space: SearchSpace, config: SearchConfiguration, objective: str) -> dict[str, Any]:
    """The header of a new run: schema version, space, configuration, objective, package version."""
    resolved = config.resolve(space.n_genes)
    return {"schema_version": SCHEMA_VERSION, "created_at": time.time(), "space": space.to_spec(),
            "config": config.to_dict(), "objective": objective, "package_version": __version__,
            "status": "running", "resolved": {"pool_size": resolved.pool_size, "strategy": resolved.strategy,
                                              "mutate_rate": resolved.mutate_rate}}


def prepare_store(store: RunStore, space: SearchSpace, config: SearchConfiguration,
                  objective: str, metadata: dict[str, Any] | None = None) -> None:
    """Write a new store's header, or check that an existing run matches and may continue.

    Raises:
        StoreMismatchError: If the stored run has another space or trajectory settings.
    """
    h = store.header()
    if not h:
        store.set_header(**new_header(space, config, objective))
        return
    stored_space = SearchSpace.from_spec(h["space"])
    if stored_space != space:
        raise StoreMismatchError(
            f"run store {store.path!r} holds a run over a different search space "
            f"(stored vs given: {stored_space.diff(space)}); stored space {stored_space!r}, "
            f"given space {space!r}. Use a new store path, or resume with the stored space.")
    stored_cfg = h["config"]
    given = config.to_dict()
    diff = [f"{k}: stored {stored_cfg.get(k)!r} vs given {given[k]!r}"
            for k in TRAJECTORY_KEYS if stored_cfg.get(k) != given[k]]
    if diff:
        raise StoreMismatchError(
            f"run store {store.path!r} was made with other search settings ({'; '.join(diff)}); "
            "a resumed run must keep them (only generations and timeout_s may change). "
            "Use a new store path to search with new settings.")
    stored_meta = h.get("metadata")
    if metadata is not None and stored_meta is not None and stored_meta != metadata:
        keys = sorted(k for k in set(stored_meta) | set(metadata) if stored_meta.get(k) != metadata.get(k))
        diff = "; ".join(f"{k}: stored {stored_meta.get(k)!r} vs given {metadata.get(k)!r}" for k in keys)
        raise StoreMismatchError(
            f"run store {store.path!r} holds a run of another setup ({diff}); its results would not compare. "
            "Use a new store path.")
    store.set_header(config=given, status="running")


class Engine:
    """Drives one search over a store; knows nothing of threads, widgets or compilers.

    Args:
        space: The search space.
        config: The search settings.
        store: Where evaluations are committed (its rows are replayed, never re-evaluated).
        constraint: Returns a reason for configs never worth evaluating (None for valid ones).
    """

    def __init__(self, space: SearchSpace, config: SearchConfiguration, store: RunStore,
                 constraint: Callable[[dict[str, Any]], str | None] | None = None) -> None:
        self.space = space
        self.config = config
        self.store = store
        self.resolved = config.resolve(space.n_genes)
        self.sign = np.array([1.0 if d == "min" else -1.0 for d in config.directions])
        self.strategy = make_strategy(
            self.resolved.strategy, space, n_objectives=config.num_objectives,
            pool_size=self.resolved.pool_size, seed=config.seed,
            mutate_rate=self.resolved.mutate_rate, crossover_rate=config.crossover_rate,
            seeds=_encode_all(space, config.warm_start or []))
        if config.surrogate and hasattr(self.strategy, "screen"):
            from compileiq_lab.search.surrogate import SurrogateScreen

            self.strategy.screen = SurrogateScreen(config.num_objectives, config.seed)
        if constraint is not None:
            self.strategy.reject = lambda x: constraint(space.decode(x)) is not None
        self.generation = -1  # -1: nothing asked yet; 0: baseline; 1..: generations
        self.pending: list[Candidate] = []
        self.outcomes: dict[str, Measurement] = {}
        self.done_reason = ""
        if config.baseline:
            try:
                self.strategy.mark_seen(space.encode({})[None, :])
            except ValueError:
                pass  # the empty config is not a point of this space

    # -- generations -------------------------------------------------------------------------
    def unfinished(self) -> bool:
        """Whether a candidate of the current generation still lacks an outcome."""
        return any(c.key not in self.outcomes for c in self.pending)

    def next_generation(self) -> list[Candidate]:
        """Advance to the next generation and return its candidates ([] when the search is done)."""
        if self.unfinished():
            raise RuntimeError("next_generation() before every candidate has an outcome")
        if self.pending and self.generation >= 1:
            self._tell()
        self.pending, self.outcomes = [], {}
        if self.generation < 0 and self.config.baseline:
            self.generation = 0
            self.pending = [Candidate(0, {}, config_key({}))]
            return self.pending
        self.generation = max(self.generation, 0) + 1
        if self.generation > self.config.generations:
            self.done_reason = "finished"
            return []
        X = self.strategy.ask()
        if len(X) == 0:
            self.done_reason = "exhausted"
            log.info("search space exhausted after %d evaluations", len(self.store))
            return []
        self.pending = [self._candidate(x) for x in X]
        return self.pending

    def _candidate(self, x: np.ndarray) -> Candidate:
        config = self.space.decode(x)
        return Candidate(self.generation, config, config_key(config), x)

    def _tell(self) -> None:
        k = self.config.num_objectives
        F = np.zeros((len(self.pending), k))
        feasible = np.zeros(len(self.pending), dtype=bool)
        for i, c in enumerate(self.pending):
            m = self.outcomes[c.key]
            if m.ok and m.scores is not None:
                F[i] = np.asarray(m.scores) * self.sign
                feasible[i] = True
        self.strategy.tell(F, feasible)

    # -- evaluations -------------------------------------------------------------------------
    def cached(self, c: Candidate) -> Measurement | None:
        """The stored outcome of a candidate's config (replay and dedup), or None."""
        rec = self.store.lookup(c.key)
        if rec is None:
            return None
        m = _measurement(rec)
        self.outcomes[c.key] = m
        return m

    def record(self, c: Candidate, m: Measurement, started_at: float) -> EvalRecord:
        """Commit a new outcome to the store (before anything else is evaluated)."""
        rec = EvalRecord(eval_id=len(self.store), generation=c.generation, config_key=c.key,
                         params=c.config, status=m.status, error=m.error,
                         scores=list(m.scores) if m.scores is not None else None,
                         elapsed_s=m.elapsed_s, started_at=started_at, is_baseline=c.is_baseline,
                         detail=m.detail)
        self.store.append(rec)
        self.outcomes[c.key] = m
        return rec

    def best_score(self) -> float | None:
        """Best first-objective score stored so far (None if nothing succeeded)."""
        scores = [r.scores[0] for r in self.store.records() if r.status == "ok" and r.scores]
        if not scores:
            return None
        return min(scores) if self.sign[0] > 0 else max(scores)

    def run(self, c: Candidate, evaluate: Evaluate) -> EvalRecord:
        """Evaluate a candidate the store does not know (see ``cached``) and record it."""
        started = time.time()
        m = evaluate(copy_config(c.config))  # the objective may change its copy freely
        return self.record(c, m, started)


def _encode_all(space: SearchSpace, configs: list[dict[str, Any]]) -> np.ndarray:
    """Genomes of the configs that are points of the space (others are left out, with a log line)."""
    rows = []
    for c in configs:
        try:
            rows.append(space.encode(c))
        except (ValueError, KeyError) as exc:
            log.warning("warm-start config %r left out: it is not a point of this space (%s)", c, exc)
    return np.array(rows, dtype=np.int64).reshape(len(rows), space.n_genes)


def copy_config(config: dict[str, Any]) -> dict[str, Any]:
    """A copy of a config deep enough that changing it cannot reach the space or the store."""
    return {k: copy_config(v) if isinstance(v, dict) else list(v) if isinstance(v, list) else v
            for k, v in config.items()}


def _measurement(rec: EvalRecord) -> Measurement:
    return Measurement(rec.status, tuple(rec.scores) if rec.scores is not None else None,
                       rec.error, rec.elapsed_s, rec.detail)
