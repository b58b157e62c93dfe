"""Which pairs of control states fail to compile: counts per pair of controls, and each config's odds of compiling."""

from __future__ import annotations

import numpy as np

from compileiq_lab.search.states import bucketed

__all__ = ["FailurePairs"]


class FailurePairs:
    """Learns the control pairs a compiler rejects, from every evaluation (not windowed: a conflict stays a conflict).

    Each pair of controls gets a block of (states x states) counts of failed and of compiled configs, in one flat
    array; a control with many values has its states in ``PAIR_STATES`` buckets, and a space with more than
    ``MAX_PAIRS`` pairs of controls keeps a fixed random subset of them (bounded memory and time).

    Args:
        n_states: Per control, its number of states (see ``compileiq_lab.search.states.states_of``).
        rng: Draws the subset of pairs where there are more than ``MAX_PAIRS``.
    """

    #: Failures are counted for at most this many pairs of controls, with at most this many states per control.
    MAX_PAIRS = 4096
    PAIR_STATES = 16

    def __init__(self, n_states: np.ndarray, rng: np.random.Generator) -> None:
        self.k = np.asarray(n_states, dtype=np.int64)
        i, j = np.triu_indices(len(self.k), 1)
        if len(i) > self.MAX_PAIRS:
            keep = np.sort(rng.choice(len(i), self.MAX_PAIRS, replace=False))
            i, j = i[keep], j[keep]
        self._iu = (i, j)
        self._kp = np.minimum(self.k, self.PAIR_STATES)
        sizes = self._kp[i] * self._kp[j]
        self._offset = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
        self._pair_fail = np.zeros(int(sizes.sum()), dtype=np.int32)
        self._pair_ok = np.zeros(int(sizes.sum()), dtype=np.int32)
        self._n_fail = 0
        self._n_all = 0

    def _pair_index(self, S: np.ndarray) -> np.ndarray:
        """Per config and pair of controls, the slot of its two states in the flat pair counts."""
        i, j = self._iu
        B = bucketed(S, self.k, self._kp)  # (the identity where a control has few states)
        return np.asarray(self._offset[None, :] + B[:, i] * self._kp[j] + B[:, j])

    def observe(self, S: np.ndarray, ok: np.ndarray) -> None:
        """Add evaluated configs (their control states) and whether each compiled."""
        flat = self._pair_index(S)
        np.add.at(self._pair_ok, flat[ok].ravel(), 1)
        np.add.at(self._pair_fail, flat[~ok].ravel(), 1)
        self._n_fail += int((~ok).sum())
        self._n_all += len(ok)

    def p_compiles(self, S: np.ndarray) -> np.ndarray:
        """Estimated chance that each config compiles: the worst of its control pairs, each a failure rate
        shrunk towards the run's overall rate. Pairs never seen start as likely to fail as a whole config, which
        keeps the search near combinations known to compile: on the tune half's plain-space tables with failures
        (seeds 400-459, sum of mean calls 42.1) a per-pair prior (the rate a config's pairs would need to fail at
        as often as it does) did 45.6, failures blamed only on pairs never seen compiling 44.9, both 45.2, a
        product over the pairs instead of the worst 48.3, pseudo-counts 1 or 4 instead of 2 45.1 and 44.2, and
        unseen pairs starting from the higher of their two states' own failure rates 44.3 (a state that fails with
        most partners, as a fast-compile level does, is in the optimum of some tables)."""
        if self._n_fail == 0 or S.shape[1] < 2:
            return np.ones(len(S))
        rate = self._n_fail / max(1, self._n_all)
        flat = self._pair_index(S)
        fail = self._pair_fail[flat]
        ok = self._pair_ok[flat]
        m = 2.0
        p_fail = (fail + rate * m) / (fail + ok + m)
        return np.asarray(np.clip(1.0 - p_fail.max(axis=1), 1e-3, 1.0))
