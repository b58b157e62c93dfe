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

    def _ask(self, n: int) -> np.ndarray:
        seeds = self.take_seeds(n)
        rest = self.draw_unseen(self.rng, n - len(seeds), exclude=set(self.space.keys(seeds)))
        return np.vstack([seeds, rest]) if len(seeds) else rest

    def _tell(self, X: np.ndarray, F: np.ndarray, feasible: np.ndarray) -> None:
        return None
