"""Run: a search in a background thread; events, pause/resume/stop, failures kept for join(), reopening."""

from __future__ import annotations

import threading
import time

import pytest

from compileiq_lab import Run, Search, SearchConfiguration
from compileiq_lab.exceptions import SearchStateError
from compileiq_lab.run.events import EvaluationEvent, FailedEvent, FinishedEvent, GenerationEvent
from compileiq_lab.testing import toy_objective, toy_space


def slow_toy(delay: float = 0.01):
    calls: list[threading.Thread] = []

    def objective(config):
        calls.append(threading.current_thread())
        time.sleep(delay)
        return toy_objective(config)
    return objective, calls


def make_run(store, objective, generations=4, **kw) -> Run:
    return Run(Search(objective, toy_space(), SearchConfiguration(generations=generations, pool_size=6, seed=3),
                      store=store), **kw)


def test_a_run_goes_on_in_the_background_and_streams_events(store_path):
    objective, calls = slow_toy()
    run = make_run(store_path, objective)
    events: list[dict] = []
    run.subscribe(events.append)
    run.start()
    assert run.running and run.state == "running"
    assert sum(range(1000)) == 499500  # this thread is free while the run works
    results = run.join(timeout=60)
    assert results is not None and run.state == "finished" and not run.running
    assert all(t.name.startswith("compileiq-run") for t in calls)
    evaluations = [e for e in events if isinstance(e, EvaluationEvent)]
    assert len(evaluations) == len(results) == len(calls)
    # the quickstart space has no baseline (x and y have no default): generations 1..4
    assert [e.generation for e in events if isinstance(e, GenerationEvent)] == list(range(1, 5))
    assert events[-1] == FinishedEvent(status="finished", n_evaluations=len(results))
    p = run.progress()
    assert p["generation"] == 4 and p["evaluations"] == len(results) and p["eta_s"] == 0.0


def test_pause_holds_the_run_and_resume_finishes_it(store_path):
    objective, calls = slow_toy(0.02)
    run = make_run(store_path, objective).start()
    while len(calls) < 3:
        time.sleep(0.005)
    run.pause()
    assert run.state == "paused"
    time.sleep(0.1)  # a call in flight may finish
    held = len(calls)
    time.sleep(0.3)
    assert len(calls) == held and run.running
    run.resume()
    assert run.join(timeout=60) is not None and run.state == "finished" and len(calls) > held
    p = run.progress()  # the time it ran, the 0.4 s paused not counted
    assert p["elapsed_s"] <= p["finished_at"] - p["started_at"] - 0.35


def test_stop_keeps_every_evaluation_and_open_continues_without_redoing_any(store_path):
    objective, calls = slow_toy(0.02)
    run = make_run(store_path, objective, generations=6).start()
    while len(calls) < 8:
        time.sleep(0.005)
    run.stop()
    partial = run.join(timeout=60)
    assert run.state == "stopped" and partial.status == "stopped" and len(partial) == len(calls)
    before = len(calls)
    again = Run.open(store_path, objective).start()
    final = again.join(timeout=60)
    assert final.status == "finished" and len(final) == len(calls)
    seen = [r.config_key for r in final.records]
    assert len(seen) == len(set(seen)) and len(calls) - before == len(final) - len(partial)


def test_a_failure_of_the_run_thread_is_kept_reported_and_raised_by_join(store_path, monkeypatch):
    run = make_run(store_path, toy_objective)
    events: list[dict] = []
    run.subscribe(events.append)

    def broken(n: int | None = None) -> None:
        raise RuntimeError("disk on fire")
    monkeypatch.setattr(run.search.engine, "ask", broken)
    run.start()
    with pytest.raises(RuntimeError, match="disk on fire"):
        run.join(timeout=60)
    assert run.state == "failed" and "disk on fire" in run.error_text
    assert isinstance(events[-1], FailedEvent) and "RuntimeError: disk on fire" in events[-1].error


def test_a_broken_subscriber_does_not_end_the_run_and_unsubscribe_works(store_path):
    run = make_run(store_path, toy_objective, generations=2)
    seen: list[dict] = []
    run.subscribe(lambda e: 1 / 0)
    unsubscribe = run.subscribe(seen.append)
    unsubscribe()
    assert run.start().join(timeout=60) is not None and run.state == "finished" and seen == []


def test_misuse_is_refused_with_the_fix(store_path):
    run = make_run(store_path, toy_objective, generations=1).start()
    with pytest.raises(SearchStateError, match="already started"):
        run.start()
    run.join(timeout=60)
    with pytest.raises(SearchStateError, match="objective_function"):
        Run(Search(None, toy_space(), SearchConfiguration(generations=1), store=":memory:"))


def test_snapshots_while_running(store_path):
    objective, calls = slow_toy(0.02)
    run = make_run(store_path, objective).start()
    while len(calls) < 5:
        time.sleep(0.005)
    snap = run.results()
    assert 1 <= len(snap) <= len(calls) and isinstance(run.front(), list)
    assert "Run(state=" in repr(run)
    run.stop()
    run.join(timeout=60)


@pytest.mark.parametrize("workers", [1, 4])
def test_stopping_a_paused_run_makes_no_further_objective_call(store_path, workers):
    objective, calls = slow_toy(0.02)
    run = make_run(store_path, objective, generations=10, workers=workers).start()
    while len(calls) < 6:
        time.sleep(0.005)
    run.pause()
    time.sleep(0.2)  # calls in flight finish
    held = len(calls)
    run.stop()
    results = run.join(timeout=60)
    time.sleep(0.1)
    assert run.state == "stopped" and len(calls) == held and len(results) <= held


def test_a_stop_right_after_start_is_not_lost(store_path):
    objective, calls = slow_toy(0.01)
    run = make_run(store_path, objective, generations=10).start()
    run.stop()
    run.join(timeout=60)
    assert run.state == "stopped" and len(calls) <= 1


@pytest.mark.parametrize("asynchronous", [False, True])
def test_a_stop_keeps_the_evaluations_that_finished_beside_the_one_it_waited_for(asynchronous):
    # four slots: the first call waits until the other three have returned, then stops the run; all four finished,
    # so all four are rows (a resumed run must not pay for them again)
    import compileiq_lab.space as ss

    calls: list[dict] = []
    lock, others = threading.Lock(), threading.Event()

    def objective(config):
        with lock:
            first = not calls
            calls.append(config)
            if len(calls) == 4:
                others.set()
        if first:
            assert others.wait(30)
            time.sleep(0.05)  # the other three are told back
            search.stop()
        return float(config["a"])

    search = Search(objective, {"a": ss.range(0, 50), "b": ss.choice([1, 2, 3, 4])},
                    SearchConfiguration(generations=3, pool_size=8, seed=0, asynchronous=asynchronous),
                    store=":memory:")
    res = search.start(workers=4)
    assert res.status == "stopped" and len(calls) >= 4 and len(res.records) == len(calls)


def test_a_reopened_runs_eta_counts_only_the_generations_it_ran(store_path):
    Search(toy_objective, toy_space(), SearchConfiguration(generations=3, pool_size=5, seed=0),
           store=store_path).start()
    run = Run.open(store_path, toy_objective, generations=6)
    seen: list[dict] = []
    run.subscribe(lambda e: seen.append(run.progress()) if isinstance(e, GenerationEvent) else None)
    run.start().join(timeout=60)
    live = [p for p in seen if p["state"] == "running" and p["generation"] > 3]
    generations = [p["generation"] for p in seen]
    assert live and generations.index(3) < generations.index(4)  # the stored ones, replayed first
    for p in live:  # the time left at this session's pace: its own generations (4..), not the replayed ones
        g = p["generation"]
        assert p["eta_s"] == pytest.approx(p["elapsed_s"] * (6 - g) / (g - 3))


def test_a_run_paused_during_its_last_call_keeps_its_elapsed_time_once_finished(store_path):
    objective, calls = slow_toy(0.3)
    run = make_run(store_path, objective, generations=1).start()
    while len(calls) < 6:  # the last of the generation's six calls is in flight
        time.sleep(0.005)
    run.pause()
    assert run.join(timeout=60) is not None and run.state == "finished"
    first = run.progress()["elapsed_s"]
    time.sleep(0.4)
    assert run.progress()["elapsed_s"] == first > 0.2  # it had grown 0 while the pause stayed open
