"""Failures are values: every failure kind is a recorded row and the run goes on."""

from __future__ import annotations

import math
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

import compileiq_lab.space as ss
from compileiq_lab import Search, SearchConfiguration, load_results
from compileiq_lab.exceptions import ConfigurationError

SPACE = {"a": ss.range(0, 19), "b": ss.choice(["p", "q", "r"])}


def _run(objective, store=":memory:", space=SPACE, **cfg):
    cfg.setdefault("generations", 3)
    cfg.setdefault("pool_size", 6)
    return Search(objective, space, SearchConfiguration(**cfg), store=store).start()


@pytest.mark.parametrize(("returned", "status", "reason"), [
    (None, "invalid", "returned None"),
    (math.nan, "invalid", "non-finite"),
    (math.inf, "invalid", "non-finite"),
    ((1.0, 2.0), "invalid", "2 values but num_objectives=1"),
    ("fast", "invalid", "return a number"),
    ([object()], "invalid", "non-number"),
])
def test_bad_returns_are_invalid_rows(returned, status, reason):
    def f(c):
        return returned if c.get("b") == "q" else float(c["a"])

    df = _run(f, baseline=False).get_results()
    bad = df[[p["b"] == "q" for p in df["params"]]]
    assert len(bad) > 0
    assert set(bad["status"]) == {status}
    assert all(reason in e for e in bad["error"])
    assert all(math.isnan(s) for s in bad["score_1"])
    assert (df[[p["b"] != "q" for p in df["params"]]]["status"] == "ok").all()


def test_raising_objective_is_error_row_with_traceback():
    def f(c):
        if c["a"] % 2:
            raise RuntimeError(f"odd a={c['a']}")
        return c["a"]

    res = _run(f, baseline=False)
    df = res.get_results(detail=True)
    err = df[df["status"] == "error"]
    assert len(err) > 0 and all(e.startswith("RuntimeError: odd a=") for e in err["error"])
    assert all("Traceback" in d["traceback"] for d in err["detail"])
    assert res.get_best_result()["params"]["a"] % 2 == 0


def test_every_candidate_of_first_generation_failing_keeps_going():
    calls = []

    def f(c):
        calls.append(c)
        if len(calls) <= 6:
            raise ValueError("toolchain not ready")
        return c["a"]

    res = _run(f, generations=4, baseline=False)
    df = res.get_results()
    assert (df[df["generation"] == 1]["status"] == "error").all()
    assert len(df) == len(calls) == 24
    assert (df[df["generation"] > 1]["status"] == "ok").any()


def test_an_objective_whose_every_answer_is_invalid_is_warned_of_after_the_first_generation(caplog):
    with caplog.at_level("WARNING", logger="compileiq_lab"):
        res = _run(lambda c: (c["a"], 1.0), generations=2, baseline=False)
    assert {r.status for r in res.records} == {"invalid"}  # still recorded, the run goes on
    said = [m for m in caplog.messages if "was invalid" in m]
    assert len(said) == 1 and "every evaluation so far (6) was invalid, first: objective returned 2 values" in said[0]
    caplog.clear()
    with caplog.at_level("WARNING", logger="compileiq_lab"):
        _run(lambda c: c["a"] if c["b"] == "p" else None, generations=2, baseline=False)
    assert not [m for m in caplog.messages if "was invalid" in m]  # some answered: the configs are at fault


@pytest.mark.parametrize(("constraint", "said"), [
    (lambda c: c["a"] == 3, "returned False (bool)"),  # a yes/no test would rule out every config
    (lambda c: 1 / 0 if c["a"] == 3 else None, "the constraint raised ZeroDivisionError"),
])
def test_a_constraint_that_answers_other_than_a_reason_or_none_is_refused_naming_the_config(constraint, said):
    with pytest.raises(ConfigurationError, match="for (the config )?{'a': ") as got:
        Search(lambda c: c["a"], SPACE, SearchConfiguration(generations=2, pool_size=4), store=":memory:",
               constraint=constraint).start()
    assert said in str(got.value)


def test_a_constraint_of_empty_reasons_allows_and_one_not_callable_is_refused():
    res = Search(lambda c: c["a"], SPACE, SearchConfiguration(generations=2, pool_size=4, baseline=False),
                 store=":memory:", constraint=lambda c: "" if c["a"] < 18 else "too big").start()
    assert all(r.params["a"] < 18 for r in res.records) and len(res.records) == 8
    with pytest.raises(ConfigurationError, match="constraint must be callable .* but got 'a>3'"):
        Search(lambda c: c["a"], SPACE, SearchConfiguration(generations=2), constraint="a>3")


def test_multi_objective_wrong_arity_is_invalid():
    res = _run(lambda c: (c["a"],), num_objectives=2, baseline=False)
    assert set(res.get_results()["status"]) == {"invalid"}
    assert res.pareto_front() == []


def test_baseline_row_is_generation_zero_and_normalises():
    # knock-out-able parameters (absent = the default): the baseline is the empty config
    knockable = {"a": ss.range(0, 19, knockout_prob=0.3), "b": ss.choice(["p", "q", "r"], knockout_prob=0.3)}
    res = _run(lambda c: float(c.get("a", 10)) + 1.0, space=knockable)
    df = res.get_results(normalize=True)
    base = df.iloc[0]
    assert base["is_baseline"] and base["generation"] == 0 and base["params"] == {}
    assert base["score_1"] == 11.0
    assert (df["norm_score_1"] * 11.0 - df["score_1"]).abs().max() < 1e-12


def test_timeout_kills_the_hung_call_and_goes_on():
    def f(c):
        if c["a"] == 3:
            time.sleep(60)
        return c["a"]

    space = {"a": ss.range(0, 5)}
    t0 = time.monotonic()
    res = Search(f, space, SearchConfiguration(generations=3, pool_size=6, timeout_s=0.5, baseline=False),
                 store=":memory:").start()
    df = res.get_results()
    assert time.monotonic() - t0 < 20
    hung = df[[p["a"] == 3 for p in df["params"]]]
    assert list(hung["status"]) == ["timeout"] and "its per-call limit of 0.5 s" in hung["error"].iloc[0]
    assert (df[[p["a"] != 3 for p in df["params"]]]["status"] == "ok").all()
    assert res.get_best_result()["params"] == {"a": 0}


def test_crash_in_worker_is_crashed_row():
    def f(c):
        if c["a"] == 2:
            os._exit(9)
        return c["a"]

    res = Search(f, {"a": ss.range(0, 4)}, SearchConfiguration(generations=2, pool_size=5, timeout_s=10,
                 baseline=False), store=":memory:").start()
    df = res.get_results()
    crashed = df[df["status"] == "crashed"]
    assert [p["a"] for p in crashed["params"]] == [2] and "exit code 9" in crashed["error"].iloc[0]
    assert (df["status"] != "crashed").sum() == 4


def test_unpicklable_objective_with_timeout_explains_the_fix():
    import threading

    lock = threading.Lock()
    with pytest.raises(ConfigurationError, match="picklable.*timeout_s=None"):
        Search(lambda c, _l=lock: 1.0, SPACE, SearchConfiguration(generations=1, timeout_s=1),
               store=":memory:").start()


def test_keyboard_interrupt_stops_cleanly_keeping_rows(store_path):
    n = {"calls": 0}

    def f(c):
        n["calls"] += 1
        if n["calls"] == 9:
            raise KeyboardInterrupt
        return c["a"]

    res = _run(f, store=store_path, generations=5)
    assert res.status == "interrupted"
    assert len(res) == 8
    stored = load_results(store_path)
    assert len(stored) == 8 and stored.status == "interrupted"


SCRIPT_HANG = textwrap.dedent("""
    import sys, time
    import compileiq_lab.space as ss
    from compileiq_lab import Search, SearchConfiguration

    def hang(config):          # defined in __main__, like a notebook cell
        if config["a"] == 1:
            time.sleep(3600)
        return config["a"]

    r = Search(hang, {"a": ss.range(0, 3)},
               SearchConfiguration(generations=2, pool_size=4, timeout_s=0.5, baseline=False),
               store=sys.argv[1]).start()
    print(sorted(r.get_results()["status"]))
""")


def test_hung_call_does_not_keep_process_alive(tmp_path):
    script = tmp_path / "hang.py"
    script.write_text(SCRIPT_HANG)
    t0 = time.monotonic()
    out = subprocess.run([sys.executable, str(script), str(tmp_path / "h.db")], capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "'timeout'" in out.stdout and out.stdout.count("'ok'") == 3
    assert time.monotonic() - t0 < 30


SCRIPT_SIGINT = textwrap.dedent("""
    import sys, time
    import compileiq_lab.space as ss
    from compileiq_lab import Search, SearchConfiguration

    def slow(config):
        print("call", flush=True)
        time.sleep(0.2)
        return config["a"]

    r = Search(slow, {"a": ss.range(0, 99)}, SearchConfiguration(generations=50, pool_size=4),
               store=sys.argv[1]).start()
    print("status", r.status, len(r), flush=True)
""")


@pytest.mark.parametrize("timeout", [None, 5.0])
def test_sigint_stops_cleanly(tmp_path, timeout):
    script = tmp_path / "slow.py"
    src = SCRIPT_SIGINT if timeout is None else SCRIPT_SIGINT.replace("pool_size=4)", "pool_size=4, timeout_s=5.0)")
    script.write_text(src)
    db = tmp_path / "s.db"
    proc = subprocess.Popen([sys.executable, str(script), str(db)], stdout=subprocess.PIPE, text=True)
    lines = []
    while len(lines) < 4 and (line := proc.stdout.readline()):
        lines.append(line)
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=30)
    assert proc.returncode == 0
    status_line = [x for x in out.splitlines() if x.startswith("status")][-1]
    _, status, n = status_line.split()
    assert status == "interrupted" and int(n) >= 3
    assert len(load_results(str(db))) == int(n)
