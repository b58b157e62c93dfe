"""Which untried configs would score exactly as (or fail like) one already evaluated: control moves learned as
neutral or not."""

from __future__ import annotations

import numpy as np

from compileiq_lab.search.states import bucketed
from compileiq_lab.search.window import RowWindow

__all__ = ["TwinModel"]


class TwinModel:
    """Learns which moves of a control leave a config's scores unchanged, and so which configs are twins.

    Compilers ignore many controls in many contexts (a flag that only matters at ``-O3``, ``--maxrregcount``
    above what the kernel uses, "unset" and the value that is the default), so many configs compile to the same
    code and score exactly alike. Evaluating a config whose scores are already known teaches nothing: on the
    project's exhaustive compiler tables 40-90 % of a search's calls before it found the optimum returned a score
    vector it had already seen.

    A failed compile is an outcome like a score vector (two failures count as alike), so the same evidence teaches
    which moves keep a config failing or compiling, and a config likely to fail as an evaluated one did is a twin
    of it: one mechanism learns both the controls the compiler ignores and the combinations it rejects.

    Every pair of evaluated configs that differ in at most ``max_distance`` controls is evidence on the
    moves between their states: equal outcomes count each of its moves as neutral, unequal ones (for a single
    differing control) count the move as effective. A move's chance of being neutral is its smoothed
    share of neutral evidence, shrunk towards ``unseen`` times its control's share, which is shrunk towards the
    run's overall share (and that towards ``prior``). The control's share is an optimistic guess for a move not
    yet seen: the moves seen most are the ones a search makes near its good configs, where the compiler ignores
    most controls, so a move the run has not tried yet starts less likely neutral than they were. A candidate's
    chance of being the twin of an evaluated config is the product of those chances over the controls where they
    differ; its twin chance is the highest over the evaluated configs.

    Scores that are never exactly equal (timings with noise) teach only "effective" and leave every twin chance
    small, so the model then changes nothing.

    A move's chance is the same whatever the other controls' states, though a compiler often ignores a control in
    one context only (a register cap below what the kernel uses, say). Conditioning it on each other control's
    state, taking the lowest of those chances or their geometric mean, did not win on the tune half of
    bench/tables (one objective, seeds 400-459, sums of mean calls, catalog / plain: 67.0 / 60.9 and 65.3 / 63.8
    against 66.9 / 60.1; plain space of the held-out half 116.1 and 122.1 against 112.5), at several times the cost;
    starting each conditioned chance from 0.85 of the move's own did 126.6 / 84.0, and from the move's own scaled by
    how neutral its control's moves were in that context 67.8 / 64.1. Nor did weighing each piece of evidence on a
    move, for the chance of being a twin of a best config, by how like that config's its context is (a half or a
    quarter per other control that differs: 65.9 / 65.5 and 72.4 / 63.8). Paired by seed, every one of these took
    more calls in the plain space (90 % intervals of the ratio from 1.00-1.03 to 1.28-1.53). The scaled start did find
    the way off a plateau whose exit is a move seen neutral elsewhere (in a held-out run: 48 calls instead of 107),
    but they all lose more than that elsewhere: pooled over contexts, the chances keep more calls off twins.

    Args:
        n_states: Per control, its number of states (see ``compileiq_lab.search.states.states_of``).
        n_objectives: Scores per config.
        window: Only the latest evaluations are compared (bounded cost however long the run).
        max_distance: Pairs differing in more controls than this are not evidence.
        prior: Chance that a move is neutral before anything is known.
        strength: Pseudo-counts of each shrinkage step.
        unseen: Share of its control's neutral rate a move starts from, before any evidence on it (chosen on the
            tune half of bench/tables: 0.75; 1 trusts the control's rate, 0.5 and 0.85 did worse).
        ordinal: Per control, whether its states are ordered (a range): its moves away from a state go two ways, so
            ``log_better`` does not pool them (default: none is).
    """

    #: States of a control beyond this are bucketed (bounded memory for wide ranges).
    MAX_STATES = 64

    #: log_better: a move's chance of improving before anything is known; the pseudo-counts with which a move's record
    #: starts from its first state's record (every effective move away from that state of an unordered control), and
    #: with which that record starts from BETTER_PRIOR. On the tune half of bench/tables (one objective, paired by seed,
    #: catalog / plain, bench/results/variants_strength*.md) a MOVE_STRENGTH of 0.5 took 0.98 (90 % interval
    #: 0.96-0.99) / 0.99 (0.97-1.00) times the calls over seeds 400-459, but 0.97 (0.95-0.99) / 1.04 (1.01-1.09) over
    #: 460-519 (0.25 there: 0.96 / 1.04); 2 took 1.01 / 0.98 and a FROM_STRENGTH of 4 1.00 / 1.00 (seeds 400-459):
    #: the catalog space's gain costs calls in the plain space, so 1 and 2 stay. A BETTER_PRIOR of 0.3 or 0.7 took
    #: 1.02 / 1.02 and 1.00 / 1.02 (seeds 400-439, bench/results/variants_priors.md; noise), so 0.5 stays.
    BETTER_PRIOR = 0.5
    MOVE_STRENGTH = 1.0
    FROM_STRENGTH = 2.0

    def __init__(self, n_states: np.ndarray, n_objectives: int, window: int = 2000, max_distance: int = 2,
                 prior: float = 0.5, strength: float = 2.0, unseen: float = 0.75,
                 ordinal: np.ndarray | None = None) -> None:
        self.k = np.asarray(n_states, dtype=np.int64)
        self.ordinal = np.zeros(len(self.k), dtype=bool) if ordinal is None else np.asarray(ordinal, dtype=bool)
        if self.ordinal.shape != self.k.shape:
            raise ValueError(f"TwinModel: ordinal has one flag per control ({len(self.k)}), but got shape "
                             f"{self.ordinal.shape}; pass one bool per control, or leave it out")
        self.kb = np.minimum(self.k, self.MAX_STATES)
        self.window, self.max_distance, self.prior, self.strength = window, max_distance, prior, strength
        self.unseen = unseen
        self._neutral = [np.zeros((b, b)) for b in self.kb]
        self._effective = [np.zeros((b, b)) for b in self.kb]
        # with one objective: [c][a, b] counts the effective moves of control c from state a to b that improved it
        self._better = [np.zeros((b, b)) for b in self.kb]
        # the evaluated configs (bucketed states), scores and outcomes: the latest ``window`` of them, in a ring
        self._S = RowWindow(window, (len(self.k),), np.int64)
        self._F = RowWindow(window, (n_objectives,), float)
        self._ok = RowWindow(window, (), bool)
        self._log_p: list[np.ndarray] | None = None

    @property
    def S(self) -> np.ndarray:
        """The (bucketed) control states of the evaluated configs held: the latest ``window``, in no set order."""
        return self._S.rows

    def observe(self, S: np.ndarray, F: np.ndarray, feasible: np.ndarray) -> None:
        """Add evaluated configs (their control states), their scores and whether they compiled (a failure is an
        outcome like a score: two failed configs count as alike)."""
        B = bucketed(S, self.k, self.kb)
        ok = np.asarray(feasible, dtype=bool).reshape(len(B))
        F = np.where(ok[:, None], np.asarray(F, dtype=float).reshape(len(B), self._F.rows.shape[1]), 0.0)
        for s, f, o in zip(B, F, ok):
            S_, F_, ok_ = self._S.rows, self._F.rows, self._ok.rows
            D = S_ != s
            distance = D.sum(axis=1)
            near = (distance >= 1) & (distance <= self.max_distance)
            same = (ok_ == o) & (~o | (F_ == f).all(axis=1))
            effective = near & ~same & (distance == 1)
            for kind, rows in ((self._neutral, near & same), (self._effective, effective)):
                r, i = np.nonzero(D & rows[:, None])
                for c in np.unique(i):
                    b = S_[r[i == c], c]
                    np.add.at(kind[c], (np.full(len(b), s[c]), b), 1.0)
                    np.add.at(kind[c], (b, np.full(len(b), s[c])), 1.0)
            if F_.shape[1] == 1:  # which way each effective move went: a failure is worse than any score
                r, i = np.nonzero(D & effective[:, None])
                new_better = o & (~ok_[r] | (f[0] < F_[r, 0]))
                b = S_[r, i]
                for c, old, up in zip(i, b, new_better):
                    self._better[c][(old, s[c]) if up else (s[c], old)] += 1.0
            self._S.extend(s[None, :])
            self._F.extend(f[None, :])
            self._ok.extend(np.array([o]))
        self._log_p = None

    def _fit(self) -> list[np.ndarray]:
        """Per control, the log chance that a move between two of its states is neutral (0 on the diagonal)."""
        if self._log_p is None:
            m = self.strength
            neutral = sum(float(n.sum()) for n in self._neutral)
            total = neutral + sum(float(e.sum()) for e in self._effective)
            overall = (neutral + self.prior * m) / (total + m)
            self._log_p = []
            for n, e in zip(self._neutral, self._effective):
                control = (n.sum() + overall * m) / (n.sum() + e.sum() + m)
                p = (n + self.unseen * control * m) / (n + e + m)
                np.fill_diagonal(p, 1.0)
                self._log_p.append(np.log(np.clip(p, 1e-6, 1.0)))
        return self._log_p

    def log_twin(self, S: np.ndarray, reference: np.ndarray | None = None) -> np.ndarray:
        """Per config of ``S``, the log of its highest chance of the same outcome as a config of ``reference``
        (default: the evaluated ones, failed ones included); -inf where there is none."""
        B = bucketed(S, self.k, self.kb)
        R = self.S if reference is None else bucketed(reference, self.k, self.kb)
        if not len(R) or not len(B):
            return np.full(len(B), -np.inf)
        L = np.zeros((len(B), len(R)))
        for i, log_p in enumerate(self._fit()):
            L += log_p[B[:, i][:, None], R[:, i][None, :]]
        return np.asarray(L.max(axis=1))

    def log_better(self, S: np.ndarray, reference: np.ndarray) -> np.ndarray:
        """Per config of ``S``, the log chance that the moves from its row of ``reference`` to it improve the score
        (one objective): the product over the moved controls of each move's smoothed share of effective evidence
        that improved.

        A move not tried yet starts from its first state's record: the share of every effective move away from
        that state that improved (itself starting from ``BETTER_PRIOR``). A value from which every move so far
        worsened (the kernel's best register cap, say) is likely a good one, and an untried move away from it
        likely worse. An ordered control's moves away from a state go two ways (up can improve where down
        worsens), so its untried moves start from ``BETTER_PRIOR``. Chosen on the tune half of bench/tables (one
        objective, seeds 400-519, sums of mean calls to the optimum, catalog / plain space): each move on its own
        66.7 / 71.9, from its first state's record 67.5 / 64.6, ordered controls pooled too 69.0 / 64.6; on the
        held-out half (seeds 400-459) 98.7 / 116.3 before, 95.5 / 112.5 after. A move to a value no evaluated config
        has yet starting from BETTER_PRIOR instead (the record says how the tried values compare, not the untried
        one) was noise on the tune half (seeds 400-459, paired by seed): 0.99 / 1.02 times the calls (90 % intervals
        0.96-1.02 / 0.99-1.04).
        """
        B = bucketed(S, self.k, self.kb)
        R = bucketed(reference, self.k, self.kb).reshape(B.shape)
        out = np.zeros(len(B))
        for c, (better, effective) in enumerate(zip(self._better, self._effective)):
            a, b = R[:, c], B[:, c]
            start = np.full(len(better), self.BETTER_PRIOR)
            if not self.ordinal[c]:
                away, improved = effective.sum(axis=1), better.sum(axis=1)
                start = (improved + self.BETTER_PRIOR * self.FROM_STRENGTH) / (away + self.FROM_STRENGTH)
            p = (better[a, b] + start[a] * self.MOVE_STRENGTH) / (effective[a, b] + self.MOVE_STRENGTH)
            out += np.where(a != b, np.log(p), 0.0)
        return out

    @staticmethod
    def log_novel(log_twin: np.ndarray) -> np.ndarray:
        """Log chance of not being a twin, from ``log_twin``."""
        return np.asarray(np.log1p(-np.minimum(np.exp(log_twin), 1.0 - 1e-6)))
