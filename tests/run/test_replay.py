"""Replay of a stored run: the live run's events, in order, at the recorded pace; pause, stop, a dashboard watching."""

from __future__ import annotations

import dataclasses
import hashlib
import threading
import time
from pathlib import Path

import pytest

from compileiq_lab import Run, Search, SearchConfiguration
from compileiq_lab.exceptions import ConfigurationError, SearchStateError
from compileiq_lab.run import ReplayRun, replay_run
from compileiq_lab.run.events import EvaluationEvent, FinishedEvent, GenerationEvent, RunEvent
from compileiq_lab.store import load_results
from compileiq_lab.store.sqlite import RunStore
from compileiq_lab.testing import FlagProblem, toy_objective, toy_space

RUNS = Path(__file__).resolve().parents[2] / "bench" / "results" / "runs"


def digest(path: str | Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


@pytest.fixture
def toy_run(tmp_path: Path) -> tuple[str, list[RunEvent]]:
    """A real stored toy run and the events its live run emitted."""
    path = str(tmp_path / "t.db")
    live: list[RunEvent] = []
    search = Search(toy_objective, toy_space(), SearchConfiguration(generations=3, seed=0), store=path)
    search.start(callback=live.append)
    search.close()
    return path, live


def paced_store(source: str, path: Path, gap_s: float, n: int | None = None) -> str:
    """A copy of ``source`` (its header, its first ``n`` rows) whose evaluations end ``gap_s`` apart."""
    results = load_results(source)
    store = RunStore(path, header=results.header)
    t0 = 1.7e9
    for i, rec in enumerate(results.records[:n]):
        store.append(dataclasses.replace(rec, started_at=t0 + gap_s * i, elapsed_s=0.0))
    store.close()
    return str(path)


def collect(run: ReplayRun) -> list[RunEvent]:
    events: list[RunEvent] = []
    run.subscribe(events.append)
    return events


def wait_for(condition, timeout: float = 20.0) -> None:
    end = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < end, "timed out"
        time.sleep(0.005)


def test_a_replay_emits_the_live_runs_events_and_ends_with_its_results(toy_run):
    path, live = toy_run
    before = digest(path)
    source = load_results(path)
    run = replay_run(path, speed=1000)
    events = collect(run)
    assert run.state == "idle" and not run.running and len(run.results()) == 0
    final = run.start().join(timeout=30)
    assert final is not None and run.state == "finished" and not run.running
    assert [e.record for e in events if isinstance(e, EvaluationEvent)] == source.records
    assert [e for e in events if isinstance(e, GenerationEvent)] == [e for e in live if isinstance(e, GenerationEvent)]
    assert events == live  # the same events in the same order, the FinishedEvent included
    assert events[-1] == FinishedEvent("finished", len(source))
    # the final results are the source's, read-only from the source store
    assert [r.scores for r in final.records] == [r.scores for r in source.records]
    assert final.status_counts() == source.status_counts() and final.status == source.status
    assert final.pareto_front() == source.pareto_front() == run.front()
    assert final.store_path == run.store_path == path and final.header == source.header
    assert run.source.records == source.records
    assert digest(path) == before
    p = run.progress()
    assert set(p) == set(Run(Search(toy_objective, toy_space(), SearchConfiguration(generations=1),
                                    store=":memory:")).progress())
    assert p["generation"] == 3 == p["generations"] and p["evaluations"] == len(source) and p["eta_s"] == 0.0
    assert run.search.objectives == source.objectives and run.search.config.generations == 3
    assert "finished" in repr(run) and path in repr(run)
    with pytest.raises(SearchStateError, match="already started"):
        run.start()


@pytest.mark.parametrize("kind", ["baseline", "baseline, stopped at generation 1's end", "asynchronous",
                                  "stopped mid-generation", "stopped at its end", "cut short by max_evaluations"])
def test_the_events_are_the_live_runs_for_every_kind_of_run(tmp_path, kind):
    path = str(tmp_path / "k.db")
    flags = FlagProblem()
    if kind.startswith("baseline"):  # a space with defaults: generation 0 is the baseline, one of generation 1's six
        search = Search(flags, flags.space(), SearchConfiguration(generations=3, pool_size=6, seed=1), store=path)
    else:
        search = Search(toy_objective, toy_space(), SearchConfiguration(
            generations=4, pool_size=5, seed=0, asynchronous=kind == "asynchronous",
            max_evaluations=8 if kind.startswith("cut") else None), store=path)
    live: list[RunEvent] = []
    stop_after = {"stopped mid-generation": 8, "stopped at its end": 10,
                  "baseline, stopped at generation 1's end": 6}.get(kind)
    run = Run(search)

    def record(event: RunEvent) -> None:
        live.append(event)
        if stop_after is not None and sum(isinstance(e, EvaluationEvent) for e in live) == stop_after:
            run.stop()
    run.subscribe(record)
    assert run.start().join(timeout=60) is not None
    search.close()
    replay = replay_run(path, speed=1e6)
    events = collect(replay)
    replay.start().join(timeout=30)
    assert events == live and replay.state == run.state
    if kind.startswith("baseline"):
        assert isinstance(events[1], GenerationEvent) and events[1].generation == 0
        ends = [e for e in events if isinstance(e, GenerationEvent)]
        assert ends[1].generation == 1 and ends[1].n_candidates == 5  # its own rows: the baseline's is generation 0's


def test_results_grow_with_the_replay_and_pause_holds_every_event(toy_run, tmp_path):
    path = paced_store(toy_run[0], tmp_path / "paced.db", gap_s=0.04)
    run = replay_run(path, speed=1)
    events = collect(run)
    seen_in_thread: list[bool] = []
    run.subscribe(lambda e: seen_in_thread.append(run.owns_current_thread()))
    assert not run.owns_current_thread()
    run.start()
    wait_for(lambda: sum(isinstance(e, EvaluationEvent) for e in events) >= 3)
    run.pause()
    held = len(events)
    assert run.state == "paused" and run.progress()["eta_s"] is None
    time.sleep(0.4)  # ten gaps' worth: nothing arrives while paused
    assert len(events) == held and run.state == "paused"
    snapshot = run.results()
    assert len(snapshot) == sum(isinstance(e, EvaluationEvent) for e in events) and snapshot.status == "running"
    assert snapshot.records == run.source.records[:len(snapshot)]
    run.resume()
    assert run.join(timeout=30) is not None and run.state == "finished"
    assert [e.record for e in events if isinstance(e, EvaluationEvent)] == run.source.records
    assert all(seen_in_thread)


def test_stop_ends_a_replay_early(toy_run, tmp_path):
    path = paced_store(toy_run[0], tmp_path / "paced.db", gap_s=0.05)
    run = replay_run(path, speed=1)
    events = collect(run)
    run.start()
    wait_for(lambda: sum(isinstance(e, EvaluationEvent) for e in events) >= 2)
    run.stop()
    final = run.join(timeout=10)
    n = sum(isinstance(e, EvaluationEvent) for e in events)
    assert final is not None and run.state == "stopped" and final.status == "stopped"
    assert 2 <= n < len(run.source) and len(final) == n
    assert events[-1] == FinishedEvent("stopped", n)
    # a paused replay stops without another event
    run = replay_run(path, speed=1)
    events = collect(run)
    run.start()
    wait_for(lambda: len(events) >= 1)
    run.pause()
    held = len(events)
    run.stop()
    assert run.join(timeout=10) is not None and run.state == "stopped"
    assert len(events) == held + 1 and isinstance(events[-1], FinishedEvent)


def test_the_pace_follows_the_recorded_gaps(toy_run, tmp_path):
    path = paced_store(toy_run[0], tmp_path / "paced.db", gap_s=0.1, n=7)  # 6 gaps of 0.1 s

    def duration(**kw) -> float:
        run = replay_run(path, **kw)
        t0 = time.perf_counter()
        assert run.start().join(timeout=30) is not None
        return time.perf_counter() - t0

    slow, fast = duration(speed=1), duration(speed=10)
    capped = duration(speed=1, max_gap_s=0.01)
    assert slow >= 0.5  # 0.6 s recorded (waits never end early)
    assert fast < slow / 2 and capped < slow / 2


def test_a_dashboard_watches_a_replay(toy_run):
    from compileiq_lab.widgets import Dashboard
    from compileiq_lab.widgets.live import EVALS, FAILED

    replay = replay_run(toy_run[0], speed=1000)
    d = Dashboard(replay)
    d.start()
    d.wait(timeout=30)
    assert replay.state == "finished"
    assert d.plots is not None
    shown = list(d.plots.pareto.data[EVALS].customdata or []) + list(d.plots.pareto.data[FAILED].customdata or [])
    assert sorted(shown) == [r.eval_id for r in replay.source.records]
    assert "finished" in d.status.value


def test_bad_paths_and_settings_are_refused_with_their_fix(tmp_path, toy_run):
    missing = str(tmp_path / "nope.db")
    with pytest.raises(ConfigurationError, match=r"nope\.db.*does not exist.*\.db file"):
        replay_run(missing)
    junk = tmp_path / "notes.db"
    junk.write_text("not a database at all\n" * 50)
    with pytest.raises(ConfigurationError, match=r"notes\.db.*not a readable run store.*\.db file"):
        replay_run(str(junk))
    with pytest.raises(ConfigurationError, match="folder"):
        replay_run(str(tmp_path))
    for bad in (0, -1.0, float("nan")):
        with pytest.raises(ConfigurationError, match="speed > 0"):
            replay_run(toy_run[0], speed=bad)
    with pytest.raises(ConfigurationError, match="max_gap_s >= 0"):
        replay_run(toy_run[0], max_gap_s=-1)


def test_a_failing_subscriber_does_not_end_the_replay(toy_run):
    run = replay_run(toy_run[0], speed=1000)
    events = collect(run)

    def broken(event: RunEvent) -> None:
        raise RuntimeError("subscriber bug")
    run.subscribe(broken)
    assert run.start().join(timeout=30) is not None and run.state == "finished" and run.error is None
    assert isinstance(events[-1], FinishedEvent) and events[-1].n_evaluations == len(run.source)


@pytest.mark.parametrize("store", sorted(RUNS.glob("*-cpu.db")) or [None], ids=lambda p: p.name if p else "none")
def test_a_shipped_cpu_recording_replays(store):
    if store is None:
        pytest.skip(f"no *-cpu.db recordings in {RUNS} (bench/record_runs.py makes them)")
    before = digest(store)
    run = replay_run(str(store), max_gap_s=0)
    events = collect(run)
    ended = threading.Event()
    run.subscribe(lambda e: ended.set() if isinstance(e, FinishedEvent) else None)
    final = run.start().join(timeout=60)
    assert final is not None and ended.is_set()
    source = run.source
    assert source.header.kernel is not None and source.header.kernel.catalog == "gcc"
    assert source.objective_names == ["runtime", "compile_time"]
    assert [e.record for e in events if isinstance(e, EvaluationEvent)] == source.records
    assert events[-1] == FinishedEvent(source.status, len(source))
    assert final.pareto_front() == source.pareto_front()
    assert digest(store) == before


def test_a_resumed_run_reports_its_replayed_generations_as_they_were(tmp_path):
    path = str(tmp_path / "r.db")
    flags = FlagProblem()
    first: list[RunEvent] = []
    Search(flags, flags.space(), SearchConfiguration(generations=3, pool_size=5, seed=2), store=path).start(
        callback=first.append)
    again: list[RunEvent] = []
    Search.resume(path, flags, generations=5, callback=again.append)

    def ends(events: list[RunEvent]) -> list[tuple[int, float | None, int]]:
        return [(e.generation, e.best_score, e.n_evaluations) for e in events if isinstance(e, GenerationEvent)]
    assert ends(again)[:4] == ends(first)  # the best and the rows so far at each replayed generation's end
    assert [e[2] for e in ends(again)] == [1, 5, 10, 15, 20, 25]


def test_a_space_of_only_the_baseline_replays_the_events_it_emitted(tmp_path):
    import compileiq_lab.space as ss

    path = str(tmp_path / "one.db")
    live: list[RunEvent] = []
    res = Search(lambda c: 1.0, {"a": ss.choice([4], default=4)}, SearchConfiguration(generations=3),
                 store=path).start(callback=live.append)
    ends = [e for e in live if isinstance(e, GenerationEvent)]
    assert res.status == "exhausted" and [e.generation for e in ends] == [0]  # no empty generation 1
    from compileiq_lab.run.replay import replay_events

    assert [e for _, es in replay_events(res) for e in es if isinstance(e, GenerationEvent)] == ends
