"""A damaged run store: every command answers in one line naming the file and what is wrong; show, export and report
read every intact row; a continued run refuses to write into it."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from compileiq_lab import load_results
from compileiq_lab.cli.main import main
from compileiq_lab.exceptions import StoreError

needs_gcc = pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc not installed")

TUNE = ["tune", "stencil_c", "--objectives", "text_bytes,compile_time", "--generations", "4", "--pool-size", "8",
        "--warm-start", "none", "--workers", "2"]


@pytest.fixture(scope="module")
def pristine(tmp_path_factory) -> Path:
    """A real store of a kernel run (gcc, static objectives), made by the CLI, checkpointed into one file."""
    folder = tmp_path_factory.mktemp("pristine")
    out = subprocess.run([sys.executable, "-m", "compileiq_lab.cli", *TUNE, "--store", "run.db"], cwd=folder,
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    with sqlite3.connect(folder / "run.db") as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        assert conn.execute("PRAGMA page_size").fetchone()[0] == 4096
    return folder / "run.db"


def _pages(path: Path) -> int:
    return path.stat().st_size // 4096


def _overwrite(page: int, fill: Callable[[int], bytes]) -> Callable[[Path], None]:
    def damage(path: Path) -> None:
        with open(path, "r+b") as f:
            f.seek(page * 4096)
            f.write(fill(4096))
    return damage


def _sql(statement: str) -> Callable[[Path], None]:
    def damage(path: Path) -> None:
        with sqlite3.connect(path) as conn:
            conn.execute(statement)
        conn.close()
    return damage


def _truncate(fraction: float) -> Callable[[Path], None]:
    def damage(path: Path) -> None:
        size = path.stat().st_size
        os.truncate(path, int(size * fraction) // 4096 * 4096)
    return damage


def _header_value(key: str, value: object) -> Callable[[Path], None]:
    return _sql(f"UPDATE meta SET value = '{json.dumps(value)}' WHERE key = '{key}'")


DAMAGE: dict[str, Callable[[Path], None]] = {
    **{f"zero page {p}": _overwrite(p, bytes) for p in range(12)},
    **{f"random page {p}": _overwrite(p, os.urandom) for p in (1, 2, 3, 5, 8)},
    "truncated to half": _truncate(0.5),
    "truncated to a quarter": _truncate(0.25),
    "bad json in params": _sql("UPDATE evals SET params = '{not json' WHERE eval_id = 3"),
    "bad json in scores": _sql("UPDATE evals SET scores = '[1, ' WHERE eval_id = 4"),
    "scores not a list": _sql("UPDATE evals SET scores = '\"x\"' WHERE eval_id = 5"),
    "params not a dict": _sql("UPDATE evals SET params = '[1, 2]' WHERE eval_id = 6"),
    "bad json in detail": _sql("UPDATE evals SET detail = 'nope' WHERE eval_id = 7"),
    "text in a number column": _sql("UPDATE evals SET elapsed_s = 'slow', generation = 'g' WHERE eval_id = 8"),
    "bad json in the header": _sql("UPDATE meta SET value = '{' WHERE key = 'config'"),
    "space of the wrong type": _header_value("space", 5),
    "config of the wrong type": _header_value("config", "generations"),
    "generations of the wrong type": _sql(
        "UPDATE meta SET value = json_set(value, '$.generations', 'many') WHERE key = 'config'"),
    "metadata of the wrong type": _header_value("metadata", [1, 2]),
    "objectives of the wrong type": _sql(
        "UPDATE meta SET value = json_set(value, '$.objectives', 7) WHERE key = 'metadata'"),
    "validation of the wrong type": _header_value("validation", "fast"),
    "status of the wrong type": _header_value("status", {"a": 1}),
    "schema version of the wrong type": _header_value("schema_version", "one"),
    "meta table dropped": _sql("DROP TABLE meta"),
    "evals table dropped": _sql("DROP TABLE evals"),
    "not a database": lambda p: p.write_bytes(b"hello, this is not SQLite" * 100),
    "empty file": lambda p: p.write_bytes(b""),
}


def _cli(args: list[str], capsys) -> tuple[int, str]:
    """Run one command in this process; a traceback escaping main() fails the test with the case named."""
    code = main(args)
    captured = capsys.readouterr()
    return code, captured.out + captured.err


@needs_gcc
@pytest.mark.parametrize("case", sorted(DAMAGE))
def test_damaged_store_gives_one_line_and_reads_what_is_intact(case, pristine, tmp_path, capsys, monkeypatch):
    intact = len(load_results(str(pristine)))
    path = tmp_path / "run.db"
    shutil.copy(pristine, path)
    DAMAGE[case](path)
    monkeypatch.chdir(tmp_path)
    for command in (["show", "run.db"], ["export", "run.db", "-o", "x.acf"], ["report", "run.db", "-o", "r.html"]):
        code, text = _cli(command, capsys)
        assert "Traceback" not in text, (case, command, text)
        if code != 0:  # refused: one line that names the file
            errors = [ln for ln in text.splitlines() if ln.startswith("compileiq-lab: error:")]
            assert len(errors) == 1 and "run.db" in errors[0], (case, command, text)
    code, text = _cli(["show", "run.db"], capsys)
    if code == 0:
        shown = int(text.split(": ", 1)[1].split(" evaluations")[0])
        assert shown <= intact
        if "damaged" not in text:
            assert shown == intact, (case, text)  # nothing was lost silently
    code, text = _cli([*TUNE, "--generations", "5", "--store", "run.db"], capsys)  # continuing it
    assert "Traceback" not in text, (case, text)
    assert code == 0 or "run.db" in text, (case, text)


@needs_gcc
def test_a_damaged_row_is_skipped_and_named(pristine, tmp_path):
    path = tmp_path / "run.db"
    shutil.copy(pristine, path)
    _sql("UPDATE evals SET params = '{not json' WHERE eval_id = 3")(path)
    res = load_results(str(path))
    assert len(res) == len(load_results(str(pristine))) - 1 and res.record(3) is None
    assert any("eval 3" in d for d in res.damage)
    with pytest.raises(StoreError, match="damaged"):
        from compileiq_lab.store.sqlite import RunStore

        RunStore(path, header=res.header)


@pytest.mark.parametrize("given", ["", 3, None.__class__])
def test_a_store_that_is_not_a_path_is_refused_without_a_file(given, tmp_path, monkeypatch):
    """An empty name used to open an anonymous SQLite database (and leave a .lock here), 3 a file named 3."""
    from compileiq_lab.exceptions import StoreError
    from compileiq_lab.store import RunStore

    monkeypatch.chdir(tmp_path)
    with pytest.raises(StoreError, match="the store is a .db path or ':memory:'"):
        RunStore(given)
    assert list(tmp_path.iterdir()) == []


def test_another_programs_sqlite_database_is_not_called_a_damaged_run(tmp_path):
    from compileiq_lab import Search, SearchConfiguration
    from compileiq_lab.exceptions import StoreError
    from compileiq_lab.testing import toy_objective, toy_space

    other = tmp_path / "app.db"
    with sqlite3.connect(other) as conn:
        conn.execute("CREATE TABLE users (name TEXT)")
    with pytest.raises(StoreError, match=r"an SQLite database of something else \(its tables: users\)") as err:
        Search(toy_objective, toy_space(), SearchConfiguration(generations=1), store=str(other)).start()
    assert "damaged" not in str(err.value)
    with sqlite3.connect(other) as conn:  # no run's table was added to it
        assert [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")] == ["users"]


def test_another_programs_sqlite_database_is_refused_when_read_too(tmp_path):
    from compileiq_lab.exceptions import StoreError
    from compileiq_lab.store import load_results

    other = tmp_path / "app.db"
    with sqlite3.connect(other) as conn:
        conn.execute("CREATE TABLE users (name TEXT)")
    with pytest.raises(StoreError, match=r"something else \(its tables: users\); pass the path of a run's .db file"):
        load_results(str(other))  # before: empty Results with notes of a damaged run
    with sqlite3.connect(other) as conn:
        assert [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")] == ["users"]
