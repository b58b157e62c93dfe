"""Run store: rows committed as they happen, header checks, read-only loading, kill -9 and resume."""

from __future__ import annotations

import json
import random
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

import compileiq_lab.space as ss
from compileiq_lab import Search, SearchConfiguration, load_results
from compileiq_lab.exceptions import StoreError, StoreMismatchError
from compileiq_lab.testing import FlagProblem

PROBLEM = FlagProblem(n_flags=8, n_levels=2, seed=5)
CFG = dict(generations=6, pool_size=8, seed=11)


def _reference() -> list[dict]:
    res = Search(PROBLEM, PROBLEM.space(), SearchConfiguration(**CFG), store=":memory:").start()
    return list(res.get_results()["params"])


def test_each_row_is_committed_before_the_next_call(store_path):
    seen_counts = []

    def f(c):
        # another connection sees every earlier evaluation already committed
        with sqlite3.connect(f"file:{store_path}?mode=ro", uri=True) as conn:
            seen_counts.append(conn.execute("SELECT COUNT(*) FROM evals").fetchone()[0])
        return PROBLEM(c)

    Search(f, PROBLEM.space(), SearchConfiguration(generations=3, pool_size=5), store=store_path).start()
    assert seen_counts == list(range(len(seen_counts)))


def test_default_store_is_a_new_file_under_compileiq_runs(tmp_path):
    r1 = Search(PROBLEM, PROBLEM.space(), SearchConfiguration(generations=1)).start()
    r2 = Search(PROBLEM, PROBLEM.space(), SearchConfiguration(generations=1)).start()
    p1, p2 = Path(r1.store_path), Path(r2.store_path)
    assert p1 != p2 and p1.parent.name == p2.parent.name == "compileiq_runs"
    assert p1.is_file() and len(load_results(str(p1))) == len(r1)


def test_memory_store_writes_nothing(tmp_path):
    Search(PROBLEM, PROBLEM.space(), SearchConfiguration(generations=1), store=":memory:").start()
    assert not (tmp_path / "compileiq_runs").exists()


def test_header_records_space_config_seed_and_schema(store_path):
    Search(PROBLEM, PROBLEM.space(), SearchConfiguration(**CFG), store=store_path).start()
    h = load_results(store_path).header
    assert h.schema_version == 1 and h.config["seed"] == 11 and h.status == "finished"
    assert set(h.space) == set(PROBLEM.space())
    assert h.space["L0"] == {"kind": "range", "start": 0, "end": 15, "step": 1, "knockout_prob": 0.5,
                                "seed_low": None, "seed_high": None}


def test_different_space_is_refused_naming_both(store_path):
    Search(PROBLEM, {"a": ss.range(0, 9)}, SearchConfiguration(generations=1), store=store_path).start()
    with pytest.raises(StoreMismatchError) as err:
        Search(PROBLEM, {"a": ss.range(0, 5)}, SearchConfiguration(generations=1), store=store_path)
    msg = str(err.value)
    assert "range(start=0, end=9, step=1)" in msg and "range(start=0, end=5, step=1)" in msg
    assert "new store path" in msg


def test_different_seed_is_refused(store_path):
    Search(PROBLEM, PROBLEM.space(), SearchConfiguration(generations=1, seed=1), store=store_path).start()
    with pytest.raises(StoreMismatchError, match="seed: stored 1 vs given 2"):
        Search(PROBLEM, PROBLEM.space(), SearchConfiguration(generations=1, seed=2), store=store_path)
    with pytest.raises(StoreMismatchError, match=r"\(objectives: stored score_1 vs given a,b\); .* tune's "
                                                 r"--generations, --timeout, --max-evals and --time-budget"):
        Search(PROBLEM, PROBLEM.space(), SearchConfiguration(generations=1, seed=1, num_objectives=2,
                                                             objective_names=["a", "b"]), store=store_path)


def test_load_results_is_read_only_and_rejects_non_stores(store_path, tmp_path):
    Search(PROBLEM, PROBLEM.space(), SearchConfiguration(generations=2), store=store_path).start()
    res = load_results(store_path)
    assert len(res) > 0 and res.get_best_result() is not None
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"not a database at all" * 100)
    with pytest.raises(StoreError, match="not a compileiq-lab run store"):
        load_results(str(junk))
    with pytest.raises(StoreError, match="does not exist"):
        load_results(str(tmp_path / "missing.db"))


def test_resume_to_more_generations_extends_the_same_trajectory(store_path):
    calls = []

    def f(c):
        calls.append(c)
        return PROBLEM(c)

    Search(f, PROBLEM.space(), SearchConfiguration(**{**CFG, "generations": 3}), store=store_path).start()
    first = len(calls)
    res = Search.resume(store_path, f, generations=6)
    assert list(res.get_results()["params"]) == _reference()
    assert len(calls) == len(res) and first < len(calls)


@pytest.mark.parametrize("first, then", [(4, 1), (1, 3)])
def test_a_run_resumed_with_other_workers_replays_its_rows_and_keeps_its_budget(store_path, first, then):
    # one objective: a generation is picked as many at a time as the run has slots, each part with the results
    # before it; a resumed run replays its stored rows as its first start() asked them, then asks `then` at a time
    calls: list[dict] = []

    def f(c):
        calls.append(c)
        return PROBLEM(c)

    cfg = {**CFG, "pool_size": 4}
    Search(f, PROBLEM.space(), SearchConfiguration(**{**cfg, "generations": 3}), store=store_path).start(workers=first)
    stored = [r.config_key for r in load_results(store_path).records]
    calls.clear()
    res = Search.resume(store_path, f, generations=6, workers=then)
    keys = [r.config_key for r in res.records]
    assert len(keys) == len(set(keys)) == 6 * 4 and keys[:len(stored)] == stored  # the baseline one of generation 1's
    assert len(calls) == len(keys) - len(stored)  # the stored rows replayed, none asked again
    assert [r.generation for r in res.records] == [0] + [1] * 3 + [g for g in range(2, 7) for _ in range(4)]
    assert len(Search.resume(store_path, f, workers=first)) == len(res)  # a finished run's budget is spent, and
    assert len(Search.resume(store_path, f, workers=2)) == len(res)  # its rows replay whatever the workers


SCRIPT = textwrap.dedent("""
    import os, signal, sys, time
    from compileiq_lab import Search, SearchConfiguration
    from compileiq_lab.testing import FlagProblem

    PROBLEM = FlagProblem(n_flags=8, n_levels=2, seed=5)
    kill_at, delay = int(sys.argv[2]), float(sys.argv[3])
    n = 0

    def f(config):
        global n
        n += 1
        if n == kill_at:
            os.kill(os.getpid(), signal.SIGKILL)
        time.sleep(delay)
        return PROBLEM(config)

    Search(f, PROBLEM.space(), SearchConfiguration(generations=6, pool_size=8, seed=11),
           store=sys.argv[1]).start()
""")


def _resume_and_check(db: Path) -> None:
    before = load_results(str(db))
    stored_keys = {repr(sorted(p.items())) for p in before.get_results()["params"]}
    calls = []

    def f(c):
        calls.append(repr(sorted(c.items())))
        return PROBLEM(c)

    res = Search.resume(str(db), f)
    assert res.status == "finished"
    assert list(res.get_results()["params"]) == _reference()           # nothing lost or reordered
    assert not stored_keys & set(calls)                                 # nothing evaluated twice
    assert len(calls) == len(res) - len(before)
    assert list(res.get_results()["eval_id"]) == list(range(len(res)))


@pytest.mark.parametrize("kill_at", [1, 2, 9, 17, 30])
def test_kill_9_at_a_chosen_call_then_resume(tmp_path, kill_at):
    script = tmp_path / "victim.py"
    script.write_text(SCRIPT)
    db = tmp_path / "victim.db"
    out = subprocess.run([sys.executable, str(script), str(db), str(kill_at), "0"], capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == -9
    assert len(load_results(str(db))) == kill_at - 1
    _resume_and_check(db)


@pytest.mark.parametrize("attempt", range(3))
def test_kill_9_at_a_random_moment_then_resume(tmp_path, attempt):
    script = tmp_path / "victim.py"
    script.write_text(SCRIPT)
    db = tmp_path / "victim.db"
    proc = subprocess.Popen([sys.executable, str(script), str(db), "0", "0.002"])
    deadline = time.monotonic() + 30
    while not db.exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(random.Random(attempt).uniform(0.0, 0.15))
    proc.kill()
    proc.wait(timeout=30)
    _resume_and_check(db)


def test_new_store_file_appears_with_its_header(tmp_path):
    from compileiq_lab.store import RunHeader, RunStore

    path = tmp_path / "sub" / "new.db"
    store = RunStore(path, header=RunHeader(schema_version=1, space={"a": 1}))
    assert sorted(p.name for p in path.parent.iterdir() if p.name.endswith(".tmp")) == []
    assert load_results(str(path)).header.space == {"a": 1}
    store.close()


@pytest.mark.parametrize("where", ["memory", "file"])
def test_a_config_is_stored_once_in_memory_and_on_disk(where, store_path):
    from compileiq_lab.store import EvalRecord, RunStore

    def rec(i: int, key: str) -> EvalRecord:
        return EvalRecord(eval_id=i, generation=0, config_key=key, params={"x": i}, status="ok", error="",
                          scores=[float(i)], elapsed_s=0.0, started_at=0.0, is_baseline=False)

    store = RunStore(":memory:" if where == "memory" else store_path)
    store.append(rec(0, "a"))
    store.append(rec(1, "b"))
    with pytest.raises(StoreError, match="config a is already stored .*as evaluation 0"):
        store.append(rec(2, "a"))
    assert [r.config_key for r in store.records()] == ["a", "b"]
    assert store._conn.execute("SELECT COUNT(*) FROM evals").fetchone()[0] == 2  # nothing half-written
    # a file keeps SQLite's UNIQUE index against a second writer; memory has append's own index of keys only
    unique = any(row[2] for row in store._conn.execute("PRAGMA index_list(evals)"))
    assert unique == (where == "file")
    store.close()


def test_include_folders_count_in_a_runs_setup_only_where_the_headers_digest_is_not_recorded():
    from compileiq_lab.store.header import KernelMeta

    def meta(folder: str, digest: str | None = None, defines: dict | None = None) -> dict:
        extra = {"build": {"include_dirs": [folder], "defines": defines or {}, "args": []}}
        extra |= {"headers_sha256": digest} if digest else {}
        return KernelMeta("k", "ptxas", ("registers",), extra=extra).identity()

    def same(a: dict, b: dict) -> bool:  # as prepare_store compares: a fact one side does not record is unknown
        return all(a[k] == b[k] for k in set(a) & set(b))

    assert same(meta("/a/inc", "d" * 64), meta("/b/inc", "d" * 64))  # a copied tree: the same headers, read alike
    assert not same(meta("/a/inc", "d" * 64), meta("/b/inc", "e" * 64))  # other headers
    assert not same(meta("/a/inc"), meta("/b/inc"))  # no digest (none recorded, no headers read): the folders count
    assert same(meta("/a/inc"), meta("/a/inc", "d" * 64))  # a run of an earlier version, without the digest
    assert not same(meta("/a/inc", "d" * 64, {"N": "4"}), meta("/b/inc", "d" * 64, {"N": "8"}))  # defines count


def test_a_store_another_program_holds_open_is_said_to_be_locked_not_foreign(store_path):
    Search(PROBLEM, PROBLEM.space(), SearchConfiguration(generations=1), store=store_path).start()
    reader = sqlite3.connect(store_path)  # e.g. an sqlite3 shell in a read transaction on the finished run
    reader.execute("BEGIN")
    reader.execute("SELECT COUNT(*) FROM evals").fetchall()
    try:
        with pytest.raises(StoreError, match="is locked by another program that has it open") as err:
            Search(PROBLEM, PROBLEM.space(), SearchConfiguration(generations=2), store=store_path).start()
        assert "not a compileiq-lab run store" not in str(err.value)
    finally:
        reader.close()
    assert len(Search(PROBLEM, PROBLEM.space(), SearchConfiguration(generations=2), store=store_path).start()) > 0


def test_a_run_stored_with_a_float_ranges_int_ends_continues_without_evaluating_them_again(store_path):
    space = {"x": ss.range(0, 3, 0.5, default=0), "y": ss.choice(["a", "b"])}
    Search(lambda c: c["x"] + len(c["y"]), space, SearchConfiguration(generations=2, pool_size=4, seed=0),
           store=store_path).start()
    with sqlite3.connect(store_path) as db:  # as an earlier version stored them: 0 and 3, not 0.0 and 3.0
        for end in ("0", "3"):
            db.execute(f"UPDATE evals SET config_key = replace(config_key, '\"x\":{end}.0', '\"x\":{end}'), "
                       f"params = replace(params, '\"x\": {end}.0', '\"x\": {end}')")
    stored = load_results(store_path).records
    assert any('"x":0,' in r.config_key for r in stored)  # (the rewrite took)
    asked: list[dict] = []
    more = Search(lambda c: asked.append(c) or c["x"] + len(c["y"]), space,
                  SearchConfiguration(generations=4, pool_size=4, seed=0), store=store_path).start()
    keys = [json.dumps({k: float(v) if k == "x" else v for k, v in r.params.items()}, sort_keys=True)
            for r in more.records]
    assert len(keys) == len(set(keys))  # nothing evaluated twice
    assert len(asked) == len(more.records) - len(stored)
