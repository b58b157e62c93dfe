"""Exact Pareto front (no weakly dominated point survives) and hypervolume, for minimisation."""

from __future__ import annotations

import numpy as np

__all__ = ["dominates", "hypervolume", "pareto_mask"]


def dominates(a: np.ndarray, b: np.ndarray) -> bool:
    """True if ``a`` is no worse than ``b`` everywhere and strictly better somewhere (minimisation)."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    return bool(np.all(a <= b) and np.any(a < b))


def pareto_mask(F: np.ndarray) -> np.ndarray:
    """Boolean mask of the non-dominated rows of ``F`` (minimise every column).

    A row dominated by another row (no worse in every objective, strictly better in one) is
    excluded, also when it ties on some objectives. Rows with identical vectors are all kept:
    neither dominates the other. Rows holding NaN are never on the front.

    Args:
        F: Scores, shape (n, k).

    Returns:
        Mask of shape (n,).
    """
    F = np.asarray(F, dtype=float)
    if F.ndim == 1:
        F = F[:, None]
    n = len(F)
    mask = np.zeros(n, dtype=bool)
    valid = ~np.isnan(F).any(axis=1)
    idx = np.flatnonzero(valid)
    if idx.size == 0:
        return mask
    # in lexicographic order a row can only be dominated by rows before it
    order = idx[np.lexsort(F[idx].T[::-1])]
    if F.shape[1] == 2:
        return _mask_2d(F, order, mask)
    front = np.empty((0, F.shape[1]))
    for i in order:
        p = F[i]
        if front.size and np.any(np.all(front <= p, axis=1) & np.any(front < p, axis=1)):
            continue
        mask[i] = True
        front = np.vstack([front, p])
    return mask


def _mask_2d(F: np.ndarray, order: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Two objectives in O(n log n): in lexicographic order a row is dominated exactly when an earlier
    row that is not identical to it has a second objective no larger (identical rows share a group)."""
    G = F[order]
    new_group = np.ones(len(G), dtype=bool)
    new_group[1:] = np.any(G[1:] != G[:-1], axis=1)
    group = np.cumsum(new_group) - 1
    second = G[new_group, 1]
    before = np.concatenate([[np.inf], np.minimum.accumulate(second)[:-1]])  # min over earlier groups
    mask[order] = ~(before <= second)[group]
    return mask


def hypervolume(F: np.ndarray, ref: np.ndarray) -> float:
    """Hypervolume dominated by the rows of ``F`` up to the reference point (minimisation).

    Args:
        F: Scores, shape (n, k); rows not strictly better than ``ref`` everywhere add nothing.
        ref: Reference point, shape (k,).

    Returns:
        The hypervolume (pymoo's exact algorithm).
    """
    from pymoo.indicators.hv import HV

    F = np.asarray(F, dtype=float)
    F = F[np.all(F < np.asarray(ref, dtype=float), axis=1)] if len(F) else F
    if len(F) == 0:
        return 0.0
    return float(HV(ref_point=np.asarray(ref, dtype=float))(F))
