"""Edge cases found in review: value types, float grids, crowded spaces, shared stores, odd returns."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

import pytest

import compileiq_lab.space as ss
from compileiq_lab import Measurement, Search, SearchConfiguration
from compileiq_lab.exceptions import (
    ConfigurationError,
    SearchStateError,
    SpaceDefinitionError,
    StoreError,
    StoreMismatchError,
)


def test_tuple_values_work_on_a_file_store_and_resume_with_lists(store_path):
    space = {"opts": ss.choice([("-O2", "-g"), ("-O3",)]), "lvl": ss.range(0, 3)}
    seen = []

    def f(c):
        seen.append(c.get("opts"))
        return len(c.get("opts", [])) + c.get("lvl", 0)

    Search(f, space, SearchConfiguration(generations=1, pool_size=4), store=store_path).start()
    res = Search.resume(store_path, f, generations=3)
    assert res.status in ("finished", "exhausted")
    assert all(isinstance(o, list) for o in seen if o is not None)


def test_float_range_below_resolution_is_rejected():
    with pytest.raises(SpaceDefinitionError, match="distinct floats"):
        ss.range(1000.0, 1000.0000001, 1e-9)
    with pytest.raises(SpaceDefinitionError, match="step <= end - start"):
        ss.range(1, 2, step=5)


def test_int_and_float_ranges_are_different_spaces(store_path):
    Search(lambda c: c["x"], {"x": ss.range(1, 9)}, SearchConfiguration(generations=1), store=store_path).start()
    with pytest.raises(StoreMismatchError, match="range\\(start=1, end=9, step=1\\) vs range\\(start=1.0"):
        Search(lambda c: c["x"], {"x": ss.range(1.0, 9.0)}, SearchConfiguration(generations=1), store=store_path)
    with pytest.raises(StoreMismatchError, match="another order"):
        Search(lambda c: 1.0, {"y": ss.range(1, 9), "x": ss.range(1, 9)}, SearchConfiguration(generations=1),
               store=str(store_path) + "2").start() and None
        Search(lambda c: 1.0, {"x": ss.range(1, 9), "y": ss.range(1, 9)}, SearchConfiguration(generations=1),
               store=str(store_path) + "2")


@pytest.mark.parametrize("strategy", ["ga", "nsga2", "random"])
def test_crowded_space_is_evaluated_completely_before_exhausted(strategy):
    space = {"a": ss.range(0, 4), "b": ss.range(0, 4), "c": ss.range(0, 4)}

    def f(c):
        return (float(c["a"] + c["b"] + c["c"]), float(c["a"])) if strategy == "nsga2" else float(c["a"])

    res = Search(f, space, SearchConfiguration(generations=500, num_objectives=2 if strategy == "nsga2" else 1,
                 strategy=strategy, baseline=False), store=":memory:").start()
    assert res.status == "exhausted" and len(res) == 125


def test_objective_mutating_its_config_cannot_corrupt_the_run():
    space = {"flags": ss.choice([["-O2"], ["-O3", "-ffast-math"]]), "n": ss.range(0, 9)}
    sp = Search(lambda c: c["flags"].append("-o") or len(c["flags"]) + c["n"], space,
                SearchConfiguration(generations=4, pool_size=4), store=":memory:")
    res = sp.start()
    assert sp.space["flags"].values == (["-O2"], ["-O3", "-ffast-math"])
    assert all(p["flags"] in (["-O2"], ["-O3", "-ffast-math"]) for p in res.get_results()["params"] if p)


def test_second_writer_is_refused_while_a_run_writes(store_path):
    errors = []

    def f(c):
        if not errors:
            try:
                Search(f, {"a": ss.range(0, 9)}, SearchConfiguration(generations=2), store=store_path)
            except StoreError as exc:
                errors.append(str(exc))
        return c.get("a", 0)

    Search(f, {"a": ss.range(0, 9)}, SearchConfiguration(generations=2), store=store_path).start()
    assert errors and f"process {os.getpid()}" in errors[0] and "load_results" in errors[0]
    # once the run ended, the store can be continued
    assert Search.resume(store_path, f, generations=3).status in ("finished", "exhausted")


def test_huge_number_is_invalid_not_a_crash():
    res = Search(lambda c: 10**400 if c.get("a") == 2 else c.get("a", 0), {"a": ss.range(0, 4)},
                 SearchConfiguration(generations=3, pool_size=5), store=":memory:").start()
    bad = res.get_results().query("status != 'ok'")
    assert [p["a"] for p in bad["params"]] == [2] and set(bad["status"]) == {"invalid"}


def test_worker_keeps_scores_when_detail_is_unpicklable():
    def f(c):
        return Measurement("ok", scores=(float(c["a"]),), detail={"lock": threading.Lock()})

    res = Search(f, {"a": ss.range(0, 3)}, SearchConfiguration(generations=1, pool_size=4, timeout_s=10,
                 baseline=False), store=":memory:").start()
    df = res.get_results(detail=True)
    assert set(df["status"]) == {"ok"} and all("lock" in d["lock"] for d in df["detail"])


def test_ask_tell_and_stop_misuse():
    s = Search(lambda c: 1.0, {"a": ss.range(0, 19, default=0)}, SearchConfiguration(generations=2), store=":memory:")
    for bad in (0, -1, 2.5, True):
        with pytest.raises(ConfigurationError, match="n is None or an int >= 1"):
            s.ask(bad)
    base = s.ask()
    s.tell(base, [1.0])
    batch = s.ask()
    with pytest.raises(SearchStateError, match="same candidate twice"):
        s.tell([batch[0], batch[0]], [1.0, 2.0])
    assert len(s.results) == 1  # nothing half-recorded
    s.tell(batch, [1.0] * len(batch))
    s.stop()  # nothing running: must not end the next start() at once
    assert s.start().status == "finished"


def test_config_dict_typo_and_folder_store_explain_the_fix(tmp_path):
    with pytest.raises(ConfigurationError, match="unknown SearchConfiguration keys \\['generation'\\]"):
        Search(lambda c: 1.0, {"a": ss.range(0, 9)}, {"generation": 3}, store=":memory:")
    with pytest.raises(StoreError, match="is a folder; pass a .db file in it"):
        Search(lambda c: 1.0, {"a": ss.range(0, 9)}, {"generations": 3}, store=str(tmp_path))


ORPHAN = textwrap.dedent("""
    import subprocess, sys, time
    import compileiq_lab.space as ss
    from compileiq_lab import Search, SearchConfiguration

    PIDFILE = sys.argv[2]  # read here: the objective runs in a worker with its own argv

    def spawn(config):
        child = subprocess.Popen(["sleep", "300"])
        with open(PIDFILE, "w") as fh:
            fh.write(str(child.pid))
        time.sleep(300)
        return 1.0

    Search(spawn, {"a": ss.range(0, 3)}, SearchConfiguration(generations=1, timeout_s=600, baseline=False),
           store=sys.argv[1]).start()
""")


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split()[2] != "Z"
    except FileNotFoundError:
        return False


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_killing_the_run_ends_the_objectives_children(tmp_path):
    script, pidfile = tmp_path / "orphan.py", tmp_path / "child.pid"
    script.write_text(ORPHAN)
    proc = subprocess.Popen([sys.executable, str(script), str(tmp_path / "o.db"), str(pidfile)])
    deadline = time.monotonic() + 60
    while not (pidfile.exists() and pidfile.read_text()) and time.monotonic() < deadline:
        time.sleep(0.05)
    child = int(pidfile.read_text())
    assert _alive(child)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=10)
    deadline = time.monotonic() + 10
    while _alive(child) and time.monotonic() < deadline:
        time.sleep(0.1)
    alive = _alive(child)
    if alive:
        os.kill(child, signal.SIGKILL)
    assert not alive


@pytest.mark.parametrize("timeout_s", [None, 30.0])
def test_an_objective_raising_a_base_exception_is_its_row_in_process_and_in_a_worker(timeout_s):
    """asyncio.CancelledError and timeout libraries' exceptions derive from BaseException: a row each, in the run's
    process as in a worker process, not a run that stops (in process) or a crashed row (in a worker)."""
    import asyncio

    def objective(config):
        if config["x"] % 2:
            raise asyncio.CancelledError("gave up")
        return float(config["x"])

    res = Search(objective, {"x": ss.range(1, 16)},
                 SearchConfiguration(generations=2, pool_size=4, timeout_s=timeout_s), store=":memory:").start()
    assert res.status == "finished"
    odd = [r for r in res.records if r.params["x"] % 2]
    assert odd and all(r.status == "error" and "CancelledError: gave up" in r.error for r in odd)


@pytest.mark.parametrize("settings", [{}, {"baseline_in_pool": False}, {"asynchronous": True}, {"baseline": False}])
def test_a_space_of_one_config_evaluates_it_once_and_ends_exhausted(settings):
    res = Search(lambda c: 1.0, {"opt": ss.literal("-O3")}, SearchConfiguration(generations=3, **settings),
                 store=":memory:").start()
    assert res.status == "exhausted" and [r.params for r in res.records] == [{"opt": "-O3"}]


@pytest.mark.parametrize("asynchronous", [False, True])
def test_a_space_evaluated_completely_in_the_last_generation_ends_exhausted(asynchronous):
    cfg = SearchConfiguration(generations=1, pool_size=8, seed=0, asynchronous=asynchronous)
    res = Search(lambda c: float(c["opt"]), {"opt": ss.choice([0, 1, 2, 3], default=0)}, cfg, store=":memory:").start()
    assert len(res.records) == 4 and res.status == "exhausted" and res.header.stop_reason == ""


def test_failures_whose_message_cannot_be_stored_or_printed_are_still_rows(store_path):
    undecodable = b"ptxas fatal : Unresolved extern function in /home/ren\xe9/k.cu".decode("utf-8", "surrogateescape")

    class Unprintable(Exception):
        def __str__(self):
            raise AttributeError("no returncode")

    def objective(config):
        if config["o"] == 0:
            raise RuntimeError(undecodable)
        if config["o"] == 1:
            raise Unprintable()
        return Measurement("ok", (float(config["o"]),), elapsed_s=float("nan"))  # a time that is not a number

    res = Search(objective, {"o": ss.choice([0, 1, 2, 3])}, SearchConfiguration(generations=2, pool_size=4),
                 store=store_path).start()
    by = {r.params["o"]: r for r in res.records}
    assert sorted(by) == [0, 1, 2, 3]
    assert by[0].status == "error" and "Unresolved extern function in /home/ren" in by[0].error
    assert by[1].status == "error" and "Unprintable: <message not printable: AttributeError" in by[1].error
    assert by[2].status == "ok" and by[2].elapsed_s >= 0  # the call's own time, measured
    from compileiq_lab.store import load_results

    assert [r.error for r in load_results(store_path).records] == [r.error for r in res.records]  # as stored


def test_tell_checks_the_evaluation_times_before_recording_any():
    space = {"O": ss.choice([0, 1, 2, 3], default=2), "r": ss.range(16, 64, 16, knockout_prob=0.5)}
    s = Search(None, space, SearchConfiguration(generations=3, pool_size=4), store=":memory:")
    s.tell(s.ask(), [1.0])
    batch = s.ask()
    with pytest.raises(ConfigurationError, match=r"one time per candidate.*got 2 times for 3 candidates"):
        s.tell(batch, [1.0] * 3, elapsed_s=[0.1, 0.1])
    for bad in (float("nan"), -1.0, "slow"):
        with pytest.raises(ConfigurationError, match=r"finite number of seconds >= 0.*elapsed_s\[1\] is"):
            s.tell(batch, [1.0] * 3, elapsed_s=[0.1, bad, 0.1])
    assert len(s.results) == 1 and len(s.engine.awaiting()) == 3  # nothing half-told
    s.tell(batch, [1.0] * 3, elapsed_s=[0.1, 0.2, 0.3])
    assert [r.elapsed_s for r in s.results.records[1:]] == [0.1, 0.2, 0.3]


def test_an_objective_returning_an_iterator_is_read_once_and_its_failure_is_a_row():
    def objective(config):
        if config["o"] == 0:
            return (1 / 0 for _ in [1])  # fails while it is read
        return (float(v) for v in [config["o"]])

    res = Search(objective, {"o": ss.choice([0, 1, 2, 3])}, SearchConfiguration(generations=2, pool_size=4),
                 store=":memory:").start()
    by = {r.params["o"]: r for r in res.records}
    assert by[0].status == "error" and "ZeroDivisionError" in by[0].error
    assert [by[o].scores for o in (1, 2, 3)] == [[1.0], [2.0], [3.0]]


def test_warm_start_configs_outside_the_space_are_left_out_in_one_line(caplog: pytest.LogCaptureFixture) -> None:
    space = {"x": ss.range(1, 9)}
    front = [{"x": 2}, {"x": 3, "y": 1}, {"x": 4, "y": 2}, {"x": 50}]  # two with a control the space lacks, one off
    settings = SearchConfiguration(generations=1, pool_size=4, seed=0, warm_start=front)
    results = Search(lambda c: float(c["x"]), space, settings, store=":memory:").start()
    said = [r.getMessage() for r in caplog.records if "left out: it is not a point of this space" in r.getMessage()]
    assert len(said) == 1 and "(and 2 more warm-start configs" in said[0]
    assert {"x": 2} in [r.params for r in results.records]  # the config the space takes starts the run
