"""Neighbours of the best configs found: their one- and two-control moves, and how far each candidate is from them."""

from __future__ import annotations

import numpy as np

__all__ = ["incumbents", "moves", "nearest"]


def incumbents(S: np.ndarray, F: np.ndarray, ok: np.ndarray, limit: int) -> np.ndarray:
    """The control states of the latest ``limit`` feasible configs that hold the best score so far (one objective,
    minimised); none before any config compiled."""
    idx = np.flatnonzero(ok)
    if not len(idx):
        return S[:0]
    f = F[idx, 0]
    return np.asarray(S[idx[f == f.min()]][-limit:])


def moves(incumbent: np.ndarray, n_states: np.ndarray, rng: np.random.Generator, n_pairs: int,
          max_single: int | None = None) -> np.ndarray:
    """Every config one control away from an incumbent (each control to each of its other states; "absent", the
    compiler's default, is a state of every control that can be left out), or a random ``max_single`` of them where
    there are more, then ``n_pairs`` random configs two controls away from a random incumbent."""
    k = np.asarray(n_states, dtype=np.int64)
    movable = np.flatnonzero(k > 1)
    out = []
    for s in incumbent:
        for c in movable:
            other = np.delete(np.arange(k[c]), s[c])
            block = np.repeat(s[None, :], len(other), axis=0)
            block[:, c] = other
            out.append(block)
    if max_single is not None and out and sum(len(b) for b in out) > max_single:
        single = np.vstack(out)
        out = [single[np.sort(rng.choice(len(single), max_single, replace=False))]]
    if n_pairs and len(incumbent) and len(movable) >= 2:
        P = incumbent[rng.integers(0, len(incumbent), size=n_pairs)].copy()
        rows = np.arange(n_pairs)
        for c in np.array([rng.choice(movable, size=2, replace=False) for _ in rows]).T:
            P[rows, c] = (P[rows, c] + 1 + (rng.random(n_pairs) * (k[c] - 1)).astype(np.int64)) % k[c]
        out.append(P)
    width = len(k)
    return np.vstack(out) if out else np.zeros((0, width), dtype=np.int64)


def nearest(S: np.ndarray, incumbent: np.ndarray, ordinal: np.ndarray,
            first_value: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per config of ``S``: the number of controls in which it differs from its nearest incumbent, how many value
    steps beyond one its ordinal moves take (a move to or from "absent" takes none), and that incumbent's row.

    The nearest incumbent is the one with the fewest differing controls, then the fewest extra steps.

    Args:
        ordinal: Per control, whether its values are ordered (a range, log_sampling).
        first_value: Per control, the first state that is a value (1 where state 0 is "absent", else 0).
    """
    D = S[:, None, :] != incumbent[None, :, :]
    distance = D.sum(axis=2)
    valued = (S[:, None, :] >= first_value) & (incumbent[None, :, :] >= first_value)
    gap = np.abs(S[:, None, :] - incumbent[None, :, :]) - 1
    extra = np.where(D & valued & ordinal[None, None, :], gap, 0).sum(axis=2)
    row = np.argmin(distance * (1 + int(extra.max(initial=0))) + extra, axis=1)
    at = np.arange(len(S))
    return distance[at, row], extra[at, row], row
