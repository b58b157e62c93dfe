"""The lab's widgets without a browser: live plots follow the run, the bridge throttles across threads,
clicks select points, export writes files, failures and bad choices are shown."""

from __future__ import annotations

import asyncio
import json
import threading
import time

import pytest

pytest.importorskip("ipywidgets")
pytest.importorskip("anywidget")

import compileiq_lab.space as ss
from compileiq_lab import Run, Search, SearchConfiguration, load_acf
from compileiq_lab.testing import toy_objective, toy_space
from compileiq_lab.widgets import Dashboard, EventBridge
from compileiq_lab.widgets.live import BASELINE, EVALS, FAILED, FRONT
from compileiq_lab.widgets.setup import TOY, RunForm


def three_objectives(config):
    x, y = config["x"], config["y"]
    if x == 7:
        raise ValueError("x=7 is broken")
    return float(x), float(10 - x + y), float(y * y)


def toy_run(store=":memory:", generations=4) -> Run:
    return Run(Search(toy_objective, toy_space(), SearchConfiguration(generations=generations, pool_size=6, seed=1),
                      store=store))


def test_live_plots_show_the_run_its_front_baseline_and_failures():
    space = {"x": ss.range(0, 12, default=0), "y": ss.range(0, 5, default=0)}  # the baseline: x = y = 0
    cfg = SearchConfiguration(generations=4, pool_size=8, seed=2, num_objectives=3, objective_names=["a", "b", "c"])
    dash = Dashboard(Run(Search(three_objectives, space, cfg, store=":memory:")))
    dash.start()
    results = dash.wait(timeout=60)
    assert dash.run.state == "finished" and "finished" in dash.status.value
    pareto = dash.plots.pareto.data
    ok = [r for r in results.records if r.status == "ok"]
    failed = [r for r in results.records if r.status != "ok"]
    assert sorted(pareto[EVALS].customdata) == sorted(r.eval_id for r in ok)
    assert set(pareto[FRONT].customdata) <= {r["eval_id"] for r in results.pareto_front()}  # 2-D view of a 3-D front
    assert list(pareto[BASELINE].customdata) == [0]
    assert sorted(pareto[FAILED].customdata) == sorted(r.eval_id for r in failed) and failed
    assert dash.progress_bar.value == 4 and f"{len(failed)} error" in dash.status.value
    history = dash.plots.history.data
    assert len(history) == 6 and list(history[0].x) == [0, 1, 2, 3, 4]
    # other axes: y = c
    dash.plots.y.value = "c"
    assert list(pareto[EVALS].y) == [float(r.scores[2]) for r in ok]
    dash.plots.view.value = "3-D"  # three objectives: a 3-D view
    assert len(dash.plots.pareto3d.data[0].z) == len(ok)
    assert dash.plots.box.children[1].children[0] is dash.plots.pareto3d
    bars = dash.plots.influence.data[0]  # drawn when the run finished; objective a is the control x itself
    assert list(bars.y)[-1] == "x" and "influence on a" in dash.plots.influence.layout.title.text


def test_front_trace_is_the_exact_front():
    dash = Dashboard(toy_run())
    dash.start()
    results = dash.wait(timeout=60)
    front_ids = sorted(r["eval_id"] for r in results.pareto_front())
    assert sorted(dash.plots.pareto.data[FRONT].customdata) == front_ids


def test_clicking_a_point_shows_it_and_export_writes_it(tmp_path):
    dash = Dashboard(toy_run())
    dash.start()
    results = dash.wait(timeout=60)
    best = results.get_best_result()

    class Points:  # what plotly passes to on_click
        point_inds = [list(dash.plots.pareto.data[EVALS].customdata).index(best["eval_id"])]  # noqa: RUF012
    dash.plots._clicked(dash.plots.pareto.data[EVALS], Points(), None)
    assert f"<b>eval {best['eval_id']}</b>" in dash.detail.html.value and not dash.detail.export_button.disabled
    dash.detail.path.value = str(tmp_path / "best.json")
    dash.detail.export_button.click()
    assert "wrote" in dash.detail.message.value
    doc = json.loads((tmp_path / "best.json").read_text())
    assert doc["params"] == best["params"] and doc["objectives"]["score_1"] == best["score_1"]
    failed = next((r for r in results.records if r.status != "ok"), None)
    if failed is not None:
        dash.select(failed.eval_id)
        assert dash.detail.export_button.disabled and failed.status in dash.detail.html.value


def test_a_kernel_run_from_the_form_exports_an_acf(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    dash = Dashboard(store=str(tmp_path / "run.db"))
    form = dash.form
    form.kernel.value = "reduction"
    assert form.target.value == "static" or form.target.value == "gpu"
    form.target.value = "static"
    form.catalog.value = "ptxas"
    form.categories.value = ("register_allocation",)
    form.objectives.value = ("sass_instructions", "registers")
    form.generations.value = 2
    assert "maxrregcount" in form.docs.value
    run = dash.start()
    assert run is not None and dash.error.value == ""
    results = dash.wait(timeout=120)
    ok = [r for r in results.records if r.status == "ok"]
    dash.select(ok[-1].eval_id)
    assert "arguments:" in dash.detail.html.value and "sass_instructions (min)" in dash.detail.html.value
    out = dash.export(path=tmp_path / "p.acf")
    acf = load_acf(out)
    assert acf.kernel == "reduction" and acf.run["eval_id"] == ok[-1].eval_id


def test_bad_choices_and_run_failures_are_shown_not_raised(store_path, monkeypatch):
    dash = Dashboard()
    dash.form.kernel.value = "reduction"
    dash.form.objectives.value = ()
    assert dash.start() is None and "pick at least one objective" in dash.error.value
    dash.form.kernel.value = TOY
    broken = Dashboard(toy_run(store_path))

    def fail() -> None:
        raise RuntimeError("disk on fire")
    monkeypatch.setattr(broken.run.search.engine, "ask", fail)
    broken.start()
    with pytest.raises(RuntimeError):
        broken.wait(timeout=60)
    assert "disk on fire" in broken.error.value and broken.run.state == "failed"
    assert broken.stop_button.disabled and broken.pause_button.disabled


def test_pause_and_stop_buttons_drive_the_run(store_path):
    def slow(config):
        time.sleep(0.02)
        return toy_objective(config)
    dash = Dashboard(Run(Search(slow, toy_space(), SearchConfiguration(generations=20, pool_size=6), store=store_path)))
    dash.start_button.click()
    assert dash.run.running and not dash.pause_button.disabled and dash.start_button.disabled
    dash.pause_button.click()
    assert dash.run.state == "paused" and dash.pause_button.description == "Resume"
    dash.pause_button.click()
    assert dash.run.state == "running"
    dash.stop_button.click()
    dash.wait(timeout=60)
    assert dash.run.state == "stopped" and dash.stop_button.disabled and dash.pause_button.disabled


def test_bridge_flushes_in_the_loop_thread_at_a_limited_rate():
    loop = asyncio.new_event_loop()
    loop_thread = threading.Thread(target=loop.run_forever, daemon=True)
    loop_thread.start()
    seen: list[tuple[str, list[int]]] = []
    bridge = EventBridge(lambda events: seen.append((threading.current_thread().name, [e["i"] for e in events])),
                         interval_s=0.1, loop=loop)
    try:
        t0 = time.monotonic()
        for i in range(200):  # from this thread, as a run thread would
            bridge.push({"i": i})
            time.sleep(0.002)
        pushing = time.monotonic() - t0
        deadline = time.time() + 5
        while bridge.pending and time.time() < deadline:
            time.sleep(0.02)
        time.sleep(0.15)
    finally:
        loop.call_soon_threadsafe(loop.stop)
        loop_thread.join(5)
    assert [i for _, batch in seen for i in batch] == list(range(200))  # all, in order
    assert {name for name, _ in seen} == {loop_thread.name}  # applied in the loop's thread only
    assert 2 <= len(seen) <= pushing / 0.1 + 3  # at most one flush per 0.1 s while events arrive


def test_form_follows_the_kernel_choice():
    form = RunForm()
    assert form.target.options == ("python",) and form.objectives.value == ("toy objective",)
    form.kernel.value = "dot"
    assert form.catalog.options == ("gcc", "clang") and "runtime" in form.objectives.options
    form.target.value = "static"
    assert "runtime" not in form.objectives.options
    form.path.value = "no/such/kernel"
    assert "load_kernel" in form.note.value


def test_start_is_refused_while_a_run_is_still_going(store_path):
    def slow(config):
        time.sleep(0.05)
        return toy_objective(config)
    dash = Dashboard(store=store_path)
    first = Run(Search(slow, toy_space(), SearchConfiguration(generations=20, pool_size=6), store=store_path))
    dash._attach(first)
    dash.start()
    dash.stop()
    assert dash.start_button.disabled  # "stopping" counts as live
    assert dash.start() is None and "still going" in dash.error.value
    dash.wait(timeout=60)
    assert not dash.start_button.disabled  # the form can build a new run now


def test_influence_is_fitted_off_the_loop_thread_and_drawn_on_it():
    dash = Dashboard(toy_run(generations=6))
    dash.start()
    dash.wait(timeout=60)
    loop = asyncio.new_event_loop()
    loop_thread = threading.Thread(target=loop.run_forever, daemon=True)
    loop_thread.start()
    drawn: list[str] = []
    original = dash.plots._draw_influence

    def spy(*args):
        drawn.append(threading.current_thread().name)
        original(*args)
    dash.plots._draw_influence = spy
    try:
        dash.plots.show_influence(loop=loop)
        assert dash.plots.explain_note.value == "fitting..."  # returned at once
        deadline = time.time() + 60
        while not drawn and time.time() < deadline:
            time.sleep(0.05)
    finally:
        loop.call_soon_threadsafe(loop.stop)
        loop_thread.join(5)
    assert drawn == [loop_thread.name] and "influence on score_1" in dash.plots.influence.layout.title.text


def test_a_stored_kernel_run_reopens_with_its_points_and_continues(tmp_path):
    from compileiq_lab.exceptions import ConfigurationError

    dash = Dashboard(store=str(tmp_path / "run.db"))
    form = dash.form
    form.kernel.value = "reduction"
    form.target.value = "static"
    form.catalog.value = "ptxas"
    form.categories.value = ("register_allocation",)
    form.generations.value = 1
    dash.start()
    first = dash.wait(timeout=120)
    again = Dashboard.open(str(tmp_path / "run.db"), generations=3)  # a new kernel session, say
    assert sorted(again.plots.pareto.data[EVALS].customdata) == sorted(
        r.eval_id for r in first.records if r.status == "ok")
    assert again.kernel_run.kernel.name == "reduction" and "maxrregcount" in again.kernel_run.search_space()
    again.start()
    final = again.wait(timeout=120)
    assert final.status == "finished" and len(final) > len(first)
    assert [r.config_key for r in final.records[:len(first)]] == [r.config_key for r in first.records]
    toy_store = str(tmp_path / "toy.db")
    toy_run(toy_store, generations=1).start().join(timeout=60)
    with pytest.raises(ConfigurationError, match="pass it again"):
        Dashboard.open(toy_store)
    assert Dashboard.open(toy_store, objective=toy_objective).run.search.store_path == toy_store
