"""Surrogate pre-screening: the screen keeps what its model predicts best (plus a random share), and a
search with it stays reproducible by seed and never asks a config twice."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("sklearn")

from compileiq_lab import Search, SearchConfiguration
from compileiq_lab.search.surrogate import SurrogateScreen
from compileiq_lab.testing import FlagProblem, toy_objective, toy_space


def test_the_screen_keeps_the_predicted_best_and_a_random_share():
    rng = np.random.default_rng(0)
    X = rng.integers(0, 20, (60, 3))
    screen = SurrogateScreen(1, seed=0, explore=0.25)
    assert not screen.ready and list(screen.select(X[:8], 4)) == [0, 1, 2, 3]
    screen.observe(X, X[:, :1].astype(float) + 0.1 * rng.standard_normal((60, 1)), np.ones(60, dtype=bool))
    cand = rng.integers(0, 20, (40, 3))
    keep = screen.select(cand, 8)
    assert len(set(keep)) == 8
    model_part = cand[keep[:6], 0]  # 6 of 8 by the model: the smallest x0 (the objective)
    assert model_part.max() <= np.sort(cand[:, 0])[10]


def test_failures_teach_the_screen_to_avoid_them():
    X = np.array([[i, j] for i in range(10) for j in range(10)])
    feasible = X[:, 1] < 5  # the upper half always fails
    screen = SurrogateScreen(2, seed=1, explore=0.0)
    screen.observe(X, np.column_stack([X[:, 0], 9 - X[:, 0]]).astype(float), feasible)
    keep = screen.select(X, 20)
    assert (X[keep, 1] < 5).mean() >= 0.9


def test_a_surrogate_search_is_reproducible_and_never_repeats_a_config():
    prob = FlagProblem(n_flags=12, n_levels=3, seed=0)
    runs = [Search(prob, prob.space(), SearchConfiguration(generations=8, seed=3, surrogate=True),
                   store=":memory:").start() for _ in range(2)]
    keys = [[r.config_key for r in res.records] for res in runs]
    assert keys[0] == keys[1] and len(keys[0]) == len(set(keys[0]))
    plain = Search(prob, prob.space(), SearchConfiguration(generations=8, seed=3), store=":memory:").start()
    assert [r.config_key for r in plain.records] != keys[0]  # the screen changed which offspring ran


def test_surrogate_is_part_of_the_stored_trajectory(tmp_path):
    from compileiq_lab.exceptions import StoreMismatchError

    path = str(tmp_path / "r.db")
    Search(toy_objective, toy_space(), SearchConfiguration(generations=2, surrogate=True), store=path).start()
    with pytest.raises(StoreMismatchError):
        Search(toy_objective, toy_space(), SearchConfiguration(generations=2), store=path)
