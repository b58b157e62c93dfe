"""Random search without replacement: the yardstick every other strategy must beat."""

from __future__ import annotations

from typing import Any

import numpy as np

from compileiq_lab.search.base import Strategy

__all__ = ["RandomStrategy"]


class RandomStrategy(Strategy):
    """Draw each generation from the space's prior, never repeating a config."""

    name = "random"

    def __init__(self, *args: Any, screen: object = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)  # a surrogate screen has nothing to rank here: every draw is random
        self.rng = self._rng_steady = np.random.default_rng(self.seed)
        self._queue = np.zeros((0, self.space.n_genes), dtype=np.int64)  # the generation's draws not handed out

    def _ask(self, n: int) -> np.ndarray:
        """The next ``n`` of the generation, drawn whole when it opens (the same draws however it is asked)."""
        if self.slot == 0:
            seeds = self.take_seeds(self.pool_size)
            rest = self.draw_unseen(self.rng, self.pool_size - len(seeds), exclude=set(self.space.keys(seeds)))
            self._queue = np.vstack([seeds, rest]) if len(seeds) else rest
        X, self._queue = self._queue[:n], self._queue[n:]
        return X

    def _tell(self, X: np.ndarray, F: np.ndarray, feasible: np.ndarray) -> None:
        return None
