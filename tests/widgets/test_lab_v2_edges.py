"""Edges of the lab v2 found in review: reopening runs, fronts with missing scores, foreign run stores."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import numpy as np
import pytest

from compileiq_lab import Run, Search, SearchConfiguration
from compileiq_lab.exceptions import CompileIQLabError
from compileiq_lab.testing import toy_objective, toy_space
from compileiq_lab.widgets import Dashboard, RunsList
from compileiq_lab.widgets.points import front_2d


def _toy_store(path: Path) -> str:
    Search(toy_objective, toy_space(), SearchConfiguration(generations=2, pool_size=4, seed=0), store=str(path)).start()
    return str(path)


def test_front_of_two_axes_ignores_points_without_both_scores() -> None:
    assert list(front_2d(np.array([1.0, 2.0, 3.0]), np.array([np.nan, 1.0, 0.5]), 1, 1)) == [1, 2]
    assert list(front_2d(np.array([1.0, np.nan, 3.0]), np.array([5.0, 0.0, 4.0]), 1, 1)) == [0, 2]
    assert list(front_2d(np.array([1.0, 2.0]), np.array([1.0, 2.0]), -1, -1)) == [1]  # both maximised
    assert list(front_2d(np.array([np.nan]), np.array([1.0]), 1, 1)) == []


def test_reopen_replays_a_python_run_and_keeps_the_current_one_when_a_store_cannot_open(tmp_path: Path) -> None:
    first = _toy_store(tmp_path / "a.db")
    dash = Dashboard(Run(Search(toy_objective, toy_space(), SearchConfiguration(generations=2, seed=1),
                                store=str(tmp_path / "live.db"))))
    dash.reopen(first)  # a Python objective cannot be rebuilt from its store: it is replayed
    assert type(dash.run).__name__ == "ReplayRun" and dash.run.store_path == first
    before = dash.run
    (tmp_path / "text.db").write_text("not a run store")
    with pytest.raises(CompileIQLabError):
        dash.reopen(str(tmp_path / "text.db"))
    assert dash.run is before  # nothing was torn down for a store that did not open


def test_runs_list_survives_a_store_with_an_impossible_start_time(tmp_path: Path) -> None:
    path = _toy_store(tmp_path / "odd.db")
    with sqlite3.connect(path) as db:
        tables = [r[0] for r in db.execute("select name from sqlite_master where type='table'")]
        header = next(t for t in tables if "header" in t or "meta" in t)
        cols = [r[1] for r in db.execute(f"pragma table_info({header})")]
        if "created_at" in cols:
            db.execute(f"update {header} set created_at = 1e300")
        else:  # a key/value header
            db.execute(f"update {header} set value = '1e300' where key = 'created_at'")
    runs = RunsList(tmp_path)
    assert [Path(e.path).name for e in runs.entries] == ["odd.db"] and runs.entries[0].started == "?"
