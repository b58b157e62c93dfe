"""Strategy base: pure ask/tell over integer genomes (no IO, threads or printing)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator

import numpy as np

from compileiq_lab.exceptions import SearchStateError
from compileiq_lab.space.space import SearchSpace

__all__ = ["Strategy"]


class Strategy(ABC):
    """Ask for genomes never asked before; tell their (minimisation) scores and feasibility.

    Args:
        space: The encoded search space.
        n_objectives: Number of objectives (scores are minimised; the caller flips maxima).
        pool_size: Candidates per generation.
        seed: Seed of the strategy's own random generator (the same seed gives the same asks).
        mutate_rate: Per-gene mutation probability.
        crossover_rate: Probability that a mating uses crossover.
        seeds: Genomes that open the first generation (warm start), in order.
        reject: Test of a genome; rejected configs are never asked (e.g. known compiler conflicts).
    """

    name = "base"
    max_draw_rounds = 50

    def __init__(self, space: SearchSpace, *, n_objectives: int, pool_size: int, seed: int,
                 mutate_rate: float, crossover_rate: float, seeds: np.ndarray | None = None,
                 reject: Callable[[np.ndarray], bool] | None = None) -> None:
        self.space = space
        self.n_objectives = n_objectives
        self.pool_size = pool_size
        self.seed = seed
        self.mutate_rate = mutate_rate
        self.crossover_rate = crossover_rate
        self.seen: set[bytes] = set()
        self._asked: np.ndarray | None = None
        self.exhausted = False
        self._gen_left = 0  # genomes of the current generation not asked yet
        self.slot = 0  # how many of the current generation were asked before the part being asked
        self._space_size = space.size
        self._reject = reject
        self.seeds = (np.zeros((0, space.n_genes), dtype=np.int64) if seeds is None
                      else np.asarray(seeds, dtype=np.int64).reshape(len(seeds), space.n_genes))

    def known(self, key: bytes, x: np.ndarray) -> bool:
        """Whether a config was asked before or is rejected (rejected ones are remembered as seen)."""
        if key in self.seen:
            return True
        if self._reject is not None and self._reject(x):
            self.seen.add(key)
            return True
        return False

    def mark_seen(self, X: np.ndarray) -> None:
        """Record genomes evaluated outside the strategy (e.g. the baseline) so they are not asked."""
        self.seen.update(self.space.keys(X))

    def open_with(self, X: np.ndarray) -> None:
        """Open the first generation with these genomes, ahead of any warm start: configs whose results the caller
        already holds (the baseline, evaluated before generation 1), so that the strategy learns them as members of
        its first pool instead of spending those slots on prior samples. The caller answers them from what it holds,
        without a second evaluation (``Engine`` replays a stored row)."""
        X = np.asarray(X, dtype=np.int64)
        X = X.reshape(len(X) if X.ndim > 1 else 1, self.space.n_genes)  # (-1 cannot be solved for a space of no genes)
        self.seeds = np.vstack([X, self.seeds])

    def ask(self, n: int | None = None) -> np.ndarray:
        """Return genomes (rows) whose configs were never asked before: the next ``n`` of the current generation
        (None: the rest of it), each chosen with every result told so far. A generation holds ``pool_size``
        genomes; the next one opens once it is all asked and told. Asking it in parts (one at a time when there is
        one evaluation slot) lets a strategy that learns (the offspring screen) choose each part with the results
        of the parts before it.

        An empty result means the strategy cannot produce anything new (space exhausted).

        Args:
            n: How many at most (an int >= 1), or None for the rest of the generation.
        """
        if self._asked is not None:
            raise SearchStateError(
                f"ask() called while {len(self._asked)} genomes of the previous ask await tell(); "
                "call tell() with their scores first.")
        if n is not None and (not isinstance(n, int) or isinstance(n, bool) or n < 1):
            raise ValueError(f"ask(n): `n is None or an int >= 1` must hold, but got n={n!r}; pass a count or None "
                             "for the rest of the generation")
        if self.exhausted or len(self.seen) >= self._space_size:
            self.exhausted = True
            return np.zeros((0, self.space.n_genes), dtype=np.int64)
        opening = self._gen_left == 0
        if opening:
            self._gen_left, self.slot = self.pool_size, 0
        want = self._gen_left if n is None else min(n, self._gen_left)
        if self.space.n_genes == 0:
            X = np.zeros((0 if self.seen else 1, 0), dtype=np.int64)
        else:
            X = self._ask(want)
        X = np.asarray(X, dtype=np.int64).reshape(len(X), self.space.n_genes)[:want]
        # a part shorter than asked ends the generation (nothing new could be mated or drawn for it)
        self._gen_left = self._gen_left - len(X) if len(X) == want else 0
        self.slot += len(X)
        if len(X) == 0:  # nothing new for a whole generation: the space is spent (a part only ends its generation)
            self.exhausted = opening
            return X
        self.seen.update(self.space.keys(X))
        self._asked = X
        return X

    @property
    def spent(self) -> bool:
        """Whether nothing new is left to ask: every config of the space was asked or is rejected."""
        return self.exhausted or len(self.seen) >= self._space_size

    @property
    def in_generation(self) -> bool:
        """Whether the current generation has genomes left to ask (``ask`` continues it rather than open a new one)."""
        return self._gen_left > 0

    def propose(self, n: int) -> np.ndarray:
        """Steady-state use: up to ``n`` genomes never asked before, while earlier proposals may still be out.

        Each result goes back through ``observe`` whenever it arrives, in any order; there is no generation
        barrier. An empty result means nothing new can be proposed now (the space is exhausted).

        Raises:
            SearchStateError: A generational ``ask`` awaits its ``tell`` (the two uses do not mix).
        """
        if self._asked is not None:
            raise SearchStateError("propose() called while a generation from ask() awaits tell(); use either "
                                   "ask()/tell() or propose()/observe() on one strategy")
        if self.exhausted or len(self.seen) >= self._space_size or n < 1:
            self.exhausted = self.exhausted or len(self.seen) >= self._space_size
            return np.zeros((0, self.space.n_genes), dtype=np.int64)
        if self.space.n_genes == 0:
            X = np.zeros((0 if self.seen else 1, 0), dtype=np.int64)
        else:
            X = np.asarray(self._propose(n), dtype=np.int64).reshape(-1, self.space.n_genes)[:n]
        self.seen.update(self.space.keys(X))
        return X

    def observe(self, X: np.ndarray, F: np.ndarray, feasible: np.ndarray) -> None:
        """Steady-state use: the scores of proposed (or otherwise evaluated) genomes, any subset, in any order.

        Args:
            X: Genomes, shape (n, n_genes).
            F: Minimisation scores, shape (n, n_objectives); rows of infeasible genomes are ignored.
            feasible: Boolean per row; False for failed evaluations.
        """
        X = np.asarray(X, dtype=np.int64).reshape(-1, self.space.n_genes)
        if len(X) == 0:
            return
        self.seen.update(self.space.keys(X))
        F = np.asarray(F, dtype=float).reshape(len(X), self.n_objectives)
        feasible = np.asarray(feasible, dtype=bool).reshape(len(X))
        if self.space.n_genes:
            self._observe(X, F, feasible)

    def _propose(self, n: int) -> np.ndarray:
        """Steady-state proposals; by default warm-start genomes first, then unseen prior samples."""
        seeds = self.take_seeds(n)
        rest = self.draw_unseen(self._steady_rng(), n - len(seeds), exclude=set(self.space.keys(seeds)))
        return np.vstack([seeds, rest]) if len(seeds) else rest

    def _observe(self, X: np.ndarray, F: np.ndarray, feasible: np.ndarray) -> None:
        """Learn from steady-state results (nothing by default)."""
        return None

    def _steady_rng(self) -> np.random.Generator:
        rng: np.random.Generator | None = getattr(self, "_rng_steady", None)
        if rng is None:
            rng = self._rng_steady = np.random.default_rng(self.seed)
        return rng

    def tell(self, F: np.ndarray, feasible: np.ndarray) -> None:
        """Report the scores of the last ask, in its order.

        Args:
            F: Minimisation scores, shape (n, n_objectives); rows of infeasible candidates are ignored.
            feasible: Boolean per row; False for failed evaluations (treated as constraint violations).
        """
        if self._asked is None:
            raise SearchStateError("tell() called without a pending ask(); call ask() first.")
        F = np.asarray(F, dtype=float).reshape(len(self._asked), self.n_objectives)
        feasible = np.asarray(feasible, dtype=bool).reshape(len(self._asked))
        if self.space.n_genes:
            self._tell(self._asked, F, feasible)
        self._asked = None

    def take_seeds(self, n: int) -> np.ndarray:
        """Up to ``n`` warm-start genomes not asked before (each given out once)."""
        rows: list[np.ndarray] = []
        keep: list[np.ndarray] = []
        taken: set[bytes] = set()
        for x, k in zip(self.seeds, self.space.keys(self.seeds)):
            if len(rows) >= n:
                keep.append(x)
            elif k not in taken and not self.known(k, x):
                rows.append(x)
                taken.add(k)
        self.seeds = np.array(keep, dtype=np.int64).reshape(len(keep), self.space.n_genes)
        return np.array(rows, dtype=np.int64).reshape(len(rows), self.space.n_genes)

    def fresh(self, X: np.ndarray, taken: set[bytes]) -> Iterator[np.ndarray]:
        """The rows of ``X`` whose configs were never asked, are not rejected and are not in ``taken``, in order;
        each one given is added to ``taken``."""
        for x, k in zip(X, self.space.keys(X)):
            if k not in taken and not self.known(k, x):
                taken.add(k)
                yield x

    def draw_unseen(self, rng: np.random.Generator, n: int, exclude: set[bytes] | None = None) -> np.ndarray:
        """Up to ``n`` prior samples whose configs were never asked (nor are in ``exclude``); where the prior has no
        more of them (a knockout_prob of 0 or 1, seed bounds narrower than the values), draws uniform over every
        gene's whole domain, so that a space is only called exhausted when it is."""
        rows: list[np.ndarray] = []
        keys = set(exclude or ())
        space = self.space
        for r in range(2 * self.max_draw_rounds):
            X = space.sample(rng, max(n, 8)) if r < self.max_draw_rounds else \
                rng.integers(space.xl, space.xu + 1, size=(max(n, 8), space.n_genes))
            for x in self.fresh(X, keys):
                rows.append(x)
                if len(rows) == n:
                    return np.array(rows)
        return np.array(rows, dtype=np.int64).reshape(len(rows), space.n_genes)

    @abstractmethod
    def _ask(self, n: int) -> np.ndarray:
        """Up to ``n`` new genomes for the current generation (``self.slot`` of its ``pool_size`` are asked already);
        more are cut off."""

    @abstractmethod
    def _tell(self, X: np.ndarray, F: np.ndarray, feasible: np.ndarray) -> None:
        """The results of the last ask (a whole generation, or a part of one)."""
