"""Surrogate pre-screening: rank more offspring with a random forest of the scores so far and keep the best."""

from __future__ import annotations

import logging

import numpy as np

from compileiq_lab.exceptions import OptionalDependencyError
from compileiq_lab.search.pareto import pareto_mask

__all__ = ["SurrogateScreen"]

log = logging.getLogger(__name__)


class SurrogateScreen:
    """Choose which of many proposed genomes to evaluate, from a model fitted on the evaluations so far.

    The model is a random forest (one multi-output forest) on the integer genomes; failed
    evaluations count as the worst score seen, so the screen learns to avoid them. Of the ``k``
    kept genomes, a share ``explore`` is drawn at random from the rest, so that a wrong model
    cannot lock the search into one corner.

    Args:
        n_objectives: Scores per genome (minimisation).
        seed: For the forest and the random share.
        factor: How many more offspring are proposed than evaluated.
        explore: Share of each generation kept at random.
        min_history: Evaluations needed before screening starts.
    """

    def __init__(self, n_objectives: int, seed: int, factor: int = 4, explore: float = 0.25,
                 min_history: int = 10) -> None:
        try:
            from sklearn.ensemble import RandomForestRegressor  # noqa: F401
        except ImportError:
            raise OptionalDependencyError("surrogate=True needs scikit-learn: pip install scikit-learn") from None
        self.n_objectives, self.factor, self.explore, self.min_history = n_objectives, factor, explore, min_history
        self.rng = np.random.default_rng(seed)
        self.seed = seed
        self.X: list[np.ndarray] = []
        self.F: list[np.ndarray] = []
        self.ok: list[np.ndarray] = []

    @property
    def ready(self) -> bool:
        """Enough successful evaluations to screen."""
        return sum(int(o.sum()) for o in self.ok) >= self.min_history

    def observe(self, X: np.ndarray, F: np.ndarray, feasible: np.ndarray) -> None:
        """Add evaluated genomes and their (minimisation) scores."""
        self.X.append(np.asarray(X, dtype=float))
        self.F.append(np.asarray(F, dtype=float).reshape(len(X), self.n_objectives))
        self.ok.append(np.asarray(feasible, dtype=bool))

    def select(self, candidates: np.ndarray, k: int) -> np.ndarray:
        """Indices of the ``k`` candidates to evaluate (all of them if there are at most ``k``)."""
        n = len(candidates)
        if n <= k or not self.ready:
            return np.arange(min(n, k))
        from sklearn.ensemble import RandomForestRegressor

        X, F, ok = np.vstack(self.X), np.vstack(self.F), np.concatenate(self.ok)
        worst = F[ok].max(axis=0) + (F[ok].max(axis=0) - F[ok].min(axis=0) + 1e-12)
        y = np.where(ok[:, None], F, worst)
        scale = y.std(axis=0)
        y = (y - y.mean(axis=0)) / np.where(scale > 0, scale, 1.0)
        model = RandomForestRegressor(n_estimators=60, min_samples_leaf=1, random_state=int(self.rng.integers(2**31)),
                                      n_jobs=1).fit(X, y if self.n_objectives > 1 else y[:, 0])
        pred = model.predict(np.asarray(candidates, dtype=float)).reshape(n, self.n_objectives)
        n_model = max(1, round(k * (1 - self.explore)))
        order = self._rank(pred)
        chosen = list(order[:n_model])
        rest = order[n_model:]
        chosen += list(self.rng.choice(rest, size=min(k - n_model, len(rest)), replace=False))
        return np.asarray(chosen, dtype=int)

    def _rank(self, pred: np.ndarray) -> np.ndarray:
        """Candidates best first: by predicted score (one objective) or by non-domination level (several)."""
        if self.n_objectives == 1:
            return np.argsort(pred[:, 0], kind="stable")
        level = np.full(len(pred), -1)
        left = np.arange(len(pred))
        depth = 0
        while len(left):
            mask = pareto_mask(pred[left])
            level[left[mask]] = depth
            left = left[~mask]
            depth += 1
        tie = self.rng.random(len(pred))
        return np.lexsort((tie, level))
