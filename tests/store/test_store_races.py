"""Run store under races: two creators of one new file, a refused second writer, a stale lock."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from compileiq_lab import Search, SearchConfiguration, load_results
from compileiq_lab.exceptions import StoreError
from compileiq_lab.store.sqlite import RunStore
from compileiq_lab.testing import FlagProblem

PROBLEM = FlagProblem(n_flags=6, n_levels=2, seed=3)

_RUNNER = textwrap.dedent("""
    import json, sys, time
    from compileiq_lab import Search, SearchConfiguration
    from compileiq_lab.exceptions import CompileIQLabError
    from compileiq_lab.testing import FlagProblem

    store, start_at, out = sys.argv[1], float(sys.argv[2]), sys.argv[3]
    problem = FlagProblem(n_flags=6, n_levels=2, seed=3)
    while time.time() < start_at:
        time.sleep(0.0005)
    try:
        res = Search(problem, problem.space(), SearchConfiguration(generations=3, pool_size=6, seed=1),
                     store=store).start()
        report = {"ok": True, "rows": len(res), "status": res.status}
    except CompileIQLabError as exc:
        report = {"ok": False, "error": str(exc)}
    with open(out, "w") as f:
        json.dump(report, f)
""")


def test_two_processes_creating_one_store_never_lose_rows(tmp_path):
    """Each pair of processes starts the same new store at one moment; whoever reports success finds its rows
    in the file, and whoever loses says so."""
    script = tmp_path / "runner.py"
    script.write_text(_RUNNER)
    trials = 6
    procs = []
    start_at = time.time() + 6.0  # after every interpreter has imported the package
    for t in range(trials):
        for who in range(2):
            procs.append(subprocess.Popen([sys.executable, str(script), str(tmp_path / f"s{t}.db"), str(start_at),
                                           str(tmp_path / f"out{t}-{who}.json")]))
    for p in procs:
        assert p.wait(timeout=180) == 0
    for t in range(trials):
        reports = [json.loads((tmp_path / f"out{t}-{who}.json").read_text()) for who in range(2)]
        stored = len(load_results(str(tmp_path / f"s{t}.db")))
        winners = [r for r in reports if r["ok"]]
        assert winners, reports
        for r in winners:  # a run that says it finished finds every row in the file
            assert r["status"] == "finished" and stored >= r["rows"] > 0, (t, reports, stored)
        for r in reports:
            if not r["ok"]:
                assert "another run" in r["error"], r


def test_creating_over_a_file_that_appeared_keeps_the_first(tmp_path, monkeypatch):
    """The window the race hit: a second creator that saw no file when the first one renamed its file into place."""
    path = tmp_path / "s.db"
    first = Search(PROBLEM, PROBLEM.space(), SearchConfiguration(generations=2, pool_size=4), store=path)
    first.start()
    rows = len(first.results)
    first.close()
    real_exists = Path.exists
    monkeypatch.setattr(Path, "exists", lambda self: False if self == path else real_exists(self))
    second = Search(PROBLEM, PROBLEM.space(), SearchConfiguration(generations=2, pool_size=4), store=path)
    monkeypatch.undo()
    assert len(second.results) == rows  # the first run's rows are there, to be replayed
    second.close()
    assert len(load_results(str(path))) == rows


def test_a_run_opened_before_another_wrote_continues_from_its_rows(tmp_path):
    """Two searches opened on one new store; the first runs to its end, then the second starts: it replays the
    first one's rows (the same run) instead of writing over them."""
    path = tmp_path / "s.db"
    cfg = SearchConfiguration(generations=3, pool_size=4, seed=5)
    first = Search(PROBLEM, PROBLEM.space(), cfg, store=path)
    second = Search(PROBLEM, PROBLEM.space(), cfg, store=path)
    done = first.start()
    calls = []
    second.objective_function = lambda c: calls.append(c) or PROBLEM(c)
    again = second.start()
    assert again.status == "finished" and not calls  # nothing evaluated twice
    assert len(again) == len(done) == len(load_results(str(path)))
    first.close()
    second.close()


def test_refused_second_writer_leaves_the_header_alone(tmp_path):
    path = tmp_path / "s.db"
    cfg = SearchConfiguration(generations=8, pool_size=4, seed=2)
    running = Search(PROBLEM, PROBLEM.space(), cfg, store=path)
    running.store.acquire()  # as during start()
    with pytest.raises(StoreError, match="another run"):
        Search(PROBLEM, PROBLEM.space(), SearchConfiguration(generations=30, pool_size=4, seed=2), store=path)
    assert load_results(str(path)).header.config["generations"] == 8
    running.close()


def test_store_in_an_unwritable_place_says_where_and_why(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    with pytest.raises(StoreError, match="cannot write the run store") as info:
        Search(PROBLEM, PROBLEM.space(), SearchConfiguration(generations=1), store=blocker / "x.db")
    assert str(blocker) in str(info.value)
    with pytest.raises(StoreError, match="cannot write the run store"):
        RunStore("/proc/compileiq-lab-test.db", header=_header())


def test_a_folder_given_as_the_store_is_refused_and_left_as_it_was(tmp_path):
    folder = tmp_path / "runs"
    folder.mkdir()
    with pytest.raises(StoreError, match="a run store is a file, but .* is a folder; pass a .db file in it"):
        Search(PROBLEM, PROBLEM.space(), SearchConfiguration(generations=1), store=folder)
    with pytest.raises(StoreError, match="is a folder"):
        load_results(str(folder))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["runs"] and not list(folder.iterdir())  # no lock file


def _header():
    from compileiq_lab.run.start import new_header
    from compileiq_lab.space.space import SearchSpace

    return new_header(SearchSpace(PROBLEM.space()), SearchConfiguration(generations=1), "f")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="flock")
def test_a_writer_starting_while_its_store_is_probed_waits_out_the_probe(tmp_path: Path) -> None:
    """show's probe (writer_pid) holds the writer lock shared for a moment; a run starting in that moment takes it
    once the probe lets go, rather than being refused as if another run wrote the store."""
    import fcntl
    import os
    import threading

    from compileiq_lab.store import writer_pid

    path = tmp_path / "r.db"
    Search(PROBLEM, PROBLEM.space(), SearchConfiguration(generations=1), store=path).close()
    fd = os.open(str(path) + ".lock", os.O_RDONLY)
    fcntl.flock(fd, fcntl.LOCK_SH)  # as writer_pid holds it
    threading.Timer(0.03, os.close, [fd]).start()  # ... and lets go
    store = RunStore(str(path))
    store.acquire()  # within the probe's moment: waited out, not refused
    assert writer_pid(path) == os.getpid()
    store.close()
    assert writer_pid(path) is None
    held = os.open(str(path) + ".lock", os.O_RDONLY)
    fcntl.flock(held, fcntl.LOCK_SH)  # a holder that does not let go is still refused
    try:
        with pytest.raises(StoreError, match="is being written by another run"):
            RunStore(str(path)).acquire()
    finally:
        os.close(held)


def test_a_link_to_a_store_being_written_takes_the_same_lock(tmp_path: Path) -> None:
    path = tmp_path / "run.db"
    Search(PROBLEM, PROBLEM.space(), SearchConfiguration(generations=1), store=path).close()
    (tmp_path / "latest.db").symlink_to("run.db")
    (tmp_path / "linked").symlink_to(tmp_path, target_is_directory=True)
    writer = RunStore(str(path))
    writer.acquire()
    try:
        for name in (tmp_path / "latest.db", tmp_path / "linked" / "run.db"):
            with pytest.raises(StoreError, match="is being written by another run"):
                RunStore(str(name)).acquire()
    finally:
        writer.close()
    other = RunStore(str(tmp_path / "latest.db"))
    other.acquire()  # free again: the link's writer is the only one
    other.close()
