"""The additive model: scores as ranks, each state's effect learned in one context and carried to every other, the
chance of improving highest where the best states meet; the density screen uses it with one objective only."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from compileiq_lab import space as ss
from compileiq_lab.search.additive import AdditiveModel, normal_scores
from compileiq_lab.search.screen import DensityScreen
from compileiq_lab.search.states import genomes_of, states_of
from compileiq_lab.space import SearchSpace

#: Per control, each state's effect on the score (minimised): state 2 of control 0 and state 3 of control 1 are best.
EFFECTS = [np.array([5.0, 3.0, 0.0]), np.array([4.0, 6.0, 5.0, 1.0]), np.array([0.0, 0.0])]
K = np.array([len(e) for e in EFFECTS])


def _score(S: np.ndarray) -> np.ndarray:
    return np.asarray(sum(e[S[:, i]] for i, e in enumerate(EFFECTS)))


def test_normal_scores_keep_the_order_share_ties_and_bound_an_outlier():
    z = normal_scores(np.array([3.0, 1.0, 2.0, 2.0, 1e9]))
    assert z[1] < z[2] == z[3] < z[0] < z[4]
    assert np.allclose(z, normal_scores(np.array([3.0, 1.0, 2.0, 2.0, 4.0])))  # a build ten times slower: one rank
    assert z.min() == pytest.approx(-z.max())  # standard normal quantiles of the ranks


def test_each_state_is_learned_in_one_context_and_the_best_states_meet_where_none_was_tried():
    # the best state of each control was only ever tried beside poor states of the others
    S = np.array([[2, 0, 0], [2, 1, 1], [0, 3, 0], [0, 3, 1], [0, 0, 1], [1, 2, 0], [0, 1, 0], [1, 0, 1]])
    m = AdditiveModel(K)
    assert not m.fitted
    m.fit(S, _score(S))
    everything = np.array(list(itertools.product(*(range(k) for k in K))))
    chance = m.log_improve(everything)
    untried = ~(everything[:, None, :] == S[None, :, :]).all(axis=2).any(axis=1)
    best = everything[np.argmax(chance)]
    assert best[0] == 2 and best[1] == 3, best  # never evaluated together, yet the likeliest to improve
    assert untried[np.argmax(chance)]
    # and a config of the worst states is far less likely to improve than it
    worst = np.array([[0, 1, 0]])
    assert m.log_improve(worst)[0] < chance.max() - 2.0


def test_an_unfitted_model_ranks_nothing_and_bad_variances_are_refused():
    m = AdditiveModel(K)
    m.fit(np.array([[0, 0, 0]]), np.array([1.0]))  # one compiled config: nothing to compare
    assert not m.fitted
    assert np.array_equal(m.log_improve(np.array([[1, 1, 1], [2, 3, 0]])), np.zeros(2))
    with pytest.raises(ValueError, match="noise=0"):
        AdditiveModel(K, noise=0)


def test_wide_controls_are_bucketed_so_a_fit_stays_small():
    m = AdditiveModel(np.array([224, 3]))
    assert m.d == AdditiveModel.MAX_STATES + 3
    S = np.array([[0, 0], [100, 1], [223, 2], [50, 0]])
    m.fit(S, np.array([4.0, 2.0, 1.0, 3.0]))
    assert np.isfinite(m.log_improve(S)).all()


def test_the_screen_uses_it_with_one_objective_only():
    space = SearchSpace({"a": ss.choice([0, 1, 2]), "b": ss.range(0, 4)})
    assert DensityScreen(space, 1, seed=0).additive is not None
    assert DensityScreen(space, 1, seed=0, additive=False).additive is None
    assert DensityScreen(space, 2, seed=0).additive is None
    with pytest.raises(ValueError, match="True only with one objective"):
        DensityScreen(space, 2, seed=0, additive=True)


def test_the_screens_model_pick_is_the_config_likeliest_to_improve():
    space = SearchSpace({"a": ss.choice([0, 1, 2]), "b": ss.choice([0, 1, 2, 3]), "c": ss.choice(["x", "y"])})
    screen = DensityScreen(space, 1, seed=0, hill=0, explore=0.0, twin_weight=0.0)
    S = np.array([[2, 0, 0], [2, 1, 1], [0, 3, 0], [0, 3, 1], [0, 0, 1], [1, 2, 0], [0, 1, 0], [1, 0, 1]])
    assert np.array_equal(states_of(space, genomes_of(space, S)), S)
    screen.observe(genomes_of(space, S), _score(S)[:, None], np.ones(len(S), dtype=bool))
    candidates = np.array([[a, b, 0] for a in range(3) for b in range(4)])
    pick = screen.select(genomes_of(space, candidates), 1)
    assert candidates[pick[0]].tolist() == [2, 3, 0]  # the best value of each, never tried together
    off = DensityScreen(space, 1, seed=0, hill=0, explore=0.0, twin_weight=0.0, additive=False)
    off.observe(genomes_of(space, S), _score(S)[:, None], np.ones(len(S), dtype=bool))
    # the density ratio alone ranks by the good set's states: the best config so far, [2, 0, 0], again
    assert candidates[off.select(genomes_of(space, candidates), 1)[0]].tolist() == [2, 0, 0]
