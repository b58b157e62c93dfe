"""Offspring screening by per-control densities of good and bad configs, with failures and twins learned."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from compileiq_lab.search.additive import AdditiveModel
from compileiq_lab.search.failures import FailurePairs
from compileiq_lab.search.goodsets import WeightedGood, good_weights
from compileiq_lab.search.hill import HillPicks
from compileiq_lab.search.states import genomes_of, n_states, states_of
from compileiq_lab.search.twins import TwinModel
from compileiq_lab.space.space import SearchSpace

__all__ = ["DensityScreen", "states_of"]


class DensityScreen:
    """Which of many proposed genomes to evaluate: an additive model (one objective) or a density ratio of good to bad
    configs per control (several), with the twins and failures learned.

    The evaluations so far are split into good ones (the best ``gamma`` share; for several objectives, the first
    non-domination levels) and the rest, failures among the rest. Each control's state (absent, or one of its
    values) gets a smoothed frequency among the good, ``l``, and among the rest, ``g``; a genome's score is the sum
    of ``log l - log g`` over its controls (the ratio a tree-structured Parzen estimator ranks by), so categorical
    compiler controls and plateaus of equal scores need no distance. With one objective the model picks rank instead
    by an additive model's chance of improving on the best (``additive``: each control state's effect on the score's
    rank, learned from every compiled config that has it), the density ratio breaking ties; the ratio still draws
    the screen's own proposals. Failures are also learned per pair of control
    states (``compileiq_lab.search.failures.FailurePairs``): a pair seen failing and never compiling lowers a
    genome's score by ``failure_weight`` times the log of its estimated odds of compiling, a learned constraint that
    never forbids outright. Twins are learned too (``compileiq_lab.search.twins.TwinModel``): a config likely to
    score exactly as one already evaluated, or to fail as one did (or as one already picked for this generation
    would), has its score lowered by ``twin_weight`` times the log of its chance of a new outcome, since its
    evaluation would teach nothing. A generation is picked one genome at a time, each pick counted as a bad result
    until its score is known, so that it is not made of one config's near copies; a share ``explore`` is drawn
    uniformly from the whole space.

    With several objectives and ``scalarise`` on, each model pick fits its own good set: the best ``gamma`` share of
    the feasible configs under a random weighting of the objectives (a Tchebycheff scalarisation of the objectives
    scaled to the run's range, weights drawn uniformly from the simplex, as ParEGO draws them). The first
    non-domination levels pull every pick towards the front's crowded part (a plateau of configs that compile to
    the same code); a weighting per pick spreads a generation's picks along the front, its ends included.

    It also proposes genomes of its own (``propose``): draws from the good frequencies and one-control neighbours
    of good configs, which join the offspring before the screen.

    With one objective, ``hill`` picks of each generation go to the neighbours of the best configs so far
    (``compileiq_lab.search.hill.HillPicks``: one or two controls away, in the order of what their evaluation could
    teach); on a plateau of equal scores the one move off it that improves is found by trying them. A generation
    asked in parts (one pick at a time with one evaluation slot) is picked part by part, each part with the results
    of those before it, and then every other pick goes to the neighbours of the best as it is at that pick.

    Args:
        space: The encoded space.
        n_objectives: Scores per genome (minimisation).
        seed: For the random share and the proposals.
        factor: How many more offspring are proposed than evaluated (8 instead of 4 was noise on the tune half of
            bench/tables, one objective, seeds 400-459, paired by seed, catalog / plain: 1.00 / 1.01 times the calls,
            90 % intervals 0.93-1.07 / 0.97-1.06).
        explore: Share of each generation drawn at random from the whole space (uniformly over every control's
            states, not from the offspring), so that a misleading model cannot lock the search in (default: 0.25
            with one objective, 0.15 with several, 7 of a generation of 8 picked by the model).
        gamma: Share of the feasible evaluations counted as good (0.2 took 1.06 / 1.04 times the calls on the tune
            half, seeds 400-439, catalog / plain, 90 % intervals 1.01-1.11 / 0.97-1.11:
            bench/results/variants_twin_gamma.md).
        min_history: Feasible evaluations needed before screening starts.
        window: Only the latest evaluations are modelled (bounded cost however long the run).
        proposals: How many genomes of its own it proposes per generation, in pool sizes.
        local: Share of those that are one-control neighbours of good configs (the rest: drawn from the densities).
        twin_weight: Weight of the twin penalty (0: twins are not learned). On the tune half (as for ``factor``)
            5 took 0.99 / 0.96 times the calls (0.94-1.04 / 0.92-1.01) and 2 took 1.05 / 1.06 (0.99-1.12 /
            0.99-1.12): noise, though a heavier penalty leans towards fewer calls in the plain space.
        failure_weight: Weight of the log odds of compiling.
        hill: Picks per generation reserved for the best configs' neighbours (default: 1 with one objective and
            twins learned, else 0: a front has no single best config; on the tune half of bench/tables, 120-240 seeds,
            1 cut the calls to the optimum by a fifth, 2 less). With it, a generation asked in parts (one pick at a
            time) gives every ``HillPicks.PART_HILL_EVERY``-th pick to them instead (see ``roles``).
        additive: Whether the model picks of one objective rank by an additive model's chance of improving on the best
            (``compileiq_lab.search.additive.AdditiveModel``) instead of the density ratio, which then only breaks
            ties (default: on with one objective). On the tune half of bench/tables (one objective, paired by seed,
            catalog / plain space, bench/results/variants_additive*.md) it took 0.87 (90 % interval 0.78-0.97) /
            0.96 (0.88-1.04) times the calls over seeds 400-439 and 0.95 (0.87-1.04) / 0.90 (0.82-1.00) over 440-479.
            A density ratio learns a control's state only once a good config holds it; the sum learns each state's
            effect from every compiled config that has it, whatever the other controls' states. Around it, four times
            the ``proposals``, 256 uniform draws instead of 16, ``min_history`` 2 and ``failure_weight`` 10 were noise
            or more calls on the same seeds (bench/results/variants_sample.md).
        scalarise: Whether each model pick of several objectives fits its good set under its own random weighting
            (default: on with several objectives; on the multi-objective tune half of bench/tables, 120 seeds, with
            ``explore`` 0.15 it cut the calls to the whole front from 777 to 678 summed over six cells).
    """

    #: Twins are sought among this many of the latest evaluations, failed ones included (what they taught stays).
    TWIN_WINDOW = 512
    #: The default uses neighbours on spaces of at most this many controls (where trying them is cheap: the real
    #: tables have 3-7); on the 15- and 28-control flag problems of bench/bench_defaults.py they raised the regret at
    #: every budget, while on 8 and 12 controls they traded a higher regret at 50 calls for the optimum by 200.
    HILL_MAX_CONTROLS = 12

    def __init__(self, space: SearchSpace, n_objectives: int, seed: int, factor: int = 4,
                 explore: float | None = None, gamma: float = 0.1, min_history: int = 4, window: int = 2000,
                 proposals: float = 4.0, local: float = 0.5, twin_weight: float = 3.0, failure_weight: float = 5.0,
                 hill: int | None = None, scalarise: bool | None = None, additive: bool | None = None) -> None:
        self.space, self.n_objectives = space, n_objectives
        self.factor, self.gamma = factor, gamma
        self.explore = (0.25 if n_objectives == 1 else 0.15) if explore is None else explore
        self.scalarise = n_objectives > 1 if scalarise is None else scalarise
        if not isinstance(self.scalarise, bool) or (self.scalarise and n_objectives == 1):
            raise ValueError(f"DensityScreen: scalarise must be True or False, and True only with several "
                             f"objectives, but got scalarise={scalarise!r} with {n_objectives} objective(s); leave it "
                             f"out (None) for the default")
        self.min_history, self.window, self.proposals, self.local = min_history, window, proposals, local
        additive = n_objectives == 1 if additive is None else additive
        if not isinstance(additive, bool) or (additive and n_objectives != 1):
            raise ValueError(f"DensityScreen: additive must be True or False, and True only with one objective, but "
                             f"got additive={additive!r} with {n_objectives} objective(s); leave it out (None) for "
                             f"the default")
        self.n_uniform = 16
        self._uniform: set[bytes] = set()
        self.rng = np.random.default_rng([seed, 0x5C2EE7])
        self.k = n_states(space)
        self.S = np.zeros((0, len(space.params)), dtype=np.int64)
        self.F = np.zeros((0, n_objectives))
        self.ok = np.zeros(0, dtype=bool)
        self.failures = FailurePairs(self.k, self.rng)  # (draws from rng here on a space of many controls)
        self.twin_weight, self.failure_weight = twin_weight, failure_weight
        small = len(space.params) <= self.HILL_MAX_CONTROLS
        self.hill = (1 if n_objectives == 1 and twin_weight and small else 0) if hill is None else hill
        if not isinstance(self.hill, int) or self.hill < 0 or (self.hill and (n_objectives != 1 or not twin_weight)):
            raise ValueError(f"DensityScreen: hill must be a count >= 0, and > 0 only with one objective and twins "
                             f"learned (twin_weight > 0), but got hill={hill!r} with {n_objectives} objectives and "
                             f"twin_weight={twin_weight!r}; pass hill=0 (or leave it out) there")
        params = [p for _, p in space.params]
        ordinal = np.array([p.encoding == "ordinal" for p in params], dtype=bool)
        first_value = np.array([1 if p.can_knockout else 0 for p in params], dtype=np.int64)
        self.twins = TwinModel(self.k, n_objectives, window=min(window, self.TWIN_WINDOW), ordinal=ordinal)
        self.hill_picks = HillPicks(self.k, ordinal, first_value, self.twins, self.rng)
        self._model: tuple[np.ndarray, list[np.ndarray], float, list[np.ndarray], float] | None = None
        self.additive = AdditiveModel(self.k) if additive else None
        self._additive_stale = True

    @property
    def ready(self) -> bool:
        """Enough feasible evaluations to screen."""
        return int(self.ok.sum()) >= self.min_history

    def observe(self, X: np.ndarray, F: np.ndarray, feasible: np.ndarray) -> None:
        """Add evaluated genomes and their (minimisation) scores."""
        S = states_of(self.space, X)
        ok = np.asarray(feasible, dtype=bool).reshape(len(S))
        self.S = np.vstack([self.S, S])[-self.window:]
        self.F = np.vstack([self.F, np.asarray(F, dtype=float).reshape(len(S), self.n_objectives)])[-self.window:]
        self.ok = np.concatenate([self.ok, ok])[-self.window:]
        self.failures.observe(S, ok)
        if self.twin_weight:
            self.twins.observe(S, F, ok)
        self._model = None  # the good set and the counts are refitted once, at the next use
        self._additive_stale = True

    def _log_improve(self, S: np.ndarray) -> np.ndarray:
        """The additive model's log chance that each config improves on the best (refitted once per batch of
        observations)."""
        assert self.additive is not None
        if self._additive_stale:
            self.additive.fit(self.S[self.ok], self.F[self.ok, 0])
            self._additive_stale = False
        return self.additive.log_improve(S)

    def _fit(self) -> tuple[np.ndarray, list[np.ndarray], float, list[np.ndarray], float]:
        """The good set's weights (``goodsets.good_weights``) and, per control, the (weighted) counts of each state
        among the good and among the rest with their totals; fitted once per batch of observations."""
        if self._model is None:
            w = good_weights(self.F, self.ok, self.gamma)
            self._model = (w, *self._counts(w))
        return self._model

    def _counts(self, w: np.ndarray) -> tuple[list[np.ndarray], float, list[np.ndarray], float]:
        """Per control, the counts of each state among the good (weighted by ``w``, the good set's weights) and
        among the rest, with their totals."""
        good = w > 0
        cl = [np.bincount(self.S[good, i], weights=w[good], minlength=k) for i, k in enumerate(self.k)]
        cg = [np.bincount(self.S[~good, i], minlength=k).astype(float) for i, k in enumerate(self.k)]
        return cl, float(w.sum()), cg, float((~good).sum())

    def _weighted_fit(self) -> Callable[[], tuple[list[np.ndarray], float, list[np.ndarray], float]]:
        """Several objectives: a draw of the good and bad counts per control (as ``_counts``) under a new random
        weighting of the objectives each call (``goodsets.WeightedGood``), drawn uniformly from the simplex."""
        weighted = WeightedGood(self.F, self.ok, self.gamma)
        return lambda: self._counts(weighted.weights(self.rng.dirichlet(np.ones(self.n_objectives))))

    @staticmethod
    def _log_density(counts: np.ndarray, total: float) -> np.ndarray:
        """Log frequency of each state, smoothed by one pseudo-count spread evenly over the states."""
        return np.asarray(np.log((counts + 1.0 / len(counts)) / (total + 1.0)))

    @classmethod
    def _ratio(cls, S: np.ndarray, cl: list[np.ndarray], nl: float, cg: list[np.ndarray], ng: float) -> np.ndarray:
        score = np.zeros(len(S))
        for i, (a, b) in enumerate(zip(cl, cg)):
            score += cls._log_density(a, nl)[S[:, i]] - cls._log_density(b, ng)[S[:, i]]
        return score

    def scores(self, X: np.ndarray) -> np.ndarray:
        """The screen's score of each genome (higher: more promising)."""
        S = states_of(self.space, X)
        _, cl, nl, cg, ng = self._fit()
        return np.asarray(self._ratio(S, cl, nl, cg, ng) + self._compiles(S) + self._novelty(S))

    def _compiles(self, S: np.ndarray) -> np.ndarray:
        """The failure penalty of each config: ``failure_weight`` times its log odds of compiling."""
        return np.asarray(self.failure_weight * np.log(self.failures.p_compiles(S)))

    def _novelty(self, S: np.ndarray, reference: np.ndarray | None = None) -> np.ndarray:
        """The twin penalty of each config (0 when twins are not learned)."""
        if not self.twin_weight:
            return np.zeros(len(S))
        return self.twin_weight * self.twins.log_novel(self.twins.log_twin(S, reference))

    def propose(self, n: int, neighbours: bool = True) -> np.ndarray:
        """``n`` genomes drawn control by control from the good frequencies, of which a share ``local`` are instead
        good configs with one control moved to another state (absent, the compiler's default, counts as a state of
        every control); then (with ``hill`` and ``neighbours``) the best configs' neighbours; then ``n_uniform`` more
        drawn uniformly over every control's states, from which ``select`` takes the generation's random share."""
        if n < 1 or not self.ready:
            return np.zeros((0, self.space.n_genes), dtype=np.int64)
        n_local = round(n * self.local)
        # uniform draws over every control's states, for the random share of each generation (see select)
        U = np.column_stack([self.rng.integers(0, k, size=self.n_uniform) for k in self.k])
        self._uniform = {s.tobytes() for s in U}
        w, cl, nl, _, _ = self._fit()
        S = np.zeros((n - n_local, len(self.k)), dtype=np.int64)
        for i, c in enumerate(cl):
            p = np.exp(self._log_density(c, nl))
            S[:, i] = self.rng.choice(len(p), size=len(S), p=p / p.sum())
        good = self.S[w > 0]
        movable = np.flatnonzero(self.k > 1)
        if n_local and len(good) and len(movable):
            L = good[self.rng.integers(0, len(good), size=n_local)].copy()
            j = self.rng.choice(movable, size=n_local)
            shift = 1 + (self.rng.random(n_local) * (self.k[j] - 1)).astype(np.int64)
            L[np.arange(n_local), j] = (L[np.arange(n_local), j] + shift) % self.k[j]
            S = np.vstack([S, L])
        if self.hill and neighbours:
            S = np.vstack([S, self.hill_picks.moves(self._incumbents())])
        return genomes_of(self.space, np.vstack([S, U]))

    def neighbours(self) -> np.ndarray:
        """For a pick of a generation asked in parts: the best configs' neighbours as they are now (PART_SINGLES of
        their one-control moves and PART_PAIRS two-control ones, see ``HillPicks``; none without ``hill``)."""
        if not self.hill or not self.ready:
            return np.zeros((0, self.space.n_genes), dtype=np.int64)
        return genomes_of(self.space, self.hill_picks.moves(self._incumbents(), part=True))

    def _incumbents(self) -> np.ndarray:
        return self.hill_picks.incumbents(self.S, self.F, self.ok)

    def roles(self, of: int, parts: bool = False) -> list[str]:
        """What each pick of a generation of ``of`` is for, in order: "hill" (a neighbour of the best), "model" (the
        density ratio's pick) or "random" (drawn from the whole space). Asked whole: ``hill`` neighbours, then the
        model's picks and the ``explore`` share at random. Asked in ``parts`` (each part picked with every result
        before it) with neighbours on: every other pick, the first included, is a neighbour of the best as it is at
        that pick, and none is random (see ``HillPicks.PART_HILL_EVERY``)."""
        if parts and self.hill:
            every = self.hill_picks.PART_HILL_EVERY
            return ["hill" if j % every == 0 else "model" for j in range(of)]
        hill = min(self.hill, of - 1) if self.hill and of >= 2 else 0
        n_model = max(1, round((of - hill) * (1 - self.explore)))
        return ["hill"] * hill + ["model"] * n_model + ["random"] * max(0, of - hill - n_model)

    def select(self, candidates: np.ndarray, k: int, first: int = 0, of: int | None = None,
               pending: np.ndarray | None = None) -> np.ndarray:
        """Indices of the ``k`` candidates to evaluate (all of them if there are at most ``k``): picks ``first`` to
        ``first + k - 1`` of a generation of ``of`` (default ``k``: a whole generation), each for its role
        (``roles``; a generation asked in parts has the roles of ``roles(of, parts=True)``). ``pending``: genomes
        picked before and still without a result (an asynchronous run's calls in flight), counted as this
        generation's picks (bad until scored, their twins teaching nothing)."""
        n = len(candidates)
        if n <= k or not self.ready:
            return np.arange(min(n, k))
        of = k if of is None else max(of, first + k)
        part = self.roles(of, parts=k < of)[first:first + k]
        n_hill, n_random = part.count("hill"), part.count("random")
        S = states_of(self.space, candidates)
        out = None if pending is None or not len(pending) else states_of(self.space, pending)
        if not n_hill:
            return self._select(S, np.arange(n), k, k - n_random, taken=out)
        log_twin = self.twins.log_twin(S)
        _, cl, nl, cg, ng = self._fit()
        order = self.hill_picks.order(S, log_twin, self._incumbents(), self._compiles,
                                      lambda R: self._ratio(R, cl, nl, cg, ng))
        hill = list(order[:n_hill])
        if len(hill) == k:
            return np.asarray(hill, dtype=int)
        rest = np.setdiff1d(np.arange(n), hill)
        taken = S[hill] if out is None else np.vstack([out, S[hill]])
        chosen = hill + list(self._select(S, rest, k - len(hill), k - len(hill) - n_random, log_twin, taken=taken))
        return np.asarray(self.hill_picks.swap_twins(chosen, order, len(hill), log_twin), dtype=int)

    def _select(self, S_all: np.ndarray, among: np.ndarray, k: int, n_model: int, log_twin: np.ndarray | None = None,
                taken: np.ndarray | None = None) -> np.ndarray:
        """The density ratio's ``n_model`` picks and ``k - n_model`` random ones of the candidates ``among`` (rows of
        ``S_all``, whose twin chances ``log_twin`` may be known already), as indices into ``S_all``; ``taken``: states
        already picked for this generation."""
        S = S_all[among]
        n = len(S)
        if n <= k:
            return among
        _, cl, nl, cg, ng = self._fit()
        weighted = self._weighted_fit() if self.scalarise else None
        liar = [np.zeros(k_) for k_ in self.k]  # this generation's picks, counted as bad
        n_liar = 0.0
        feasible = self._compiles(S)
        novel = self._novelty(S) if log_twin is None else self.twin_weight * self.twins.log_novel(log_twin[among])

        def lie(pick: np.ndarray) -> None:
            # a batch is picked one by one, each pick counted as a bad result until its score is known (a
            # "constant liar"): the next pick leaves the states just taken, so a generation is not one config's
            # copies; and a twin of a pick teaches nothing either
            nonlocal n_liar, novel
            for i, c in enumerate(liar):
                c[pick[i]] += 1.0
            n_liar += 1.0
            novel = np.minimum(novel, self._novelty(S, pick[None, :]))

        for t in [] if taken is None else taken:  # picks made already count as this generation's too
            lie(t)
        tie = 1e-9 * self.rng.random(n)
        improve = None if self.additive is None else self._log_improve(S)
        chosen: list[int] = []
        free = np.ones(n, dtype=bool)
        for _ in range(n_model):
            if weighted is not None:
                cl, nl, cg, ng = weighted()
            bad = [c + c_liar for c, c_liar in zip(cg, liar)]
            rank = self._ratio(S, cl, nl, bad, ng + n_liar)
            if improve is not None:  # the additive model ranks; the density ratio (with its liar) breaks ties
                rank = improve + 1e-3 * rank
            score = np.where(free, rank + feasible + novel + tie, -np.inf)
            j = int(np.argmax(score))
            chosen.append(j)
            free[j] = False
            lie(S[j])
        rest = np.flatnonzero(free)
        uniform = [j for j in rest if S[j].tobytes() in self._uniform]  # the random share: drawn from the whole
        pool = np.array(uniform if len(uniform) >= k - n_model else rest)  # space, not from the offspring
        chosen += list(self.rng.choice(pool, size=min(k - n_model, len(pool)), replace=False))
        return np.asarray(among[np.asarray(chosen, dtype=int)])
