"""Budgets users think in: max_evaluations and time_budget_s end a run at the first limit reached, say so, and a run
they ended continues with a larger budget."""

from __future__ import annotations

import math
import time
from typing import Any

import pytest

import compileiq_lab.space as ss
from compileiq_lab import Run, Search, SearchConfiguration, load_results
from compileiq_lab.exceptions import ConfigurationError, SearchStateError
from compileiq_lab.run.events import FinishedEvent, GenerationEvent
from compileiq_lab.store import RunStore, writer_pid


def space() -> dict[str, Any]:
    """A space with a baseline row (every parameter has a default) and room for hundreds of configs."""
    return {"x": ss.range(0, 30, default=3), "y": ss.range(0, 30, default=7),
            "z": ss.choice(["a", "b", "c"], default="a")}


def score(config: dict[str, Any]) -> float:
    return float((config["x"] - 11) ** 2 + (config["y"] - 5) ** 2 + (config.get("z") == "b"))


class Counted:
    """The objective, with every config it was called with."""

    def __init__(self, delay_s: float = 0.0) -> None:
        self.calls: list[dict[str, Any]] = []
        self.delay_s = delay_s

    def __call__(self, config: dict[str, Any]) -> float:
        self.calls.append(dict(config))
        if self.delay_s:
            time.sleep(self.delay_s)
        return score(config)


def settings(**kw: Any) -> SearchConfiguration:
    return SearchConfiguration(**{"generations": 50, "pool_size": 8, "seed": 3, **kw})


@pytest.mark.parametrize("n", [1, 2, 9, 13, 30])
def test_max_evaluations_ends_the_run_at_exactly_n_calls_baseline_included(store_path, n):
    obj, events = Counted(), []
    res = Search(obj, space(), settings(max_evaluations=n), store=store_path).start(callback=events.append)
    assert len(obj.calls) == len(res) == n
    assert res.records[0].is_baseline  # the baseline call counts toward the budget
    assert res.status == "finished" and res.header.stop_reason == "max_evaluations"
    assert load_results(store_path).header.stop_reason == "max_evaluations"
    assert events[-1] == FinishedEvent("finished", n) and events[-1].reason == "max_evaluations"
    # a generation cut short is never reported as complete
    gens = [e for e in events if isinstance(e, GenerationEvent)]
    # their rows: the baseline's, then 8 per generation (the first's 7 and the baseline, which is one of them)
    assert sum(e.n_candidates for e in gens) == max(1, 8 * (n // 8))


def test_the_generations_still_end_a_run_first_and_say_so(store_path):
    obj = Counted()
    res = Search(obj, space(), settings(generations=2, max_evaluations=1000), store=store_path).start()
    assert len(obj.calls) == 2 * 8 and res.header.stop_reason == "generations"  # the baseline one of the first 8


def test_a_budget_cut_keeps_the_candidates_an_unbudgeted_run_asks(store_path):
    cut, full = Counted(), Counted()
    Search(cut, space(), settings(max_evaluations=20), store=store_path).start()
    Search(full, space(), settings(generations=3), store=":memory:").start()
    assert cut.calls == full.calls[:20]


def test_resuming_with_a_larger_max_evaluations_continues_to_the_new_total(store_path):
    first = Counted()
    Search(first, space(), settings(max_evaluations=13), store=store_path).start()
    again = Counted()
    res = Search.resume(store_path, again, max_evaluations=13)  # the same budget: nothing left to do
    assert again.calls == [] and len(res) == 13 and res.header.stop_reason == "max_evaluations"
    res = Search.resume(store_path, again, max_evaluations=30)
    assert len(res) == 30 and len(again.calls) == 30 - 13
    keys = [r.config_key for r in res.records]
    assert len(set(keys)) == 30  # no stored candidate was asked again
    reference = Counted()
    Search(reference, space(), settings(max_evaluations=30), store=":memory:").start()
    assert first.calls + again.calls == reference.calls  # the same trajectory as one uninterrupted run
    assert res.header.config["max_evaluations"] == 30


def test_a_budget_is_no_trajectory_setting_so_a_new_search_may_change_it(store_path):
    Search(Counted(), space(), settings(max_evaluations=10), store=store_path).start()
    obj = Counted()
    res = Search(obj, space(), settings(max_evaluations=17, time_budget_s=60.0), store=store_path).start()
    assert len(res) == 17 and len(obj.calls) == 7
    res = Search(obj, space(), settings(generations=3), store=store_path).start()  # no budget at all
    assert len(res) == 3 * 8 and res.header.stop_reason == "generations"


def test_asynchronous_runs_keep_the_budget_too(store_path):
    obj = Counted()
    res = Search(obj, space(), settings(max_evaluations=21, asynchronous=True), store=store_path).start(workers=3)
    assert len(res) == len(obj.calls) == 21 and res.header.stop_reason == "max_evaluations"
    res = Search.resume(store_path, obj, max_evaluations=26, workers=3)
    assert len(res) == len(obj.calls) == 26 and len({r.config_key for r in res.records}) == 26


def test_ask_and_tell_hand_out_no_more_than_the_budget(store_path):
    s = Search(None, space(), settings(max_evaluations=11), store=store_path)
    sizes = []
    while batch := s.ask():
        sizes.append(len(batch))
        if len(sizes) == 3:  # the budget is handed out: asking again before the tell is refused
            with pytest.raises(SearchStateError, match="await tell"):
                s.ask()
        s.tell(batch, [score(c.config) for c in batch])
    assert sizes == [1, 7, 3] and len(s.store) == 11  # the baseline, generation 1's other 7, 3 of generation 2
    assert s.store.header().status == "finished" and s.store.header().stop_reason == "max_evaluations"


def test_a_time_budget_stops_a_run_with_a_slow_objective(store_path):
    obj, events = Counted(delay_s=0.05), []
    t0 = time.monotonic()
    res = Search(obj, space(), settings(time_budget_s=0.6), store=store_path).start(callback=events.append)
    took = time.monotonic() - t0
    assert res.status == "finished" and res.header.stop_reason == "time_budget"
    assert events[-1].reason == "time_budget"
    assert 4 <= len(res) <= 0.6 / 0.05 + 1 < 1 + 50 * 8  # about 12 calls fit, far from the generations' 401
    assert took < 0.6 + 0.05 + 1.0  # no call started after the budget was spent
    assert res.header.run_time_s >= 0.6


def test_the_time_budget_counts_the_whole_run_and_a_larger_one_continues_it(store_path):
    obj = Counted(delay_s=0.05)
    first = Search(obj, space(), settings(time_budget_s=0.4), store=store_path).start()
    n = len(first)
    again = Counted(delay_s=0.05)
    res = Search.resume(store_path, again, time_budget_s=0.4)  # spent already: nothing more runs
    assert again.calls == [] and len(res) == n and res.header.stop_reason == "time_budget"
    res = Search.resume(store_path, again, time_budget_s=first.header.run_time_s + 0.4)
    assert len(res) > n and len(again.calls) == len(res) - n and len({r.config_key for r in res.records}) == len(res)
    assert res.header.stop_reason == "time_budget"


def test_a_paused_runs_time_budget_waits_with_it(store_path):
    """A background Run (the lab's) paused for longer than its budget goes on evaluating once resumed: the budget
    and the stored run time count the time it ran, not the time it waited."""
    obj = Counted(delay_s=0.05)
    run = Run(Search(obj, space(), settings(time_budget_s=0.8), store=store_path))
    run.start()
    run.pause()  # at once: a call in flight finishes, the next waits at the gate
    time.sleep(1.2)
    held = len(obj.calls)
    assert held <= 1 and run.state == "paused" and run.paused_s() >= 1.2
    run.resume()
    res = run.join(timeout=30)
    assert res is not None and res.header.stop_reason == "time_budget"
    assert 3 <= len(obj.calls) - held <= 0.8 / 0.05 + 1  # the budget's calls, after the pause
    assert 0.8 <= res.header.run_time_s < 1.2 + 0.8  # the pause is not run time


def test_a_threaded_run_keeps_the_time_budget(store_path):
    obj = Counted(delay_s=0.05)
    res = Search(obj, space(), settings(time_budget_s=0.5, asynchronous=True), store=store_path).start(workers=2)
    assert res.header.stop_reason == "time_budget" and 2 <= len(res) < 60
    assert len({r.config_key for r in res.records}) == len(res)


@pytest.mark.parametrize("kw", [{"max_evaluations": 0}, {"max_evaluations": -5}, {"max_evaluations": 2.5},
                                {"max_evaluations": True}, {"max_evaluations": "10"}, {"time_budget_s": 0},
                                {"time_budget_s": -1.0}, {"time_budget_s": math.nan}, {"time_budget_s": math.inf},
                                {"time_budget_s": "10m"}, {"time_budget_s": True}])
def test_nonsense_budgets_are_refused_naming_the_rule(kw):
    (name, value), = kw.items()
    with pytest.raises(ConfigurationError, match="must hold") as info:
        SearchConfiguration(generations=3, **kw)
    assert name in str(info.value) and repr(value) in str(info.value)


def test_budgets_are_stored_only_when_given():
    assert "max_evaluations" not in SearchConfiguration(generations=3).to_dict()
    d = SearchConfiguration(generations=3, max_evaluations=40, time_budget_s=1.5).to_dict()
    assert d["max_evaluations"] == 40 and d["time_budget_s"] == 1.5
    assert SearchConfiguration.from_dict(d) == SearchConfiguration(generations=3, max_evaluations=40, time_budget_s=1.5)


KILLED = """
import sys, time
import compileiq_lab.space as ss
from compileiq_lab import Search, SearchConfiguration

def hangs(config):
    time.sleep(600)
    return float(config["x"])

Search(hangs, {"x": ss.range(0, 300)}, SearchConfiguration(generations=100, pool_size=4, time_budget_s=6000),
       store=sys.argv[1]).start()
"""


def test_a_killed_runs_time_is_counted_in_its_time_budget(tmp_path):
    """A process killed mid-run (kill -9: nothing of it runs after), here while its first call hangs, leaves the time
    it ran in the header, so that its resume does not get a whole new time budget."""
    import signal
    import subprocess
    import sys

    script, store = tmp_path / "killed.py", tmp_path / "k.db"
    script.write_text(KILLED)
    proc = subprocess.Popen([sys.executable, str(script), str(store)])
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and (not store.exists() or load_results(str(store)).header.run_time_s < 2):
            time.sleep(0.2)
    finally:
        proc.send_signal(signal.SIGKILL)  # this test's own child, by its PID
        proc.wait(timeout=30)
    header = load_results(str(store)).header
    assert header.status == "running" and writer_pid(store) is None  # as the killed process left it, unwritten
    assert header.run_time_s >= 2.0 and not load_results(str(store)).records  # counted while nothing returned
    spent, n = header.run_time_s, len(load_results(str(store)))
    again = Counted()
    res = Search.resume(str(store), again, time_budget_s=spent)  # the budget the killed run spent: nothing more runs
    assert again.calls == [] and len(res) == n and res.header.stop_reason == "time_budget"


def test_show_says_a_run_left_running_has_no_process_writing_it(tmp_path, capsys):
    """A header that says "running" where no process holds the store's writer lock is a killed run: show says so and
    how to continue it; while a process writes it, that process is named."""
    import os

    from compileiq_lab.cli.main import main

    path = tmp_path / "r.db"
    Search(Counted(), space(), settings(generations=1), store=path).start()
    writer = RunStore(str(path))
    writer.acquire()
    writer.update_header(status="running")  # as a process killed mid-run leaves it
    assert writer_pid(path) == os.getpid()
    main(["show", str(path)])
    assert "no process is running it now" not in capsys.readouterr().out
    writer.close()
    assert writer_pid(path) is None and writer_pid(tmp_path / "never.db") is None
    main(["show", str(path)])
    assert "status running" in (out := capsys.readouterr().out) and "no process is running it now: it was killed" in out


def test_a_run_continued_with_a_spent_setting_says_why_nothing_runs(store_path, caplog):
    first = Search(Counted(), space(), settings(generations=3, max_evaluations=12), store=store_path).start()
    assert len(first) == 12
    for kw, said in [({"max_evaluations": 12}, "it has 12 evaluations, max_evaluations=12: nothing new is evaluated"),
                     ({"max_evaluations": 100, "generations": 1}, "beyond generations=1: nothing new is evaluated; "
                                                                  "give generations=2 to finish that generation"),
                     ({"generations": 3, "time_budget_s": 1e-9}, "its time budget of 1e-09 s is spent")]:
        caplog.clear()
        again = Counted()
        Search.resume(store_path, again, **kw)
        assert again.calls == [] and said in caplog.text, (kw, caplog.text)
    caplog.clear()
    Search.resume(store_path, Counted(), max_evaluations=20, time_budget_s=600)
    assert "nothing new" not in caplog.text
