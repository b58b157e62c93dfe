"""Strategy behaviour on static objectives: determinism, no repeats, convergence, knockout, exhaustion."""

from __future__ import annotations

import numpy as np
import pytest

import compileiq_lab.space as ss
from compileiq_lab import Search, SearchConfiguration
from compileiq_lab.exceptions import SearchStateError
from compileiq_lab.search import make_strategy
from compileiq_lab.space import SearchSpace
from compileiq_lab.testing import FlagProblem


def _run(objective, space, **cfg):
    return Search(objective, space, SearchConfiguration(**cfg), store=":memory:").start()


@pytest.mark.parametrize("strategy", ["ga", "random"])
def test_same_seed_same_candidates(toy, strategy):
    f, space = toy
    a = _run(f, space, generations=6, seed=7, strategy=strategy).get_results()
    b = _run(f, space, generations=6, seed=7, strategy=strategy).get_results()
    assert list(a["params"]) == list(b["params"])
    assert list(a["score_1"].fillna(-1)) == list(b["score_1"].fillna(-1))


def test_different_seed_different_candidates(toy):
    f, space = toy
    a = _run(f, space, generations=3, seed=1).get_results()
    b = _run(f, space, generations=3, seed=2).get_results()
    assert list(a["params"]) != list(b["params"])


def test_nsga2_same_seed_same_candidates():
    prob = FlagProblem(n_flags=8, n_levels=2, seed=3)

    def two(c):
        return prob(c), float(len(c))

    a = _run(two, prob.space(), generations=5, num_objectives=2, seed=4).get_results()
    b = _run(two, prob.space(), generations=5, num_objectives=2, seed=4).get_results()
    assert list(a["params"]) == list(b["params"])


@pytest.mark.parametrize("strategy", ["ga", "random", "nsga2"])
def test_never_evaluates_a_config_twice(strategy):
    prob = FlagProblem(n_flags=6, n_levels=1, seed=1)
    calls: list[str] = []

    def f(c):
        calls.append(repr(sorted(c.items())))
        return prob(c)

    res = _run(f, prob.space(), generations=12, pool_size=10, strategy=strategy)
    assert len(calls) == len(set(calls)) == len(res)


def test_ga_finds_toy_optimum_every_seed(toy):
    f, space = toy
    for seed in range(5):
        best = _run(f, space, generations=15, seed=seed).get_best_result()
        assert best["score_1"] == 2.0
        assert best["params"]["x"] == 1.0 and best["params"]["y"] == 1


def test_ga_beats_random_on_flag_problem():
    prob = FlagProblem(n_flags=12, n_levels=3, seed=0)
    ga = [_run(prob, prob.space(), generations=10, seed=s).get_best_result()["score_1"] for s in range(4)]
    rnd = [_run(prob, prob.space(), generations=10, seed=s, strategy="random").get_best_result()["score_1"]
           for s in range(4)]
    assert np.mean(ga) < np.mean(rnd)
    assert min(ga) <= prob.optimum() + 0.01


def test_max_direction_is_maximised(toy):
    _, space = toy
    best = _run(lambda c: c["x"] + c["y"], space, generations=10, problem_type="max").get_best_result()
    assert best["score_1"] == 23.0


def test_knockout_is_an_evolvable_gene():
    # the prior never knocks "penalty" out, yet the optimum needs it absent: only mutation of the
    # knockout gene can get there
    space = {"a": ss.range(0, 9), "penalty": ss.literal(5, knockout_prob=0.0)}

    def f(c):
        return c["a"] + c.get("penalty", 0)

    res = _run(f, space, generations=10, pool_size=4, baseline=False)
    first_gen = res.get_results().query("generation == 1")
    assert all("penalty" in p for p in first_gen["params"])
    best = res.get_best_result()
    assert best["score_1"] == 0 and "penalty" not in best["params"]


@pytest.mark.parametrize("strategy", ["ga", "random"])
@pytest.mark.parametrize("prob", [0.0, 1.0])
def test_a_knockout_prob_of_0_or_1_is_a_prior_not_a_fence(strategy, prob):
    """Every config is asked before the run calls the space exhausted, though the prior never draws half of them."""
    space = {"x": ss.range(1, 6), **{f"f{i}": ss.literal(f"-f{i}", knockout_prob=prob) for i in range(3)}}
    res = Search(lambda c: c["x"] + len(c), space,
                 SearchConfiguration(generations=200, pool_size=6, strategy=strategy), store=":memory:").start()
    assert res.status == "exhausted" and len(res.records) == 6 * 2 ** 3
    assert len({tuple(sorted(r.params)) for r in res.records}) == 2 ** 3


def test_small_space_is_exhausted_not_looped():
    space = {"a": ss.choice([1, 2, 3]), "b": ss.flag("-b")}
    res = _run(lambda c: c["a"], space, generations=50, pool_size=4)
    assert res.status == "exhausted"
    # every config of the space exactly once (no baseline row: "a" has no default)
    assert len(res) == SearchSpace(space).size and res.baseline is None


def test_space_without_genes_evaluates_its_single_config():
    res = _run(lambda c: len(c), {"k": ss.literal("v")}, generations=3, baseline=False)
    assert len(res) == 1 and res.get_best_result()["params"] == {"k": "v"}


def test_strategy_refuses_ask_before_tell():
    space = SearchSpace({"a": ss.range(0, 9)})
    s = make_strategy("ga", space, n_objectives=1, pool_size=4, seed=0, mutate_rate=0.5, crossover_rate=0.9)
    s.ask()
    with pytest.raises(SearchStateError, match="tell"):
        s.ask()


def test_initial_population_respects_seed_bounds():
    space = {"r": ss.range(0, 100, seed_low=10, seed_high=20), "c": ss.choice(["a", "b"])}
    res = _run(lambda c: c["r"], space, generations=1, pool_size=16, baseline=False)
    assert all(10 <= p["r"] <= 20 for p in res.get_results()["params"])


@pytest.mark.parametrize("strategy", ["ga", "random", "nsga2"])
def test_constraint_rejected_configs_are_never_evaluated(strategy):
    space = {"a": ss.range(0, 9), "b": ss.choice(["x", "y"])}
    seen = []

    def f(c):
        seen.append(c)
        return (float(c["a"]), 1.0) if strategy == "nsga2" else float(c["a"])

    res = Search(f, space, SearchConfiguration(generations=30, pool_size=4, strategy=strategy, baseline=False,
                 num_objectives=2 if strategy == "nsga2" else 1),
                 store=":memory:", constraint=lambda c: "odd with y" if c["b"] == "y" and c["a"] % 2 else None).start()
    assert res.status == "exhausted"
    assert len(seen) == 15 and not [c for c in seen if c["b"] == "y" and c["a"] % 2]


def test_constraint_is_asked_once_per_genome_however_often_a_candidate_is_rechecked():
    """The screened GA re-checks its candidates (offspring, neighbours of the best) at every pick; the constraint's
    verdict is kept per genome, and what it rejects is still never evaluated."""
    space = {f"f{i}": ss.choice([0, 1, 2, 3]) for i in range(6)}
    asked: list[tuple[int, ...]] = []

    def constraint(c):
        asked.append(tuple(c[f"f{i}"] for i in range(6)))
        return "f0 and f1 both 3" if c["f0"] == 3 and c["f1"] == 3 else None

    seen = []
    res = Search(lambda c: seen.append(c) or float(sum(c.values())), space,
                 SearchConfiguration(generations=40, pool_size=5, seed=3, baseline=False), store=":memory:",
                 constraint=constraint).start()
    assert len(res.records) == len(seen) == 200
    assert len(asked) > len(seen)  # candidates were screened, not only the evaluated ones
    assert len(asked) == len(set(asked))  # each config's verdict asked once
    assert not [c for c in seen if c["f0"] == 3 and c["f1"] == 3]


@pytest.mark.parametrize("strategy", ["ga", "random"])
def test_warm_start_configs_open_the_first_generation_once(strategy):
    from compileiq_lab import Search, SearchConfiguration
    from compileiq_lab.testing import toy_objective, toy_space

    seeds = [{"x": 2.0, "y": 2}, {"x": 2.0, "y": 2}, {"x": 3.5, "y": 1}, {"nope": 1}, {"x": 3.0}]
    cfg = SearchConfiguration(generations=3, pool_size=6, strategy=strategy, seed=4, warm_start=seeds)
    results = Search(toy_objective, toy_space(), cfg, store=":memory:").start()
    first = [r.params for r in results.records if r.generation == 1]
    assert first[:2] == [{"x": 2.0, "y": 2}, {"x": 3.5, "y": 1}]  # duplicates and non-points left out
    keys = [r.config_key for r in results.records]
    assert len(keys) == len(set(keys))
    cold = Search(toy_objective, toy_space(), SearchConfiguration(generations=3, pool_size=6, strategy=strategy,
                                                                   seed=4), store=":memory:").start()
    assert [r.params for r in cold.records if r.generation == 1][:2] != first[:2]


def test_warm_start_is_part_of_the_stored_trajectory(tmp_path):
    from compileiq_lab import Search, SearchConfiguration
    from compileiq_lab.exceptions import StoreMismatchError
    from compileiq_lab.testing import toy_objective, toy_space

    path = str(tmp_path / "r.db")
    cfg = SearchConfiguration(generations=1, pool_size=4, warm_start=[{"x": 2.0, "y": 2}])
    Search(toy_objective, toy_space(), cfg, store=path).start()
    reopened = Search.open(path, toy_objective, generations=2)
    assert reopened.config.warm_start == [{"x": 2.0, "y": 2}]
    with pytest.raises(StoreMismatchError):
        Search(toy_objective, toy_space(), SearchConfiguration(generations=1, pool_size=4), store=path)
