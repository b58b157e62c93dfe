"""Random search without replacement: the yardstick every other strategy must beat."""

from __future__ import annotations

import numpy as np

from compileiq_lab.search.base import Strategy

__all__ = ["RandomStrategy"]


class RandomStrategy(Strategy):
    """Draw each generation from the space's prior, never repeating a config."""

    name = "random"

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.rng = np.random.default_rng(self.seed)

    def _ask(self) -> np.ndarray:
        return self.draw_unseen(self.rng, self.pool_size)

    def _tell(self, X: np.ndarray, F: np.ndarray, feasible: np.ndarray) -> None:
        return None
