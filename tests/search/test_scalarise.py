"""A weighting of the objectives per pick (several objectives): each draw's good set is the best share under its
weighting, the draws cover both ends of a front whatever its crowded part, and on a real compiler table the search
finds the whole front in fewer calls than with the first non-domination levels for every pick."""

from __future__ import annotations

import copy
import math
from pathlib import Path

import numpy as np
import pytest

from compileiq_lab import Search, SearchConfiguration
from compileiq_lab import space as ss
from compileiq_lab.search.config import default_pool_size
from compileiq_lab.search.goodsets import WeightedGood, good_weights
from compileiq_lab.search.screen import DensityScreen, states_of
from compileiq_lab.space import SearchSpace
from compileiq_lab.testing.tables import Table, TableCompileError

TABLES = Path(__file__).resolve().parents[2] / "bench" / "tables"


def _front_screen(scalarise: bool | None = None) -> tuple[DensityScreen, SearchSpace]:
    # control "x" decides where on the front a config lands: x=0 is the crowded end (40 configs of one score vector,
    # A), x=2 the sparse end (B, held by 2, and 6 configs just behind it, dominated by B); x=1 and 3 are dominated
    space = SearchSpace({"x": ss.choice([0, 1, 2, 3]), "y": ss.choice(list(range(6)))})
    rows, scores = [], []
    rows += [{"x": 0, "y": i % 6} for i in range(40)]
    scores += [(1.0, 10.0)] * 40
    rows += [{"x": 2, "y": i % 6} for i in range(8)]
    scores += [(10.0, 1.0)] * 2 + [(11.0, 1.5)] * 6
    rows += [{"x": 1 + 2 * (i % 2), "y": i % 6} for i in range(10)]
    scores += [(11.0 + i % 3, 11.0 + i % 2) for i in range(10)]
    screen = DensityScreen(space, 2, seed=0, scalarise=scalarise)
    X = np.vstack([space.encode(r) for r in rows])
    screen.observe(X, np.array(scores), np.ones(len(rows), dtype=bool))
    return screen, space


def _x_state(space: SearchSpace, x: int) -> int:
    return int(states_of(space, space.encode({"x": x, "y": 0})[None, :])[0, 0])


def test_each_draw_is_the_best_share_under_its_own_weighting_so_the_draws_cover_both_ends_of_the_front():
    screen, space = _front_screen()
    assert screen.scalarise and screen.explore == 0.15  # the defaults with several objectives
    sparse, crowded = _x_state(space, 2), _x_state(space, 0)
    draw = screen._weighted_fit()
    ends = []
    for _ in range(200):
        w = copy.deepcopy(screen.rng).dirichlet(np.ones(2))  # the weighting this draw will use
        cl, nl, _, ng = draw()
        # objectives scaled to the run's range (1..13, 1..12): B' = (11, 1.5) ranks before A = (1, 10) when the
        # second objective weighs more, A before B when the first does by a little more (between the two, B and A
        # lead); the good set is ceil(0.1 * 58) = 6 configs, ties at the cut included
        if 0.47 < w[0] < 0.55:
            continue
        if w[1] > w[0]:  # B's 2 and all 6 of B': each weighs 1 / sqrt(the holders of its score vector)
            assert math.isclose(nl, math.sqrt(2) + math.sqrt(6)) and ng == 50
            assert math.isclose(cl[0][sparse], nl)
        else:  # A's 40 (a plateau: it weighs sqrt(40) in all)
            assert math.isclose(nl, math.sqrt(40)) and ng == 18
            assert math.isclose(cl[0][crowded], nl)
        ends.append(w[1] > w[0])
    assert 0.3 < np.mean(ends) < 0.7  # the weights are drawn uniformly: either end about half the time


def test_a_weighting_on_one_objective_makes_the_good_set_that_objective_s_best_share():
    F = np.array([[1.0, 9.0], [2.0, 8.0], [3.0, 1.0], [3.0, 1.0], [9.0, 0.5], [5.0, 5.0], [0.0, 0.0]])
    ok = np.array([True, True, True, True, True, True, False])  # the failed config's scores are never good
    good = WeightedGood(F, ok, gamma=0.3)  # ceil(0.3 * 6) = 2 configs, ties at the cut included
    first, second = good.weights(np.array([1.0, 0.0])), good.weights(np.array([0.0, 1.0]))
    np.testing.assert_allclose(first, [1, 1, 0, 0, 0, 0, 0])
    np.testing.assert_allclose(second, [0, 0, 0, 0, 1, 0, 0] + np.array([0, 0, 1, 1, 0, 0, 0]) / np.sqrt(2))
    # the unweighted good set is the first non-domination level: every vector but the dominated (5, 5)
    np.testing.assert_allclose(good_weights(F, ok, gamma=0.3), [1, 1, 2 ** -0.5, 2 ** -0.5, 1, 0, 0])


def test_without_the_weighting_every_pick_leans_to_the_crowded_end():
    screen, space = _front_screen(scalarise=False)
    _, cl, _, _, _ = screen._fit()
    # the first non-domination level, {A, B}: A's plateau weighs sqrt(40), B sqrt(2), B' (behind B) nothing
    assert math.isclose(cl[0][_x_state(space, 0)], math.sqrt(40))
    assert math.isclose(cl[0][_x_state(space, 2)], math.sqrt(2))


def test_one_objective_keeps_one_good_set_and_a_quarter_drawn_and_the_setting_is_checked():
    space = SearchSpace({"x": ss.choice([0, 1, 2])})
    one = DensityScreen(space, 1, seed=0)
    assert not one.scalarise and one.explore == 0.25
    with pytest.raises(ValueError, match=r"True only with several objectives, but got scalarise=True with 1"):
        DensityScreen(space, 1, seed=0, scalarise=True)  # one objective has one ranking: nothing to weigh
    with pytest.raises(ValueError, match=r"scalarise='yes'"):
        DensityScreen(space, 2, seed=0, scalarise="yes")  # type: ignore[arg-type]


def _calls_to_front(table: Table, seed: int, budget: int = 200) -> int:
    """Calls of a default search over the table's catalog space until every vector of its true front was seen
    (budget + 1: not reached)."""
    obj = table.objective()
    front = {tuple(v) for v in table.best()["front"]}
    seen: list[tuple[float, ...] | None] = []

    def f(config: dict) -> list[float]:
        try:
            v = tuple(float(x) for x in obj(config))
        except TableCompileError:
            seen.append(None)
            raise
        seen.append(v)
        return list(v)

    space = table.catalog_space()
    n_obj = len(table.objectives)
    pool = default_pool_size(SearchSpace(space).n_genes, n_obj)
    cfg = SearchConfiguration(generations=budget // pool + 1, seed=seed, num_objectives=n_obj)
    Search(f, space, cfg, store=":memory:", constraint=table.constraint).start()
    found: set[tuple[float, ...]] = set()
    for i, v in enumerate(seen[:budget]):
        if v in front:
            found.add(v)
            if found == front:
                return i + 1
    return budget + 1


def test_on_a_real_compiler_table_the_weighting_finds_the_whole_front_in_fewer_calls(monkeypatch):
    # gcc controls on the bundled stencil kernel (bench/tables, tune half): a 12-vector front of instruction count
    # against code size, six of its vectors held by 6-9 of 1,440 configs
    table = Table.load(TABLES / "stencil_c_gcc")
    init = DensityScreen.__init__
    setting = {"scalarise": True}

    def with_setting(self, *args, **kwargs):  # the engine builds the screen with its defaults: set it for the run
        init(self, *args, **{**kwargs, **setting})

    monkeypatch.setattr(DensityScreen, "__init__", with_setting)
    seeds = range(12)
    on = [_calls_to_front(table, s) for s in seeds]
    setting["scalarise"] = False
    off = [_calls_to_front(table, s) for s in seeds]
    assert sum(on) < 0.9 * sum(off), (on, off)
