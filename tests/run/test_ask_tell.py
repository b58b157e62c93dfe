"""ask/tell for users who evaluate themselves: same trajectory as start(), misuse rejected clearly."""

from __future__ import annotations

import math

import pytest

from compileiq_lab import Search, SearchConfiguration, load_results
from compileiq_lab.exceptions import ConfigurationError, SearchStateError
from compileiq_lab.testing import FlagProblem

PROBLEM = FlagProblem(n_flags=6, n_levels=2, seed=2)
CFG = SearchConfiguration(generations=5, pool_size=6, seed=3)


@pytest.mark.parametrize("n", [1, 4])
def test_ask_tell_matches_start(n):
    """Asking n at a time is what start() does with n evaluation slots: the same candidates, in the same order."""
    ref = Search(PROBLEM, PROBLEM.space(), CFG, store=":memory:").start(workers=n)
    s = Search(None, PROBLEM.space(), CFG, store=":memory:")
    first = s.ask()
    assert len(first) == 1 and first[0].is_baseline and first[0].config == {}
    s.tell(first, [PROBLEM({})])
    while batch := s.ask(n=n):
        assert len(batch) <= n
        s.tell(batch, [PROBLEM(c.config) for c in batch])
    assert list(s.results.get_results()["params"]) == list(ref.get_results()["params"])
    assert s.results.get_best_result()["score_1"] == ref.get_best_result()["score_1"]
    assert list(s.results.get_results()["generation"]) == list(ref.get_results()["generation"])


def test_tell_accepts_failures_as_values(store_path):
    s = Search(None, PROBLEM.space(), CFG, store=store_path)
    s.tell(s.ask(), [None])
    batch = s.ask()
    s.tell(batch, [math.nan] + [PROBLEM(c.config) for c in batch[1:]])
    statuses = list(load_results(store_path).get_results()["status"])
    assert statuses[:2] == ["invalid", "invalid"] and set(statuses[2:]) == {"ok"}


def test_misuse_is_rejected_with_the_fix():
    s = Search(None, PROBLEM.space(), CFG, store=":memory:")
    base = s.ask()
    with pytest.raises(SearchStateError, match="1 asked candidates of generation 0 await tell"):
        s.ask()
    with pytest.raises(ConfigurationError, match="one score per candidate"):
        s.tell(base, [1.0, 2.0])
    s.tell(base, [1.0])
    with pytest.raises(SearchStateError, match="already told"):
        s.tell(base, [1.0])
    other = Search(None, PROBLEM.space(), CFG, store=":memory:")
    other.tell(other.ask(), [1.0])
    foreign = other.ask()
    with pytest.raises(SearchStateError, match="not awaiting a score"):
        s.tell(foreign[:1], [1.0])
    with pytest.raises(ConfigurationError, match="needs an objective_function"):
        s.start()


def test_start_continues_after_partial_ask_tell():
    ref = Search(PROBLEM, PROBLEM.space(), CFG, store=":memory:").start()
    s = Search(PROBLEM, PROBLEM.space(), CFG, store=":memory:")
    b = s.ask()
    s.tell(b, [PROBLEM(c.config) for c in b])
    b = s.ask(n=2)
    s.tell(b, [PROBLEM(c.config) for c in b])
    res = s.start()
    assert list(res.get_results()["params"]) == list(ref.get_results()["params"])


def test_start_after_ask_tell_reports_only_its_own_generations():
    from compileiq_lab.run.events import GenerationEvent

    s = Search(PROBLEM, PROBLEM.space(), CFG, store=":memory:")
    s.tell(s.ask(), [PROBLEM({})])  # generation 0 finished through ask/tell
    batch = s.ask()
    s.tell(batch, [PROBLEM(c.config) for c in batch])  # and generation 1
    events: list[object] = []
    s.start(callback=events.append)
    generations = [e.generation for e in events if isinstance(e, GenerationEvent)]
    assert generations == list(range(2, CFG.generations + 1))


@pytest.mark.parametrize("sizes", [[None, 2, None], [2, 2, 2, 2, 2], [None, 1, 1], [None, None, 3, None]])
def test_a_run_reopened_mid_generation_asks_what_it_would_have_asked(tmp_path, sizes):
    """Asked in parts (ask(n)), each told before the next, until the process ends with the last part asked and never
    told: the run reopened asks that part again, the same candidates, as the parts before it are replayed as they
    were asked."""
    import compileiq_lab.space as ss

    space = {"a": ss.range(1, 60), "b": ss.choice([1, 2, 3]), "c": ss.choice(["x", "y"], knockout_prob=0.5)}

    def score(config):
        return float((config["a"] - 17) ** 2 + config["b"] + (config.get("c") == "y"))

    path = tmp_path / "r.db"
    s = Search(None, space, SearchConfiguration(generations=3, pool_size=4, seed=2), store=path)
    for n in sizes[:-1]:
        batch = s.ask(n)
        s.tell(batch, [score(c.config) for c in batch])
    lost = s.ask(sizes[-1])
    told = len(s.results)
    s.close()  # the process ends: the part it asked last was never told
    again = Search.open(path)
    assert [c.config for c in again.ask(sizes[-1])] == [c.config for c in lost]
    assert len(again.results) == told  # nothing was evaluated twice on the way
    again.close()
