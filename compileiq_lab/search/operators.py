"""pymoo operators for integer genomes: prior sampling, uniform crossover, typed mutation, history dedup."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from pymoo.core.crossover import Crossover
from pymoo.core.duplicate import DuplicateElimination
from pymoo.core.mutation import Mutation
from pymoo.core.sampling import Sampling

from compileiq_lab.exceptions import SearchStateError
from compileiq_lab.space.space import GENE_CATEGORICAL, GENE_KNOCKOUT, GENE_ORDINAL, SearchSpace

__all__ = ["GeneMutation", "GeneUniformCrossover", "HistoryDedup", "PriorSampling", "mutate_genomes"]


def _rng(random_state: np.random.Generator | None) -> np.random.Generator:
    """pymoo hands its seeded generator to every operator; without one a result would not be reproducible."""
    if random_state is None:
        raise SearchStateError("a pymoo operator was called without the algorithm's random_state; run it through "
                               "a strategy (make_strategy), which seeds it")
    return random_state


class PriorSampling(Sampling):
    """Initial population from the space's prior (seed bounds, knockout probabilities), opened by
    warm-start genomes when a ``take_seeds(n)`` function is given."""

    def __init__(self, space: SearchSpace, take_seeds: Callable[[int], np.ndarray] | None = None) -> None:
        super().__init__()
        self.space = space
        self.take_seeds = take_seeds

    def _do(self, problem: Any, n_samples: int, *args: Any, random_state: np.random.Generator | None = None,
            **kwargs: Any) -> np.ndarray:
        seeds = self.take_seeds(n_samples) if self.take_seeds is not None else np.zeros((0, self.space.n_genes))
        rest = self.space.sample(_rng(random_state), n_samples - len(seeds), stratified=True) \
            if n_samples > len(seeds) else np.zeros((0, self.space.n_genes), dtype=np.int64)
        return np.vstack([np.asarray(seeds, dtype=np.int64), rest])


class GeneUniformCrossover(Crossover):
    """Uniform crossover: each gene comes from either parent with probability 1/2."""

    def __init__(self, prob: float = 0.9) -> None:
        super().__init__(n_parents=2, n_offsprings=2, prob=prob)

    def _do(self, problem: Any, X: np.ndarray, *args: Any, random_state: np.random.Generator | None = None,
            **kwargs: Any) -> np.ndarray:
        _, n_matings, n_var = X.shape
        swap = _rng(random_state).random((n_matings, n_var)) < 0.5
        a, b = X[0].copy(), X[1].copy()
        a[swap], b[swap] = X[1][swap], X[0][swap]
        return np.stack([a, b])


def mutate_genomes(space: SearchSpace, X: np.ndarray, rate: float, rng: np.random.Generator,
                   step_scale: float = 0.15) -> np.ndarray:
    """Mutate each gene with probability ``rate``; every mutated gene changes value.

    Ordinal genes move by a small signed step (Gaussian, sd = ``step_scale`` of the domain,
    at least one), categorical genes jump to another value, knockout genes flip.

    Args:
        space: The space that defines gene kinds and bounds.
        X: Genomes, one per row (not modified).
        rate: Per-gene mutation probability.
        rng: Random generator.
        step_scale: Ordinal step standard deviation as a share of the domain width.

    Returns:
        The mutated genomes.
    """
    Y = np.array(X, dtype=np.int64, copy=True)
    hit = rng.random(Y.shape) < rate
    width = space.xu - space.xl
    kind = space.gene_kind
    for j in np.flatnonzero(hit.any(axis=0)):
        rows = np.flatnonzero(hit[:, j])
        old = Y[rows, j]
        if width[j] == 0:
            continue
        if kind[j] == GENE_KNOCKOUT:
            Y[rows, j] = 1 - old
        elif kind[j] == GENE_CATEGORICAL:
            shift = rng.integers(1, width[j] + 1, size=rows.size)
            Y[rows, j] = space.xl[j] + (old - space.xl[j] + shift) % (width[j] + 1)
        elif kind[j] == GENE_ORDINAL:
            sd = max(1.0, step_scale * width[j])
            step = np.rint(rng.normal(0.0, sd, size=rows.size)).astype(np.int64)
            step[step == 0] = rng.choice([-1, 1], size=int((step == 0).sum()))
            new = old + step
            # reflect off the bounds so the ends are not over-sampled
            new = np.where(new < space.xl[j], 2 * space.xl[j] - new, new)
            new = np.where(new > space.xu[j], 2 * space.xu[j] - new, new)
            Y[rows, j] = np.clip(new, space.xl[j], space.xu[j])
    return Y


class GeneMutation(Mutation):
    """Typed per-gene mutation (see ``mutate_genomes``)."""

    def __init__(self, space: SearchSpace, rate: float) -> None:
        super().__init__(prob=1.0)
        self.space = space
        self.rate = rate

    def _do(self, problem: Any, X: np.ndarray, *args: Any, random_state: np.random.Generator | None = None,
            **kwargs: Any) -> np.ndarray:
        return mutate_genomes(self.space, X, self.rate, _rng(random_state))


class HistoryDedup(DuplicateElimination):
    """Duplicate elimination by config identity, against the population and the whole run history.

    ``known(key, genome)`` is the strategy's test: true for every config asked before (and for
    configs its constraint rejects), so such an offspring is dropped and the mating loop draws another.
    """

    def __init__(self, space: SearchSpace, known: Callable[[bytes, np.ndarray], bool]) -> None:
        super().__init__()
        self.space = space
        self.known = known

    def _do(self, pop: Any, other: Any, is_duplicate: np.ndarray) -> np.ndarray:
        X = pop.get("X")
        keys = self.space.keys(X)
        taken: set[bytes] = set() if other is None else set(self.space.keys(other.get("X")))
        for i, k in enumerate(keys):
            if k in taken or self.known(k, X[i]):
                is_duplicate[i] = True
            if other is None:
                taken.add(k)
        return is_duplicate
