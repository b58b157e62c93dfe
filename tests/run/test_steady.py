"""The steady-state engine: proposals without a generation barrier, bounded staleness, budget, replay on resume."""

from __future__ import annotations

import numpy as np
import pytest

import compileiq_lab.space as ss
from compileiq_lab import Measurement, SearchConfiguration
from compileiq_lab.run.steady import SteadyEngine
from compileiq_lab.search.factory import make_strategy
from compileiq_lab.space.space import SearchSpace
from compileiq_lab.store.sqlite import RunStore

SPACE = SearchSpace({f"x{i}": ss.range(0, 9, default=0) for i in range(3)})


def score(c):
    return Measurement("ok", scores=(float(sum((v - 3) ** 2 for v in c.values())),))


def engine(store, **settings):
    return SteadyEngine(SPACE, SearchConfiguration(**{"generations": 5, "pool_size": 2, "seed": 0, **settings}),
                        store)


def test_staleness_is_bounded_by_the_oldest_candidate_still_out(monkeypatch):
    from compileiq_lab.run import steady

    monkeypatch.setattr(steady, "LAG_POOLS", 2.0)
    e = engine(RunStore(":memory:"))
    base = e.baseline()
    e.tell(base, score(base.config))
    assert e.lag == 4  # 2 pools of 2
    first = e.ask(10)
    assert len(first) == 4
    for c in first[1:]:  # everything but the oldest comes back
        e.tell(c, score(c.config))
    assert e.ask(10) == []  # 4 proposals since the oldest one still out: wait for it
    e.tell(first[0], score(first[0].config))
    assert len(e.ask(10)) == 4


def test_the_budget_and_generation_numbers_follow_the_proposal_order():
    store = RunStore(":memory:")
    e = engine(store)
    base = e.baseline()
    e.tell(base, score(base.config))
    proposed, told = [], []
    while not e.done_reason:
        batch = e.ask(3)
        proposed.extend(batch)
        for c in reversed(batch):  # results arrive in another order than proposed
            e.tell(c, score(c.config))
            told.append(c)
    assert e.done_reason == "finished" and len(told) == 10
    assert [c.generation for c in proposed] == [1, 1, 2, 2, 3, 3, 4, 4, 5, 5]
    assert [c.key for c in told] != [c.key for c in proposed]
    events = e.take_generations()
    assert [g.generation for g in events] == [1, 2, 3, 4, 5] and all(g.n_candidates == 2 for g in events)
    keys = [r.config_key for r in store.records()]
    assert len(keys) == len(set(keys)) == 11


def test_a_resumed_steady_run_counts_and_learns_from_its_stored_rows(tmp_path):
    store = RunStore(tmp_path / "s.db")
    e = engine(store)
    base = e.baseline()
    e.tell(base, score(base.config))
    told = 0
    while told < 4:
        for c in e.ask(4 - told):
            e.tell(c, score(c.config))
            told += 1
    again = engine(store, generations=3)
    assert again.baseline() is None  # stored
    batch = again.ask(10)
    assert len(batch) == 2 and all(c.generation == 3 for c in batch)  # 4 of the 6 are stored
    assert not {c.key for c in batch} & {r.config_key for r in store.records()}


def test_propose_and_observe_never_repeat_a_genome_and_improve():
    st = make_strategy("ga", SPACE, n_objectives=1, pool_size=6, seed=4, mutate_rate=0.34, crossover_rate=0.9)
    seen, firsts, lasts = set(), [], []
    out = []
    for step in range(20):
        X = st.propose(3)
        for x in X:
            assert tuple(x) not in seen
            seen.add(tuple(x))
        out.extend(X)
        done, out = out[:2], out[2:]
        D = np.array(done)
        F = ((D - 3) ** 2).sum(1, keepdims=True).astype(float)
        st.observe(D, F, np.ones(len(D), bool))
        (firsts if step < 3 else lasts if step >= 17 else []).extend(F[:, 0])
    assert np.mean(lasts) < np.mean(firsts)


def test_ask_tell_is_refused_for_an_asynchronous_search():
    from compileiq_lab import Search
    from compileiq_lab.exceptions import ConfigurationError, SearchStateError

    cfg = SearchConfiguration(generations=2, asynchronous=True)
    search = Search(None, {"x": ss.range(0, 9)}, cfg, store=":memory:")
    with pytest.raises(SearchStateError, match="asynchronous=True is for start"):
        search.ask()
    with pytest.raises(ConfigurationError, match="asynchronous is True or False"):
        SearchConfiguration(generations=2, asynchronous="yes")
    with pytest.raises(ConfigurationError, match="surrogate"):
        SearchConfiguration(generations=2, asynchronous=True, surrogate=True)


def test_pymoo_starts_from_the_whole_initial_pool_not_from_its_first_result():
    st = make_strategy("ga", SPACE, n_objectives=1, pool_size=8, seed=0, mutate_rate=0.34, crossover_rate=0.9)
    first = st.propose(8)  # the whole initial pool at once (8 slots)
    st.observe(first[:1], np.zeros((1, 1)), np.ones(1, bool))
    assert not st.algorithm.is_initialized  # one result is not a population
    more = st.propose(4)  # meanwhile: prior samples, never repeats
    assert len(more) == 4 and not {tuple(x) for x in more} & {tuple(x) for x in first}
    st.observe(first[1:], np.arange(7, dtype=float)[:, None], np.ones(7, bool))
    assert st.algorithm.is_initialized and len(st.algorithm.pop) == 8


def test_more_slots_than_a_generation_holds_says_how_to_use_them(caplog):
    import logging

    from compileiq_lab import Search

    def f(c):
        return float(sum(c.values()))

    space = {f"x{i}": ss.range(0, 9, default=0) for i in range(3)}
    with caplog.at_level(logging.WARNING, logger="compileiq_lab"):
        Search(f, space, SearchConfiguration(generations=2, pool_size=3), store=":memory:").start(workers=5)
        Search(f, space, SearchConfiguration(generations=2, pool_size=3, asynchronous=True),
               store=":memory:").start(workers=5)
    said = [r.getMessage() for r in caplog.records if "slots wait" in r.getMessage()]
    assert said == ["5 evaluation slots but generations of 3 candidates: 2 slots wait each generation; a new run "
                    "with pool_size=5 (--pool-size 5 in the CLI), or asynchronous=True (--asynchronous), keeps every "
                    "slot busy"]  # the steady run keeps them busy


def _calls_to_optimum(table, seed: int, asynchronous: bool, model: str = "density", workers: int = 1,
                      budget: int = 150) -> int:
    """Calls of a search over a real compiler table's plain space until its optimum (budget + 1: not reached)."""
    from compileiq_lab import Search

    best = table.best()["front"][0][0]
    calls: list[float] = []
    obj = table.objective()

    def f(config):
        try:
            value = obj(config)
        except Exception:
            calls.append(float("inf"))
            raise
        calls.append(float(value))
        return value

    cfg = SearchConfiguration(generations=budget // 5 + 1, seed=seed, asynchronous=asynchronous, model=model)
    Search(f, table.plain_space(), cfg, store=":memory:").start(workers=workers)
    return next((i + 1 for i, v in enumerate(calls[:budget]) if v == best), budget + 1)


def test_an_asynchronous_run_picks_its_candidates_through_the_offspring_screen():
    # on a real compiler table (bench/tables, tune half; ptxas rejects half the configs, which fail as raised), an
    # asynchronous run reaches the optimum in far fewer calls with the screen than with pymoo's offspring as they are
    from pathlib import Path

    from compileiq_lab.testing import Table

    table = Table.load(Path(__file__).resolve().parents[2] / "bench" / "tables" / "sgemm2d_nvcc")
    seeds = range(8)
    screened = [_calls_to_optimum(table, s, True) for s in seeds]
    unscreened = [_calls_to_optimum(table, s, True, model="none") for s in seeds]
    assert sum(screened) < 0.7 * sum(unscreened), (screened, unscreened)


def test_a_pick_counts_the_calls_still_in_flight_as_this_generations_picks():
    from compileiq_lab.search.screen import DensityScreen

    rng = np.random.default_rng(0)
    X = SPACE.sample(rng, 40)
    F = ((X - 3) ** 2).sum(1, keepdims=True).astype(float)
    screen = DensityScreen(SPACE, 1, seed=0, hill=0, explore=0.0)
    screen.observe(X, F, np.ones(len(X), bool))
    C = SPACE.sample(rng, 60)
    first = int(screen.select(C, 1)[0])
    again = int(screen.select(C, 1)[0])
    assert again == first  # the same pick without anything in flight
    flying = int(screen.select(C, 1, pending=C[[first]])[0])
    assert flying != first  # a copy of a call in flight teaches nothing: the pick moves on


def test_a_resumed_asynchronous_run_goes_on_from_its_stored_rows(store_path):
    from compileiq_lab import Search

    space = {"a": ss.choice([0, 1, 2, 3]), "b": ss.choice(["x", "y", "z", "w"])}  # 16 configs

    def objective(c):
        return float(c["a"] * 7 % 5 + len(c["b"]))

    cfg = SearchConfiguration(generations=2, pool_size=4, seed=15, asynchronous=True)
    first = Search(objective, space, cfg, store=store_path).start(workers=8)
    again = Search.resume(store_path, objective, generations=5, workers=8)
    keys = [r.config_key for r in again.records]
    assert len(first.records) == 8 and len(keys) == len(set(keys)) == 16 and again.status == "exhausted"
