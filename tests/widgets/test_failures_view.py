"""FailuresView over real failing runs: the grouped table, escaping and cutting, the pick menu and its callback,
and updates that redraw only when the run grew."""

from __future__ import annotations

import html
from typing import Any

import pytest

pytest.importorskip("ipywidgets")

import compileiq_lab.space as ss
from compileiq_lab import Search, SearchConfiguration
from compileiq_lab.measure import Measurement
from compileiq_lab.store import Results
from compileiq_lab.testing import toy_objective
from compileiq_lab.widgets.failures import NO_FAILURES, FailuresView

LONG = "<b>unsafe</b> " + "very long compiler complaint " * 12


def flaky(config: dict[str, Any]) -> float | None:
    x, y = config["x"], config["y"]
    if x > 15:
        raise ValueError("bad x 7.5")
    if y == 3:
        raise RuntimeError(LONG)
    if x == 2.0:
        return None
    return float(x * x + y)


def run(objective: Any, generations: int = 4) -> Results:
    space = {"x": ss.range(start=1.0, end=20.0, step=0.5, default=16.0), "y": ss.choice([1, 2, 3], default=1),
             "z": ss.literal("constant", knockout_prob=0.5)}
    return Search(objective, space, SearchConfiguration(generations=generations, pool_size=12, seed=3),
                  store=":memory:").start()


def test_the_table_shows_groups_messages_escaped_and_cut_and_the_menu_picks_a_failure():
    results = run(flaky)
    view = FailuresView(limit=60)
    assert "compileiq-failures" in view.table._dom_classes and "compileiq-failure-pick" in view.pick._dom_classes
    assert view.update(results) is True
    table = view.table.value
    assert "<table" in table and view.groups[0]["status"] in table
    assert "ValueError: bad x 7.5" in table and "(incl. the baseline)" in table  # the baseline x = 16 failed
    assert [len(g["messages"]) for g in view.groups if g["status"] == "error"] == [2]  # both exceptions
    assert "<b>unsafe</b>" not in table and "&lt;b&gt;unsafe&lt;/b&gt;" in table  # escaped
    full = html.escape(f"RuntimeError: {LONG}".strip().replace("  ", " "), quote=True)
    assert f'title="{full}"' in table and "…</span>" in table  # cut, the whole text in the hover
    assert "<code>y=3</code>: " in table  # the suspect of the error group (y = 3 always raises)
    failed = sorted(r.eval_id for r in results.records if r.status != "ok")
    ids = [v for _, v in view.pick.options if v is not None]
    assert sorted(ids) == failed and view.pick.value is None and view.pick.layout.display is None

    picked: list[int] = []
    view.on_select(picked.append)
    view.pick.value = ids[-1]
    assert picked == [ids[-1]]
    view.update(results, force=True)  # a redraw keeps the choice and calls nobody
    assert view.pick.value == ids[-1] and picked == [ids[-1]]

    def broken(eval_id: int) -> None:
        raise KeyError(eval_id)

    view.on_select(broken)
    view.pick.value = ids[0]  # a failing callback is shown, never raised
    assert picked == [ids[-1], ids[0]] and "could not show eval" in view.message.value


def test_update_redraws_only_when_the_run_changed_and_says_when_nothing_failed():
    results = run(flaky)
    view = FailuresView()
    first = Results(results.records[:5], objectives=results.objectives, header=results.header)
    assert view.update(first) is True
    before = view.table.value
    assert view.update(Results(results.records[:5], objectives=results.objectives, header=results.header)) is False
    assert view.update(results) is True and view.table.value != before
    assert view.update(results) is False and view.update(results, force=True) is True

    fine = run(lambda c: toy_objective(c) if c else 0.0, generations=2)
    assert fine.status_counts() == {"ok": len(fine)}
    assert view.update(fine) is True
    assert NO_FAILURES in view.table.value and view.groups == []
    assert list(view.pick.options) == [] and view.pick.layout.display == "none"


def test_the_conflicts_the_search_read_from_the_messages_are_listed():
    def ptxas(config: dict[str, Any]) -> float:
        if config["fast_compile"] == "min" and config["opt_level"] in (0, 2, 3):
            raise RuntimeError("ptxas fatal : Conflicting options -opt-level=<0,2,3> and --Ofast-compile=min specified")
        return float(config["opt_level"] + (config["fast_compile"] == "mid"))

    space = {"opt_level": ss.choice([0, 1, 2, 3, "unset"]), "fast_compile": ss.choice(["min", "mid", "unset"])}
    results = Search(lambda c: ptxas({k: (3 if v == "unset" and k == "opt_level" else v) for k, v in c.items()}),
                     space, SearchConfiguration(generations=6, seed=1), store=":memory:").start()
    assert any(r.status == "error" for r in results.records)
    view = FailuresView()
    view.update(results)
    # "unset" is read by this objective as 3, so it conflicts too: learned from the failure that had it
    assert set(view.learned) <= {"opt_level in (0, 2, 3) and fast_compile = 'min' fail to compile",
                                 "opt_level in (0, 2, 3, 'unset') and fast_compile = 'min' fail to compile"}
    assert view.learned
    assert "compileiq-learned" in view.table.value and "fast_compile = &#x27;min&#x27;" in view.table.value
    view.update(run(flaky), force=True)  # messages that name no control: nothing listed
    assert view.learned == [] and "compileiq-learned" not in view.table.value


def test_controls_the_compiler_ignored_are_listed_without_any_failure():
    rule = {"control": "level", "when": [{"control": "opt_level", "value": 0}],
            "message": "ptxas warning : Conflicting options '-O0' and '--level' specified, ignoring '--level' option"}

    def objective(config: dict[str, Any]) -> Measurement:  # as the kernel evaluator keeps an "ignoring" warning
        ignored = config.get("opt_level") == 0 and "level" in config
        return Measurement("ok", scores=(float(config["x"]),), detail={"ignored_rules": [rule]} if ignored else {})

    space = {"opt_level": ss.choice([0, 1], knockout_prob=0.2), "level": ss.range(0, 4, knockout_prob=0.2),
             "x": ss.range(0, 9)}
    results = Search(objective, space, SearchConfiguration(generations=6, seed=0), store=":memory:").start()
    assert results.status_counts() == {"ok": len(results)}
    view = FailuresView()
    view.update(results)
    assert view.learned == ["level is ignored with opt_level = 0"]
    assert NO_FAILURES in view.table.value and "compileiq-learned" in view.table.value
