"""The baseline as one of generation 1's candidates: evaluated once, learned from, off for runs stored before it."""

from __future__ import annotations

import dataclasses
import json
import sqlite3
from typing import Any

import numpy as np
import pytest

from compileiq_lab import Search, SearchConfiguration
from compileiq_lab.exceptions import ConfigurationError
from compileiq_lab.run import replay_run
from compileiq_lab.search.factory import make_strategy
from compileiq_lab.space import SearchSpace
from compileiq_lab.testing import FlagProblem

PROBLEM = FlagProblem(n_flags=8, n_levels=0, seed=1)


def _calls(pool: int, generations: int, **settings: Any) -> tuple[list[dict], list[int]]:
    calls: list[dict] = []

    def objective(config: dict) -> float:
        calls.append(dict(config))
        return PROBLEM(config)

    cfg = SearchConfiguration(generations=generations, pool_size=pool, seed=3, **settings)
    res = Search(objective, PROBLEM.space(), cfg, store=":memory:").start()
    return calls, list(res.get_results()["generation"].value_counts().sort_index())


def test_the_baseline_is_evaluated_once_and_fills_one_of_generation_1s_slots() -> None:
    calls, per_generation = _calls(pool=6, generations=4)
    assert calls.count({}) == 1 and calls[0] == {}  # the baseline (every flag off), first and only once
    assert len(calls) == 4 * 6  # generations x pool_size in all, the baseline among them
    assert per_generation == [1, 5, 6, 6, 6]  # its row is generation 0's; generation 1 adds the other five
    calls_off, per_generation_off = _calls(pool=6, generations=4, baseline_in_pool=False)
    assert len(calls_off) == 1 + 4 * 6 and per_generation_off == [1, 6, 6, 6, 6]


@pytest.mark.parametrize("name", ["ga", "nsga2", "random"])
def test_a_genome_opened_with_is_asked_first_once_and_joins_pymoos_first_population(name: str) -> None:
    space = SearchSpace(PROBLEM.space())
    base = space.encode(space.baseline())
    st = make_strategy(name, space, n_objectives=1, pool_size=6, seed=0, mutate_rate=0.2, crossover_rate=0.9)
    st.open_with(base[None, :])
    X = st.ask()
    assert len(X) == 6 and (X[0] == base).all()  # the pool's first slot, the other five prior samples
    st.tell(np.array([[PROBLEM(space.decode(x))] for x in X]), np.ones(len(X), dtype=bool))
    if name != "random":  # the GA / NSGA-II population bred from holds it
        assert any((x == base).all() for x in st.algorithm.pop.get("X"))
    for _ in range(3):
        Y = st.ask()
        assert not any((y == base).all() for y in Y)  # never asked again
        st.tell(np.array([[PROBLEM(space.decode(y))] for y in Y]), np.ones(len(Y), dtype=bool))


def test_baseline_in_pool_is_a_bool_and_runs_stored_before_it_kept_the_baseline_apart() -> None:
    with pytest.raises(ConfigurationError, match="baseline_in_pool is True or False"):
        SearchConfiguration(generations=2, baseline_in_pool="yes")  # type: ignore[arg-type]
    assert SearchConfiguration(generations=2).baseline_in_pool is True
    assert SearchConfiguration.defaults()["baseline_in_pool"] is False


def test_a_run_stored_before_the_setting_resumes_with_the_baseline_apart(tmp_path) -> None:
    path = str(tmp_path / "old.db")
    cfg = SearchConfiguration(generations=2, pool_size=6, seed=3, baseline_in_pool=False)
    Search(PROBLEM, PROBLEM.space(), cfg, store=path).start()
    con = sqlite3.connect(path)  # its header as a version without the setting wrote it
    stored = json.loads(con.execute("select value from meta where key='config'").fetchone()[0])
    del stored["baseline_in_pool"]
    con.execute("update meta set value=? where key='config'", (json.dumps(stored),))
    con.commit()
    con.close()
    replayed = replay_run(path).search.config  # a replay shows the settings it searched with, as a resume reads them
    assert replayed.baseline_in_pool is False and replayed.pool_size == 6
    res = Search.resume(path, PROBLEM, generations=4)
    whole = Search(PROBLEM, PROBLEM.space(), dataclasses.replace(cfg, generations=4), store=":memory:").start()
    assert [r.params for r in res.records] == [r.params for r in whole.records] and len(res) == 1 + 4 * 6


@pytest.fixture
def observed(monkeypatch) -> list[np.ndarray]:
    """Every genome whose result the GA / NSGA-II strategy is told in steady-state use (``observe``), in order."""
    from compileiq_lab.search.evolutionary import PymooStrategy

    seen: list[np.ndarray] = []
    real = PymooStrategy.observe

    def spy(self: PymooStrategy, X: np.ndarray, F: np.ndarray, feasible: np.ndarray) -> None:
        seen.extend(np.asarray(X, dtype=np.int64).reshape(-1, self.space.n_genes))
        real(self, X, F, feasible)

    monkeypatch.setattr(PymooStrategy, "observe", spy)
    return seen


@pytest.mark.parametrize("pooled", [True, False])
def test_an_asynchronous_run_learns_the_baseline_without_asking_it_again(pooled: bool, observed) -> None:
    """With asynchronous=True the baseline's result joins pymoo's initial pool and the screen's history (learned
    first, before any proposal), and the run still proposes generations x pool_size searched candidates."""
    calls, _ = _calls(pool=6, generations=4, asynchronous=True, baseline_in_pool=pooled)
    assert calls.count({}) == 1 and calls[0] == {} and len(calls) == 1 + 4 * 6
    base = SearchSpace(PROBLEM.space()).encode({})
    assert any((x == base).all() for x in observed) is pooled
    if pooled:
        assert (observed[0] == base).all()  # learned before any searched result


def test_a_resumed_asynchronous_run_learns_its_stored_baseline_again(tmp_path, observed) -> None:
    path = str(tmp_path / "async.db")
    cfg = SearchConfiguration(generations=2, pool_size=6, seed=3, asynchronous=True)
    Search(PROBLEM, PROBLEM.space(), cfg, store=path).start()
    observed.clear()
    res = Search.resume(path, PROBLEM, generations=4)
    assert len(res) == 1 + 4 * 6 and [r.params for r in res.records].count({}) == 1
    assert (observed[0] == SearchSpace(PROBLEM.space()).encode({})).all()  # first, before the stored rows
