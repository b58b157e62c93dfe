"""A generation asked in parts: each part is picked with every result before it, the generations stay the same size,
and on real compiler tables picking one at a time reaches the optimum in fewer calls than picking a generation whole."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from compileiq_lab import Search, SearchConfiguration
from compileiq_lab import space as ss
from compileiq_lab.run.build import build_strategy
from compileiq_lab.run.events import GenerationEvent
from compileiq_lab.search.screen import DensityScreen
from compileiq_lab.space import SearchSpace
from compileiq_lab.testing import FlagProblem, Table, TableCompileError

TABLES = Path(__file__).resolve().parents[2] / "bench" / "tables"
PROBLEM = FlagProblem(n_flags=6, n_levels=2, seed=2)


def test_a_generation_asked_in_parts_holds_pool_size_new_genomes():
    space = SearchSpace(PROBLEM.space())
    strategy = build_strategy(space, SearchConfiguration(generations=4, pool_size=5, seed=1), None)
    seen: set[bytes] = set()
    for generation in range(4):
        sizes = []
        while True:
            X = strategy.ask(2)
            sizes.append(len(X))
            seen.update(space.keys(X))
            strategy.tell(np.array([[PROBLEM(space.decode(x))] for x in X]), np.ones(len(X), dtype=bool))
            if not strategy.in_generation:
                break
        assert sizes == [2, 2, 1], generation  # a part never crosses into the next generation
    assert len(seen) == 20  # never a config twice
    with pytest.raises(ValueError, match="n is None or an int >= 1"):
        strategy.ask(0)


def test_generations_are_numbered_alike_whether_asked_whole_or_one_at_a_time():
    cfg = SearchConfiguration(generations=6, pool_size=5, seed=3)
    for workers in (1, 5):
        events: list = []
        res = Search(PROBLEM, PROBLEM.space(), cfg, store=":memory:").start(callback=events.append, workers=workers)
        counts = res.get_results()["generation"].value_counts().sort_index()
        # the baseline, then six generations of five, the baseline one of the first's (its row is generation 0's)
        assert list(counts) == [1, 4] + [5] * 5, workers
        done = [e.generation for e in events if isinstance(e, GenerationEvent)]
        assert done == list(range(7)), workers  # one event per generation, at its end


def test_a_generation_in_parts_alternates_neighbours_of_the_best_and_model_picks():
    space = SearchSpace({"a": ss.choice([0, 1, 2, 3], knockout_prob=0.5), "c": ss.range(0, 9)})
    one = DensityScreen(space, 1, seed=0)
    assert one.roles(5, parts=True) == ["hill", "model", "hill", "model", "hill"]
    assert one.roles(5) == ["hill", "model", "model", "model", "random"]  # asked whole: as before
    front = DensityScreen(space, 2, seed=0)  # several objectives: no best config, the same roles either way
    assert front.roles(8, parts=True) == front.roles(8) == ["model"] * 7 + ["random"]


def _calls(table: Table, seed: int, part: int | None, budget: int = 150) -> int:
    """Calls of a default search (asked ``part`` at a time, None: whole generations) over the table's plain space
    until its optimum (budget + 1: not reached); failed compiles told as failures."""
    obj = table.objective()
    best = table.best()["front"][0][0]
    s = Search(None, table.plain_space(), SearchConfiguration(generations=budget, seed=seed), store=":memory:")
    calls: list[float] = []
    while len(calls) < budget and (batch := s.ask(n=part)):
        values = []
        for c in batch:
            try:
                values.append(float(obj(c.config)))
            except TableCompileError:
                values.append(None)
            if not c.is_baseline:
                calls.append(values[-1] if values[-1] is not None else np.inf)
        s.tell(batch, values)
    return next((i + 1 for i, v in enumerate(calls[:budget]) if v == best), budget + 1)


@pytest.mark.parametrize("name", ["sgemm2d_nvcc", "sgemm2d_plain_ptxas"])
def test_on_real_tables_one_pick_at_a_time_reaches_the_optimum_in_fewer_calls(name: str):
    # nvcc and ptxas on a public SGEMM kernel (bench/tables, tune half), plain space ("unset" a value; rejects fail)
    table = Table.load(TABLES / name)
    seeds = range(12)
    one = [_calls(table, s, 1) for s in seeds]
    whole = [_calls(table, s, None) for s in seeds]
    assert sum(one) < 0.9 * sum(whole), (one, whole)
