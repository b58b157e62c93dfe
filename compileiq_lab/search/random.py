"""Random search without replacement: the yardstick every other strategy must beat."""

from __future__ import annotations

import numpy as np

from compileiq_lab.search.base import Strategy

__all__ = ["RandomStrategy"]


class RandomStrategy(Strategy):
    """Draw each generation from the space's prior, never repeating a config."""

    name = "random"
    max_draw_rounds = 50

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.rng = np.random.default_rng(self.seed)

    def _ask(self) -> np.ndarray:
        rows: list[np.ndarray] = []
        keys: set[bytes] = set()
        for _ in range(self.max_draw_rounds):
            X = self.space.sample(self.rng, self.pool_size)
            for x, k in zip(X, self.space.keys(X)):
                if k not in self.seen and k not in keys:
                    keys.add(k)
                    rows.append(x)
                    if len(rows) == self.pool_size:
                        return np.array(rows)
        return np.array(rows, dtype=np.int64).reshape(-1, self.space.n_genes)

    def _tell(self, X: np.ndarray, F: np.ndarray, feasible: np.ndarray) -> None:
        return None
