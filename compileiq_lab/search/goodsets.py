"""Which evaluations the offspring screen counts as good: the best share of one objective, the first non-domination
levels of several, or the best share under a weighting of several."""

from __future__ import annotations

import math

import numpy as np

from compileiq_lab.search.pareto import pareto_mask

__all__ = ["WeightedGood", "good_weights"]


def good_weights(F: np.ndarray, ok: np.ndarray, gamma: float) -> np.ndarray:
    """Weight of each evaluation in the good set (0: not good). One objective: the best ``gamma`` share of the
    feasible configs (ties at the cut included), each weighing 1. Several: whole non-domination levels of the
    distinct score vectors up to a ``gamma`` share of them, each config weighing 1 / sqrt(the number of configs
    with its vector), so that a plateau of equal scores (many configs that compile to the same code, e.g. the
    compiler defaults' neighbours) does not drown the rest of the front.

    Args:
        F: Scores (minimised), one row per evaluation, one column per objective.
        ok: Per evaluation, whether it compiled (failures are never good).
        gamma: Share counted as good.
    """
    idx = np.flatnonzero(ok)
    weight = np.zeros(len(ok))
    if not len(idx):
        return weight
    F = F[idx]
    if F.shape[1] == 1:  # the best gamma share of the configs, ties at the cut included, each weighing 1
        cut = np.sort(F[:, 0])[max(1, math.ceil(gamma * len(idx))) - 1]
        weight[idx[F[:, 0] <= cut]] = 1.0
        return weight
    vectors, inverse, counts = np.unique(F, axis=0, return_inverse=True, return_counts=True)
    inverse = inverse.reshape(-1)
    n_good = max(1, math.ceil(gamma * len(vectors)))
    chosen = np.zeros(len(vectors), dtype=bool)
    left = np.arange(len(vectors))
    while left.size and chosen.sum() < n_good:
        mask = pareto_mask(vectors[left])
        chosen[left[mask]] = True
        left = left[~mask]
    good = chosen[inverse]
    weight[idx[good]] = 1.0 / np.sqrt(counts[inverse[good]])
    return weight


class WeightedGood:
    """Several objectives: the good set under a weighting of the objectives, the best ``gamma`` share of the
    feasible configs by the augmented Tchebycheff distance to the best values seen, each objective scaled to its
    range among them; a config weighs 1 / sqrt(the number of configs with its score vector), as in
    ``good_weights``. Scaling and plateau weights are computed once; each weighting costs one sort.

    Args: as for ``good_weights``.
    """

    def __init__(self, F: np.ndarray, ok: np.ndarray, gamma: float) -> None:
        self._idx = np.flatnonzero(ok)
        F = F[self._idx]
        lo, hi = F.min(axis=0), F.max(axis=0)
        self._scaled = (F - lo) / np.where(hi > lo, hi - lo, 1.0)
        _, inverse, counts = np.unique(F, axis=0, return_inverse=True, return_counts=True)
        self._plateau = 1.0 / np.sqrt(counts[inverse.reshape(-1)])
        self._n = len(ok)
        self._n_good = max(1, math.ceil(gamma * len(self._idx)))

    def weights(self, w: np.ndarray) -> np.ndarray:
        """Weight of each evaluation in the good set under the weighting ``w`` (one non-negative weight per
        objective; 0: not good)."""
        g = (w * self._scaled).max(axis=1) + 1e-3 * (w * self._scaled).sum(axis=1)  # augmented: no weak ties
        good = g <= np.sort(g)[self._n_good - 1]
        weight = np.zeros(self._n)
        weight[self._idx[good]] = self._plateau[good]
        return weight
