"""A callback or subscriber that raises: the run's header says how it ended, and the run can be continued."""

from __future__ import annotations

import pytest

from compileiq_lab import Search, SearchConfiguration, load_results
from compileiq_lab.run import Run
from compileiq_lab.run.events import EvaluationEvent
from compileiq_lab.testing import FlagProblem

PROBLEM = FlagProblem(n_flags=6, n_levels=2, seed=1)
CFG = SearchConfiguration(generations=3, pool_size=4, seed=4)


@pytest.mark.parametrize("error", [ValueError("boom"), SystemExit(3)])
def test_a_raising_callback_leaves_a_failed_header_and_the_run_resumes(tmp_path, error):
    path = tmp_path / "s.db"
    calls = {"n": 0}

    def callback(event):
        if isinstance(event, EvaluationEvent):
            calls["n"] += 1
            if calls["n"] == 5:
                raise error

    with pytest.raises(type(error)):
        Search(PROBLEM, PROBLEM.space(), CFG, store=path).start(callback=callback)
    h = load_results(str(path)).header
    assert h.status == "failed" and type(error).__name__ in h.stop_reason
    res = Search.resume(str(path), PROBLEM)
    reference = Search(PROBLEM, PROBLEM.space(), CFG, store=":memory:").start()
    assert res.status == "finished" and list(res.get_results()["params"]) == list(reference.get_results()["params"])


def test_a_subscriber_raising_system_exit_does_not_end_the_run(tmp_path):
    path = tmp_path / "s.db"
    run = Run(Search(PROBLEM, PROBLEM.space(), CFG, store=path))

    def bad(event):
        raise SystemExit(1)

    run.subscribe(bad)
    run.start()
    res = run.join(timeout=120)
    assert res is not None and res.status == "finished"
    assert load_results(str(path)).header.status == "finished"
