"""The density screen: good control states rank first, failing control pairs are learned, proposals stay in the
space, and a screened search stays reproducible by seed and never asks a config twice."""

from __future__ import annotations

import numpy as np

from compileiq_lab import Search, SearchConfiguration
from compileiq_lab import space as ss
from compileiq_lab.search.failures import FailurePairs
from compileiq_lab.search.screen import DensityScreen, states_of
from compileiq_lab.space import SearchSpace
from compileiq_lab.testing import FlagProblem


def _space() -> SearchSpace:
    return SearchSpace({"a": ss.choice([0, 1, 2, 3], knockout_prob=0.5), "b": ss.choice(["x", "y"], knockout_prob=0.5),
                        "c": ss.range(0, 9)})


def _all(space: SearchSpace) -> np.ndarray:
    rows = {}
    rng = np.random.default_rng(0)
    for x in space.sample(rng, 4000):
        rows.setdefault(space.keys(x[None, :])[0], x)
    return np.array(list(rows.values()))


def test_states_name_each_config_once_and_absent_controls_are_state_zero():
    space = _space()
    X = _all(space)
    S = states_of(space, X)
    assert len({tuple(s) for s in S}) == len(X) == space.size  # one state vector per config
    absent = np.array(["a" not in space.decode(x) for x in X])
    assert ((S[:, 0] == 0) == absent).all()
    assert set(S[:, 2]) == set(range(10))  # "c" cannot be knocked out: its states are its value indices


def test_the_screen_ranks_the_good_states_first():
    space = _space()
    X = _all(space)
    configs = [space.decode(x) for x in X]
    score = np.array([[abs(c["c"] - 7) + (0 if c.get("b") == "y" else 3)] for c in configs], dtype=float)
    screen = DensityScreen(space, 1, seed=0, explore=0.0)
    screen.observe(X, score, np.ones(len(X), dtype=bool))
    keep = screen.select(X, 10)
    kept = [configs[i] for i in keep]
    assert all(c.get("b") == "y" for c in kept)  # every good score has b = "y"
    assert all(abs(c["c"] - 7) <= 2 for c in kept)  # and c near 7


def test_a_failing_pair_of_controls_is_learned_without_forbidding_either_control():
    space = _space()
    X = _all(space)
    configs = [space.decode(x) for x in X]
    fails = np.array([c.get("a") == 3 and c.get("b") == "x" for c in configs])  # only the pair fails
    screen = DensityScreen(space, 1, seed=0)
    screen.observe(X, np.zeros((len(X), 1)), ~fails)
    p = screen.failures.p_compiles(states_of(space, X))
    assert p[fails].max() < 0.2  # ten failures and no success: odds of compiling cut to under a fifth
    assert p[~fails].min() > 0.4  # a=3 with b=y, and b=x with another a, still look fine


def test_proposals_are_points_of_the_space_drawn_from_the_good_states():
    space = _space()
    X = _all(space)
    configs = [space.decode(x) for x in X]
    score = np.array([[0.0 if c.get("a") == 2 else 1.0] for c in configs])
    screen = DensityScreen(space, 1, seed=4, local=0.0, hill=0)  # (the best configs' neighbours: test_neighbours)
    screen.observe(X, score, np.ones(len(X), dtype=bool))
    P = screen.propose(200)
    assert ((P >= space.xl) & (P <= space.xu)).all()
    assert np.mean([space.decode(x).get("a") == 2 for x in P]) > 0.8


def test_local_proposals_move_one_control_of_a_good_config_absent_included():
    space = _space()
    X = _all(space)
    configs = [space.decode(x) for x in X]
    good = [c for c in configs if c.get("a") == 2 and c.get("b") == "x" and c["c"] == 4]
    score = np.array([[0.0 if c in good else 1.0] for c in configs])
    screen = DensityScreen(space, 1, seed=4, local=1.0, gamma=0.001)  # the good set: the one best config
    screen.observe(X, score, np.ones(len(X), dtype=bool))
    P = [space.decode(x) for x in screen.propose(300)[:300]]  # (then the uniform draws of the random share)
    moved = [sum(c.get(n) != good[0].get(n) for n in ("a", "b", "c")) for c in P]
    assert set(moved) == {1}
    assert any("a" not in c for c in P) and any("b" not in c for c in P)  # "absent" is a neighbour too


def test_a_default_search_is_reproducible_and_never_repeats_a_config():
    prob = FlagProblem(n_flags=12, n_levels=3, seed=0)
    runs = [Search(prob, prob.space(), SearchConfiguration(generations=10, seed=5), store=":memory:").start()
            for _ in range(2)]
    a, b = (list(res.get_results()["params"].map(str)) for res in runs)
    assert a == b
    assert len(set(a)) == len(a)


def test_the_model_setting_is_checked_and_runs_stored_before_it_resume_unscreened():
    import pytest

    from compileiq_lab.exceptions import ConfigurationError
    from compileiq_lab.run.start import reopened_config

    with pytest.raises(ConfigurationError, match=r"model in \['density', 'none'\].*model='forest'"):
        SearchConfiguration(generations=1, model="forest")
    assert SearchConfiguration(generations=1).model == "density"
    old = SearchConfiguration(generations=3).to_dict()
    del old["model"]  # what a header written before the setting holds
    assert reopened_config(old, generations=5).model == "none"


def test_an_unscreened_search_differs_from_the_default_one():
    prob = FlagProblem(n_flags=12, n_levels=3, seed=0)
    configs = [SearchConfiguration(generations=6, seed=1, model=m) for m in ("density", "none")]
    asked = [list(Search(prob, prob.space(), c, store=":memory:").start().get_results()["params"].map(str))
             for c in configs]
    first = configs[0].resolve(SearchSpace(prob.space()).n_genes).pool_size  # the baseline is one of them
    assert asked[0][:first] == asked[1][:first]  # the baseline and the first generation come from the prior alike
    assert asked[0] != asked[1]


def test_failure_pairs_stay_bounded_on_a_space_of_many_wide_controls():
    space = SearchSpace({f"p{i}": ss.range(0, 199, knockout_prob=0.5) for i in range(120)})
    screen = DensityScreen(space, 1, seed=0)
    assert len(screen.failures._iu[0]) == FailurePairs.MAX_PAIRS  # of 7,140 pairs
    assert screen.failures._pair_fail.nbytes <= FailurePairs.MAX_PAIRS * FailurePairs.PAIR_STATES ** 2 * 4
    rng = np.random.default_rng(1)
    X = space.sample(rng, 64)
    screen.observe(X, rng.random((64, 1)), rng.random(64) < 0.7)
    keep = screen.select(np.vstack([X, space.sample(rng, 64)]), 16)
    assert len(set(keep)) == 16


def test_a_space_with_fixed_parameters_screens_and_proposes():
    space = SearchSpace({"fixed": ss.literal("-O3"), "a": ss.choice([1, 2, 3])})
    screen = DensityScreen(space, 1, seed=0)
    X = np.array([[0], [1], [2]] * 3)
    screen.observe(X, np.array([[3.0], [1.0], [2.0]] * 3), np.ones(9, dtype=bool))
    P = screen.propose(8)
    assert len(P) and ((P >= space.xl) & (P <= space.xu)).all()
    only_fixed = DensityScreen(SearchSpace({"fixed": ss.literal("-O3"), "b": ss.literal(1)}), 1, seed=0)
    assert only_fixed.propose(4).shape[1] == 0
