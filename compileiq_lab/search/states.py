"""Control states of genomes: each control absent (knocked out) or at one of its values, and back to genomes."""

from __future__ import annotations

import numpy as np

from compileiq_lab.space.space import SearchSpace

__all__ = ["bucketed", "genomes_of", "n_states", "states_of"]


def states_of(space: SearchSpace, X: np.ndarray) -> np.ndarray:
    """Per parameter, the state of each genome: 0 for "absent" (knocked out), else 1 + value index
    (parameters that cannot be knocked out: the value index). Equal configs have equal states."""
    X = np.asarray(X, dtype=np.int64).reshape(-1, space.n_genes)
    S = np.zeros((len(X), len(space.params)), dtype=np.int64)
    for i in range(len(space.params)):
        vg, kg = int(space.value_gene[i]), int(space.knock_gene[i])
        v = X[:, vg] if vg >= 0 else np.zeros(len(X), dtype=np.int64)
        S[:, i] = np.where(X[:, kg] == 0, 0, v + 1) if kg >= 0 else v
    return S


def n_states(space: SearchSpace) -> np.ndarray:
    """Per control, its number of states (its values, and "absent" where it can be knocked out)."""
    return np.array([p.n_values + (1 if p.can_knockout else 0) for _, p in space.params], dtype=np.int64)


def genomes_of(space: SearchSpace, S: np.ndarray) -> np.ndarray:
    """Genomes of states (the inverse of ``states_of``; an absent parameter's value gene is 0)."""
    X = np.zeros((len(S), space.n_genes), dtype=np.int64)
    for i in range(len(space.params)):
        vg, kg = int(space.value_gene[i]), int(space.knock_gene[i])
        if kg >= 0:
            X[:, kg] = S[:, i] > 0
            if vg >= 0:
                X[:, vg] = np.maximum(S[:, i] - 1, 0)
        elif vg >= 0:
            X[:, vg] = S[:, i]
    return X


def bucketed(S: np.ndarray, n_states: np.ndarray, buckets: np.ndarray) -> np.ndarray:
    """Per config (rows of ``S``), each control's state mapped onto that control's ``buckets`` (at most its number
    of states; neighbouring states share a bucket), so that a model of a wide range stays bounded."""
    k = np.asarray(n_states, dtype=np.int64)
    return np.asarray((np.asarray(S, dtype=np.int64).reshape(-1, len(k)) * buckets) // k)
