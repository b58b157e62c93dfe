"""The front a multi-objective run reports equals the brute-force front of the whole finite space."""

from __future__ import annotations

import itertools

import numpy as np

import compileiq_lab.space as ss
from compileiq_lab import Search, SearchConfiguration
from compileiq_lab.search.pareto import dominates
from compileiq_lab.space import SearchSpace

SPACE = {"a": ss.range(0, 5), "b": ss.choice(["p", "q", "r"]), "c": ss.flag("-c")}


def two_objectives(config):
    # coarse integer objectives: many exact ties and many points tied on one objective only
    a, b, c = config["a"], config["b"], "c" in config
    runtime = (a - 3) ** 2 // 2 + (1 if b == "q" else 0) + (0 if c else 1)
    compile_time = a // 2 + (2 if b == "r" else 0) + (1 if c else 0)
    return float(runtime), float(compile_time)


def _all_configs():
    space = SearchSpace(SPACE)
    genes = [range(lo, hi + 1) for lo, hi in zip(space.xl, space.xu)]
    return [space.decode(np.array(x)) for x in itertools.product(*genes)]


def test_reported_front_is_exact_on_an_exhausted_space():
    configs = _all_configs()
    scores = [two_objectives(c) for c in configs]
    truth = {repr(sorted(c.items())) for c, s in zip(configs, scores)
             if not any(dominates(o, s) for o in scores)}
    res = Search(two_objectives, SPACE, SearchConfiguration(generations=100, num_objectives=2, pool_size=8,
                 baseline=False), store=":memory:").start()
    assert res.status == "exhausted" and len(res) == len(configs) == SearchSpace(SPACE).size
    front = res.pareto_front()
    assert {repr(sorted(r["params"].items())) for r in front} == truth
    assert res.get_best_result() == front
    # ties: identical score vectors are all kept, weakly dominated ones are not
    vectors = [(r["score_1"], r["score_2"]) for r in front]
    assert len(set(vectors)) < len(vectors)
    for r in res.get_results().itertuples():
        if repr(sorted(r.params.items())) not in truth:
            assert any(dominates(v, (r.score_1, r.score_2)) for v in vectors)


def test_mixed_directions_front_matches_brute_force():
    configs = _all_configs()

    def f(c):
        runtime, compile_time = two_objectives(c)
        return runtime, -compile_time  # maximise the negated second objective: same front

    res = Search(f, SPACE, SearchConfiguration(generations=100, num_objectives=2, pool_size=8,
                 problem_type=["min", "max"], baseline=False), store=":memory:").start()
    scores = [two_objectives(c) for c in configs]
    truth = {repr(sorted(c.items())) for c, s in zip(configs, scores)
             if not any(dominates(o, s) for o in scores)}
    assert {repr(sorted(r["params"].items())) for r in res.pareto_front()} == truth


def test_nsga2_front_improves_with_generations():
    from compileiq_lab.testing import FlagProblem

    prob = FlagProblem(n_flags=10, n_levels=2, seed=4)

    def f(c):
        return prob(c), float(sum(1 for k in c if k.startswith("f")))  # runtime vs number of flags

    def hv(gens):
        from compileiq_lab.search.pareto import hypervolume

        res = Search(f, prob.space(), SearchConfiguration(generations=gens, num_objectives=2, seed=1),
                     store=":memory:").start()
        F = np.array([[r["score_1"], r["score_2"]] for r in res.pareto_front()])
        return hypervolume(F, np.array([1.5, 11.0]))

    assert hv(12) > hv(2)
