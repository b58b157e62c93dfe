"""What a run's search is built from: the baseline config, the strategy with its hooks, warm-start genomes, and the
lessons of results (learned conflicts); shared by the generational and the asynchronous engine."""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from compileiq_lab.exceptions import ConfigurationError
from compileiq_lab.measure.measurement import Measurement
from compileiq_lab.search.base import Strategy
from compileiq_lab.search.config import SearchConfiguration
from compileiq_lab.search.conflicts import NamedConflicts, lessons
from compileiq_lab.search.factory import make_strategy
from compileiq_lab.space.space import SearchSpace

__all__ = ["Constraint", "baseline_config", "build_strategy", "check_search_arguments", "constraint_says", "encode_all",
           "learn_conflicts"]

log = logging.getLogger(__name__)
#: Verdicts of the constraint kept per genome (a bounded cache: a run re-checks the same neighbours and offspring at
#: every pick, and a catalog's conflict check decodes the genome first).
CONSTRAINT_CACHE = 1 << 16
#: Why a config is never worth evaluating (e.g. a flag combination the compiler rejects), or None.
Constraint = Callable[[Mapping[str, Any]], "str | None"]


def check_search_arguments(objective_function: Any, search_space: Any, search_config: Any, constraint: Any) -> None:
    """Refuse what a ``Search`` cannot be made of (its first arguments), with the fix."""
    if search_space is None:
        raise ConfigurationError("Search needs search_space, e.g. {'x': ss.range(1, 10)}")
    if search_config is None:
        raise ConfigurationError("Search needs search_config, e.g. SearchConfiguration(generations=10)")
    if not isinstance(search_config, (SearchConfiguration, Mapping)):
        raise ConfigurationError(
            f"Search: `search_config is a SearchConfiguration or a dict of its arguments` must hold, but got "
            f"{type(search_config).__name__} {search_config!r}; a CompileIQ config file is not read here: pass "
            "SearchConfiguration(generations=..., pool_size=..., ...) with the file's settings")
    if objective_function is not None and not callable(objective_function):
        raise ConfigurationError(f"objective_function must be callable, but got "
                                 f"{type(objective_function).__name__}; pass a function of one config dict")
    if constraint is not None and not callable(constraint):
        raise ConfigurationError(f"constraint must be callable (config -> reason | None), but got {constraint!r}; "
                                 "pass e.g. constraint=lambda c: 'why not' if c['x'] > 3 else None")


def baseline_config(space: SearchSpace, config: SearchConfiguration) -> dict[str, Any] | None:
    """The baseline config: the space's own (the compiler defaults); with CompileIQ's ``normalize`` and a space
    that has none, CompileIQ's BASELINE_CONFIG ({}), which such an objective is written to accept."""
    if not config.baseline:
        return None
    own = space.baseline()
    return {} if own is None and config.normalize else own


def build_strategy(space: SearchSpace, config: SearchConfiguration, constraint: Constraint | None,
                   conflicts: NamedConflicts | None = None) -> Strategy:
    """The configured strategy, with its hooks given at construction: it never asks a config the constraint
    rejects, nor one in a conflict learned so far (``conflicts``, which the engine feeds). The constraint is a
    property of a config (a flag combination the compiler rejects), so its verdict per genome is cached
    (``CONSTRAINT_CACHE`` genomes); the conflicts learned grow during the run and are asked each time."""
    resolved = config.resolve(space.n_genes)
    hooks: dict[str, Any] = {}
    if constraint is not None or conflicts is not None:
        rejected = None if constraint is None else _cached_verdict(space, constraint)

        def reject(x: np.ndarray) -> bool:
            return ((conflicts is not None and conflicts.conflict(x) is not None)
                    or (rejected is not None and rejected(np.asarray(x, dtype=np.int64).tobytes())))
        hooks["reject"] = reject
    if config.surrogate and resolved.strategy != "random":  # random draws have nothing to screen
        from compileiq_lab.search.surrogate import SurrogateScreen

        hooks["screen"] = SurrogateScreen(config.num_objectives, config.seed)
    elif config.model == "density" and resolved.strategy != "random" and space.n_genes:
        from compileiq_lab.search.screen import DensityScreen

        hooks["screen"] = DensityScreen(space, config.num_objectives, config.seed)
    return make_strategy(resolved.strategy, space, n_objectives=config.num_objectives,
                         pool_size=resolved.pool_size, seed=config.seed, mutate_rate=resolved.mutate_rate,
                         crossover_rate=config.crossover_rate, seeds=encode_all(space, config.warm_start or []),
                         **hooks)


def _cached_verdict(space: SearchSpace, constraint: Constraint) -> Callable[[bytes], bool]:
    """Whether the constraint rejects a genome (given as its int64 bytes), asked once per genome while it stays in
    the cache."""
    @functools.lru_cache(maxsize=CONSTRAINT_CACHE)
    def rejected(genome: bytes) -> bool:
        return constraint_says(constraint, space.decode(np.frombuffer(genome, dtype=np.int64))) is not None
    return rejected


def constraint_says(constraint: Constraint, config: Mapping[str, Any]) -> str | None:
    """The constraint's reason for ruling ``config`` out, or None where it allows it ("" counts as None).

    Raises:
        ConfigurationError: The constraint raised, or returned something other than a str or None (a yes/no test's
            bool would otherwise read as a reason for every config), naming the config and the fix.
    """
    try:
        reason = constraint(config)
    except Exception as exc:
        raise ConfigurationError(f"the constraint raised {type(exc).__name__}: {exc} for the config {dict(config)!r}; "
                                 "a constraint must answer every config of the space (fix it, or return a reason "
                                 "for the configs it cannot take)") from exc
    if reason is None or isinstance(reason, str):
        return reason or None
    raise ConfigurationError(f"a constraint returns a reason (a str) for a config it rules out and None for one it "
                             f"allows, but it returned {reason!r} ({type(reason).__name__}) for {dict(config)!r}; "
                             "for a yes/no test write e.g. constraint=lambda c: None if ok(c) else 'why not'")


def learn_conflicts(conflicts: NamedConflicts | None, genomes: Sequence[np.ndarray | None],
                    outcomes: Sequence[Measurement]) -> None:
    """Teach ``conflicts`` (if any) the outcomes of searched candidates: which compiled, the message of each failed
    compile and the controls each compile ignored (``search.conflicts.lessons``)."""
    rows = [(g, m) for g, m in zip(genomes, outcomes) if g is not None]
    if conflicts is None or not rows:
        return
    taught = [lessons(m.status, m.error, m.detail) for _, m in rows]
    conflicts.observe(np.array([g for g, _ in rows]), [m.ok for _, m in rows], [t[0] for t in taught],
                      [t[1] for t in taught])


def encode_all(space: SearchSpace, configs: Sequence[dict[str, Any]], say: bool = True) -> np.ndarray:
    """Genomes of the configs that are points of the space (others are left out, with a log line where ``say``)."""
    rows, left = [], []
    for c in configs:
        try:
            rows.append(space.encode(c))
        except (ValueError, KeyError) as exc:
            left.append((c, exc))
    if say and left:  # one line however many: a run's whole front can be left out for one missing control
        first, why = left[0]
        more = f" (and {len(left) - 1} more warm-start configs, for the same or like reasons)" if len(left) > 1 else ""
        log.warning("warm-start config %r left out: it is not a point of this space (%s)%s", first, why, more)
    return np.array(rows, dtype=np.int64).reshape(len(rows), space.n_genes)
