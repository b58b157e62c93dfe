"""The neighbours of the best configs so far (one objective): which of them to try, in what order, and when."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from compileiq_lab.search.neighbours import incumbents, moves, nearest
from compileiq_lab.search.twins import TwinModel

__all__ = ["HillPicks"]


class HillPicks:
    """The offspring screen's picks among the best configs' neighbours (``DensityScreen(hill=...)``).

    The neighbours of the best configs so far (every config one control away, and some two away) are tried in the
    order of what their evaluation could teach: the chance of a new outcome (not a twin), of compiling and of
    improving (each move's record of improving or worsening, learned with the twins; an untried move starts from the
    record of every move away from the value it leaves), nearer ones first (one control before two, an ordinal
    control's next value before a far one). A model pick that is likely a twin (chance above ``HILL_TWIN``) gives
    its place to the next such neighbour that is not. The model picks favour the states the best configs so far
    have; on a plateau of equal scores (the compiler's defaults, a flag it ignores) that is the plateau itself, and
    the one move off it that improves (often a pair of controls the model sees as bad one at a time) is found by
    trying the neighbours. A generation asked in parts (one pick at a time with one evaluation slot) is picked part
    by part, each part with the results of those before it, and then every ``PART_HILL_EVERY``-th pick goes to the
    neighbours of the best as it is at that pick.

    Args:
        n_states: Per control, its number of states (``compileiq_lab.search.states.n_states``).
        ordinal: Per control, whether its values are ordered (a range, log_sampling).
        first_value: Per control, its first state that is a value (1 where state 0 is "absent", else 0).
        twins: The screen's twin model: each neighbour's chance of a new outcome and each move's record.
        rng: Draws the neighbours where there are more than the bounds below.
    """

    #: Neighbours are taken around at most HILL_INCUMBENTS of the latest configs holding the best score: their
    #: one-control moves (a random HILL_SINGLES of them where there are more) and HILL_PAIRS random two-control moves
    #: (bounded cost per generation: 1.6 ms per candidate on a 12-control space of 32-value ranges, against 7.6 with
    #: 8 / 256 / 100, which did no better on the tables); a model pick whose twin chance is above HILL_TWIN is swapped
    #: for a neighbour. The latest holders, not the earliest: on a plateau of equal scores the neighbourhood moves on
    #: (the earliest did 76.3 / 66.7 against 66.9 / 60.1 on the tune half, seeds 400-459). Paired by seed over seeds
    #: 400-519 (bench/results/variants_hill.md, catalog / plain): 8 incumbents took 0.96 / 1.03 times the calls (90 %
    #: intervals 0.92-0.99 / 1.00-1.06), a HILL_PAIR_COST of 0.25 0.98 / 1.01 (0.97-0.99 / 1.00-1.02), a
    #: PART_HILL_EVERY of 3 1.12 / 1.07: each gain in the catalog space costs calls in the plain space. 2 or 1
    #: incumbents took 1.04 / 1.03 and 1.05 / 1.06 (seeds 400-439, bench/results/variants_ga_hill.md; noise).
    HILL_INCUMBENTS = 4
    HILL_SINGLES = 128
    HILL_PAIRS = 48
    #: HILL_TWIN was chosen on the tune half of bench/tables (one objective, seeds 400-459, sums of mean calls to the
    #: optimum, catalog / plain space: 66.9 / 60.1 at 0.7): 0.6 did 72.9 / 63.5, 0.65 66.8 / 61.9 (over seeds 400-519,
    #: paired by seed in bench/bench_variants.py: 0.99 / 1.05 times the calls, 90 % intervals 0.94-1.04 / 1.01-1.09),
    #: 0.8 and 0.9 worse still; lifting it on a stall (off after 10 or 20 calls without a gain, or rising to 0.95
    #: over 30) did 88.8-102.2 / 69.0-71.9: on a plateau of twins the threshold is what keeps the search off it.
    #: With the additive model (seeds 400-439, paired, bench/results/variants_twin_gamma.md) 0.8 took 1.08 / 1.10 times
    #: the calls (90 % intervals 1.01-1.15 / 1.04-1.15) and 0.6 1.07 / 1.03 (1.00-1.13 / 0.96-1.10).
    HILL_TWIN = 0.7
    #: Order of the neighbours: what a second moved control, and each ordinal step beyond the next value (up to 3),
    #: cost in log chance. Only a range's or log_sampling's values are ordered: a choice of numbers (a user's
    #: ``choice([24, 28, 32, "unset"])`` of register caps) ordered by size as well, its text values next to every
    #: number, took 1.07 / 1.05 times the calls on the tune half (one objective, seeds 400-459, paired by seed,
    #: catalog / plain; 90 % intervals 1.01-1.12 / 0.99-1.11), and with its untried moves starting from the prior as
    #: an ordered control's do (``TwinModel.log_better``) 1.03 / 1.00 (0.98-1.08 / 0.93-1.06). A bonus of 1.0 (0.5)
    #: in log chance for an ordered control's next value took 1.11 (1.07) times the calls in the catalog space (90 %
    #: intervals 1.02-1.21 / 0.99-1.14), and ranking the neighbours without the density ratio's tie-break
    #: (``order``'s 1e-3 share) 1.10 (1.01-1.19) / 1.01 (tune half, seeds 400-459, paired by seed).
    HILL_PAIR_COST = 0.5
    HILL_STEP_COST = 1.0
    #: A generation asked in parts (with one evaluation slot, one pick at a time, each made with every result before
    #: it) gives every PART_HILL_EVERY-th pick, the first included, to the best configs' neighbours and the rest to
    #: the model, none at random. Chosen on the tune half of bench/tables (one objective, seeds 400-459, sums of mean
    #: calls to the optimum, catalog / plain space): a generation picked whole 79.3 / 74.8; picked one at a time with
    #: the whole generation's roles (1 neighbour, 3 model picks, 1 random) 72.2 / 74.4; every 2nd pick a neighbour
    #: 62.8 / 61.5; 2 neighbours and 3 model picks 69.0 / 66.6; 2 neighbours, 2 model picks and a random one
    #: 67.5 / 70.2; 4 neighbours of 5 60.9 / 65.7; all neighbours 64.8 / 67.1. Each pick sees the result of the one
    #: before it, so a neighbour of the best found so far is seldom a wasted call. A bandit over the two roles instead
    #: (each pick's role drawn by Thompson sampling from each role's record of picks that improved the best, as
    #: OpenTuner credits its techniques) took 1.08 (90 % interval 1.00-1.17) / 0.98 (0.92-1.05) times the calls on
    #: the tune half (seeds 400-459, paired by seed, catalog / plain), and 1.30 / 1.09 with a pick that ties the best
    #: credited too: a run reaches the optimum in 10-30 calls, too few for a record of a handful of gains to steer.
    PART_HILL_EVERY = 2
    #: Each part's neighbours: fewer than a whole generation's (HILL_SINGLES, HILL_PAIRS), since they are drawn anew
    #: for every part and the twin search over them is most of a part's cost (with 48 / 16 the tune half above took
    #: 67.2 / 63.9 calls, at 3.4 ms per candidate on a 10-control space against 9.2 ms with 128 / 48). Measured again
    #: with the additive model (seeds 400-439, bench/results/variants_part_neighbours.md): 128 / 48 took 0.99 / 1.02
    #: times the calls and 256 / 64 1.01 / 1.02, noise: ranking every neighbour finds the optimum no sooner.
    PART_SINGLES = 48
    PART_PAIRS = 16

    def __init__(self, n_states: np.ndarray, ordinal: np.ndarray, first_value: np.ndarray, twins: TwinModel,
                 rng: np.random.Generator) -> None:
        self.k = np.asarray(n_states, dtype=np.int64)
        self.ordinal, self.first_value = ordinal, first_value
        self.twins, self.rng = twins, rng

    def incumbents(self, S: np.ndarray, F: np.ndarray, ok: np.ndarray) -> np.ndarray:
        """The latest configs holding the best score so far (at most ``HILL_INCUMBENTS``), as control states."""
        return incumbents(S, F, ok, self.HILL_INCUMBENTS)

    def moves(self, best: np.ndarray, part: bool = False) -> np.ndarray:
        """Neighbours of the configs ``best``: ``HILL_SINGLES`` of their one-control moves and ``HILL_PAIRS``
        two-control ones (for one ``part`` of a generation, ``PART_SINGLES`` and ``PART_PAIRS``)."""
        pairs, singles = (self.PART_PAIRS, self.PART_SINGLES) if part else (self.HILL_PAIRS, self.HILL_SINGLES)
        return moves(best, self.k, self.rng, pairs, singles)

    def order(self, S: np.ndarray, log_twin: np.ndarray, best: np.ndarray,
              compiles: Callable[[np.ndarray], np.ndarray], ratio: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
        """The candidates (rows of ``S``, with their log twin chances) one or two controls from a config of ``best``,
        most promising first, likely twins (chance above ``HILL_TWIN``) last; ``compiles`` gives configs' log odds
        of compiling (weighted) and ``ratio`` their density ratio, which breaks ties."""
        if not len(best):
            return np.zeros(0, dtype=int)
        distance, steps, row = nearest(S, best, self.ordinal, self.first_value)
        idx = np.flatnonzero((distance >= 1) & (distance <= 2))
        gain = (self.twins.log_novel(log_twin[idx]) + compiles(S[idx])
                + self.twins.log_better(S[idx], best[row[idx]]) + 1e-3 * ratio(S[idx])
                - self.HILL_PAIR_COST * (distance[idx] - 1) - self.HILL_STEP_COST * np.minimum(steps[idx], 3))
        order = idx[np.argsort(-gain, kind="stable")]
        _, first = np.unique(S[order], axis=0, return_index=True)  # one of each config (two incumbents' neighbour)
        order = order[np.sort(first)]
        twin = np.exp(log_twin[order]) > self.HILL_TWIN
        return np.concatenate([order[~twin], order[twin]])

    def swap_twins(self, chosen: list[int], order: np.ndarray, n_hill: int, log_twin: np.ndarray) -> list[int]:
        """``chosen`` (its first ``n_hill`` the neighbours ``order`` put first) with each later pick that is likely a
        twin replaced by the next neighbour in ``order`` that is not: a likely twin teaches less than an untried
        neighbour."""
        p_twin = np.exp(log_twin)
        out = list(chosen)
        spare = [j for j in order[n_hill:] if p_twin[j] < self.HILL_TWIN and j not in out]
        for at in range(n_hill, len(out)):
            if spare and p_twin[out[at]] > self.HILL_TWIN:
                out[at] = spare.pop(0)
        return out
