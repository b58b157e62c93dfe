"""The lab's widgets without a browser: live plots follow the run, the bridge throttles across threads,
clicks select points, export writes files, failures and bad choices are shown."""

from __future__ import annotations

import asyncio
import json
import shutil
import threading
import time
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("ipywidgets")
pytest.importorskip("anywidget")

import compileiq_lab.space as ss
from compileiq_lab import KernelRun, Run, Search, SearchConfiguration, load_acf
from compileiq_lab.exceptions import ConfigurationError
from compileiq_lab.testing import tool_available, toy_objective, toy_space
from compileiq_lab.widgets import Dashboard, EventBridge
from compileiq_lab.widgets.live import BASELINE, EVALS, FAILED, FRONT, SELECTED
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
    # three objectives: the 2-D front is the front of the two axes shown (a staircase that only falls)
    xs, ys = np.array(pareto[FRONT].x), np.array(pareto[FRONT].y)
    assert (np.diff(xs) >= 0).all() and (np.diff(ys) <= 0).all()
    pts = {r.eval_id: (r.scores[0], r.scores[2]) for r in ok}
    dominated = {e for e, (a, c) in pts.items() if any(a2 <= a and c2 <= c and (a2, c2) != (a, c)
                                                        for a2, c2 in pts.values())}
    assert {pts[e] for e in pareto[FRONT].customdata} == {p for e, p in pts.items() if e not in dominated}
    assert "on the front of these two axes" in dash.plots.pareto.layout.title.text
    dash.plots.view.value = "3-D"  # three objectives: a 3-D view, as large as the 2-D one, with its front
    assert len(dash.plots.pareto3d.data[0].z) == len(ok)
    assert dash.plots.scatter_area.children == (dash.plots.pareto3d,)
    assert dash.plots.pareto3d.layout.height == dash.plots.pareto.layout.height
    assert sorted(dash.plots.pareto3d.data[1].customdata) == sorted(r["eval_id"] for r in results.pareto_front())
    dash.plots.view.value = "2-D"
    dash.select(ok[3].eval_id)  # a selected point is ringed and the point tab opens beside the plot
    assert list(pareto[SELECTED].customdata) == [dash.detail.eval_id]
    assert dash.plots.tabs.titles[dash.plots.tabs.selected_index] == "point"
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
    shown = results.representative_of(ok[-1].eval_id).eval_id  # identical points: the representative is shown
    assert f"<b>eval {shown}</b>" in dash.detail.html.value and dash.detail.eval_id == shown
    assert "arguments:" in dash.detail.html.value
    assert "sass_instructions (count, lower is better)" in dash.detail.html.value
    out = dash.export(path="p.acf")
    assert out == (tmp_path / "compileiq_runs" / "p.acf").resolve()  # exports go to the form's folder
    assert "compileiq_runs" in dash.form.folder.value and "count, lower is better" in dash.form.objective_docs.value
    acf = load_acf(out)
    assert acf.kernel == "reduction" and acf.run["eval_id"] == shown
    # minimised as `compileiq-lab export` does: what is kept changes the machine code, what is dropped does not
    point = results.record(shown)
    assert set(acf.controls) | set(acf.dropped) == set(point.params) and not set(acf.controls) & set(acf.dropped)
    build = KernelRun("reduction", "ptxas", ["sass_instructions", "registers"], arch=acf.arch, measure=False,
                      workdir=tmp_path / "check")
    assert build.build(acf.controls)[1] == acf.code_hash == build.build(point.params)[1]
    for name in set(acf.controls) - {"defines"}:
        try:
            without = build.build({k: v for k, v in acf.controls.items() if k != name})[1]
        except ConfigurationError:  # dropping it alone would conflict: it is kept for that
            continue
        assert without != acf.code_hash, name


def test_bad_choices_and_run_failures_are_shown_not_raised(store_path, monkeypatch):
    dash = Dashboard()
    dash.form.kernel.value = "reduction"
    dash.form.objectives.value = ()
    dash.banner.value = "the last run's baseline failed"
    assert dash.start() is None and "pick at least one objective" in dash.error.value
    assert dash.banner.value == ""  # no banner of another run beside the form's error
    dash.form.objectives.value = ("registers",)  # the form edited: its error no longer stands
    assert dash.error.value == ""
    dash.form.kernel.value = TOY
    broken = Dashboard(toy_run(store_path))

    def fail(n: int | None = None) -> None:
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
    assert form.target.options == ("python", "replay") and form.objectives.value == ("toy objective",)
    form.kernel.value = "dot"
    assert form.catalog.options == ("gcc", "clang") and "runtime" in form.objectives.options
    form.target.value = "static"
    assert "runtime" not in form.objectives.options
    form.path.value = "no/such/kernel"
    assert "load_kernel" in form.note.value


def test_the_runs_tab_shows_how_the_run_ended(tmp_path):
    def slow(config):
        time.sleep(0.02)
        return toy_objective(config)
    store = str(tmp_path / "live.db")
    dash = Dashboard(Run(Search(slow, toy_space(), SearchConfiguration(generations=20, pool_size=6), store=store)),
                     folder=tmp_path)
    (entry,) = dash.panels.runs.entries
    assert (entry.state, entry.evaluations) == ("idle", 0)  # read when the dashboard was built, before Start
    dash.start_button.click()
    deadline = time.monotonic() + 60
    while not dash.run.results().records and time.monotonic() < deadline:
        time.sleep(0.05)
    dash.stop_button.click()
    dash.wait(timeout=60)
    (entry,) = dash.panels.runs.entries
    assert (entry.state, entry.evaluations) == ("stopped", len(dash.run.results().records)) and entry.evaluations > 0
    assert ">stopped<" in dash.panels.runs.table.value


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


def test_influence_from_a_model_that_does_not_fit_draws_no_bars():
    pytest.importorskip("sklearn")
    from compileiq_lab.analysis.influence import control_influence

    dash = Dashboard(toy_run(generations=6))
    dash.start()
    results = dash.wait(timeout=60)
    df = control_influence(results, "score_1", rounds=2, n_trees=20)
    for r2, bars in ((0.9, True), (0.1, False), (float("nan"), False)):
        df.attrs["r2"] = r2
        dash.plots._draw_influence(df, "score_1", "")
        assert (len(dash.plots.influence.data[0].x) > 0) is bars, r2
        assert ("model too weak to say" in dash.plots.explain_note.value) is not bars, r2


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
    last = max(r.generation for r in first.records)  # idle: the status says how far the stored rows go
    assert f"0 evaluations, {len(first)} stored up to generation {last} (Start continues)" in again.status.value
    again.start()
    final = again.wait(timeout=120)
    assert final.status == "finished" and len(final) > len(first)
    assert [r.config_key for r in final.records[:len(first)]] == [r.config_key for r in first.records]
    new = len(final) - len(first)  # the status line counts this session's evaluations and says what is stored
    assert f"{new} evaluations this session, {len(final)} stored" in again.status.value
    toy_store = str(tmp_path / "toy.db")
    toy_run(toy_store, generations=1).start().join(timeout=60)
    with pytest.raises(ConfigurationError, match="pass it again"):
        Dashboard.open(toy_store)
    assert Dashboard.open(toy_store, objective=toy_objective).run.search.store_path == toy_store


def _bad_kernel(folder):
    source = folder / "broken.cu"
    source.write_text('extern "C" __global__ void broken(float* x) { x[threadIdx.x] = not_declared; }\n')
    return source


@pytest.mark.skipif(not tool_available("nvcc"), reason="needs nvcc")
def test_a_new_run_clears_the_detail_panel_and_a_broken_baseline_shows_a_banner(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    dash = Dashboard()
    dash.form.generations.value = 2
    dash.start()
    dash.wait(timeout=60)
    dash.select(0)
    assert dash.detail.eval_id is not None and not dash.detail.export_button.disabled
    # a second run: a kernel whose defaults do not compile, under a ptxas-only space
    dash.form.path.value = str(_bad_kernel(tmp_path))
    dash.form.target.value = "static"
    dash.form.catalog.value = "ptxas"
    dash.form.generations.value = 5
    dash.start()
    assert dash.detail.eval_id is None and dash.detail.export_button.disabled  # no stale point of the last run
    assert "click a point" in dash.detail.html.value
    results = dash.wait(timeout=120)
    assert results.status == "baseline_failed" and len(results) == 1  # stopped after the baseline
    assert dash.run.state == "baseline_failed"
    banner = dash.banner.value
    assert "baseline (compiler defaults) failed" in banner and "not_declared" in banner  # the compiler's message
    assert "ptxas" in banner and "cannot change that" in banner
    assert list((tmp_path / "compileiq_runs").glob("run-*.db"))  # runs of the form go to its folder


def test_exceptions_in_callbacks_and_widget_messages_show_as_the_error_line(monkeypatch):
    import logging

    dash = Dashboard(toy_run())

    def broken(*args):
        raise ValueError("plot update went wrong")
    monkeypatch.setattr(dash.plots, "update", broken)
    dash.start()
    dash.run.join(60)
    dash.bridge.flush()  # what the notebook's event loop does: the update raises inside the guarded callback
    assert "plot update went wrong" in dash.error.value and "traceback" in dash.error.value
    dash.error.value = ""
    try:
        raise TypeError("a FigureWidget message failed")
    except TypeError:
        logging.getLogger("Comm").error("Exception in comm_msg for %s", "abc", exc_info=True)
    assert "a widget update failed" in dash.error.value and "a FigureWidget message failed" in dash.error.value


def test_traces_hold_plain_lists_so_plotly_can_fold_the_browser_reply():
    """The browser answers each update with the trace's defaults (plotly's JS diffs its full data against the
    trace's data): a numpy array reaches it as a typed array, which the diff walks as an object, so the reply
    holds a dict where the trace holds an array, and plotly's _remove_overlapping_props raised "truth value of
    an array is ambiguous". The traces hold plain lists, which come back as lists and fold."""
    import numpy as np
    from plotly.basewidget import BaseFigureWidget

    def arrays(value, path=()):
        if isinstance(value, np.ndarray):
            yield path
        elif isinstance(value, dict):
            for k, v in value.items():
                yield from arrays(v, (*path, k))

    dash = Dashboard(toy_run(generations=3))
    dash.start()
    dash.wait(timeout=60)
    for trace in dash.plots.pareto.data:
        assert list(arrays(trace._props)) == []
        reply = {k: list(trace[k]) for k in ("x", "y", "customdata") if trace[k] is not None}
        BaseFigureWidget._remove_overlapping_props(dict(trace._props), reply)
    numpy_props = {"x": np.arange(3.0)}  # what the traces held before: the same fold raises
    with pytest.raises(ValueError, match="truth value"):
        BaseFigureWidget._remove_overlapping_props(numpy_props, {"x": {"0": 0.0}})


def test_colour_bar_spans_the_run_and_no_eta_while_paused(store_path):
    def slow(config):
        time.sleep(0.02)
        return toy_objective(config)

    run = Run(Search(slow, toy_space(), SearchConfiguration(generations=6, pool_size=6, seed=1), store=store_path))
    dash = Dashboard(run)
    marker = dash.plots.pareto.data[EVALS].marker
    assert (marker.cmin, marker.cmax) == (0, 6)  # generations 0..6 from the start, not 0..generations seen
    dash.start()
    deadline = time.monotonic() + 30
    while run.progress()["generation"] < 1 and time.monotonic() < deadline:
        time.sleep(0.01)
    dash.toggle_pause()
    time.sleep(0.2)
    dash.flush()
    assert run.state == "paused" and "paused" in dash.status.value and "left" not in dash.status.value
    assert run.progress()["eta_s"] is None
    dash.toggle_pause()
    dash.wait(timeout=60)
    assert dash.plots.pareto.data[EVALS].marker.cmax == 6


def test_package_warnings_show_in_the_dashboard_not_on_stderr(tmp_path, monkeypatch, capfd):
    monkeypatch.chdir(tmp_path)
    dash = Dashboard()  # the form's toy run: its space declares no defaults, which the package warns about
    dash.form.generations.value = 1
    dash.start()
    dash.wait(timeout=60)
    assert "no baseline row" in dash.notes.value
    assert "no baseline row" not in capfd.readouterr().err  # JupyterLab would show stderr in its log console


def test_warnings_from_elsewhere_are_not_swallowed_by_an_open_dashboard(capfd):
    import logging

    dash = Dashboard(toy_run())
    logging.getLogger("compileiq_lab.elsewhere").warning("a warning of another cell")
    dash.refresh()
    assert "a warning of another cell" not in dash.notes.value
    assert "a warning of another cell" in capfd.readouterr().err


@pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")
def test_a_run_whose_every_output_is_wrong_shows_why_it_stopped_in_the_banner(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    folder = tmp_path / "dot"
    shutil.copytree(Path(__file__).resolve().parents[2] / "kernels" / "dot", folder)
    reference = folder / "reference.py"
    reference.write_text(reference.read_text().replace('{"out": np.array([np.dot(', '{"out": 2 * np.array([np.dot('))
    dash = Dashboard()
    dash.form.path.value = str(folder)
    dash.form.generations.value = 6
    dash.form.pool.value = 4
    dash.start()
    results = dash.wait(timeout=300)
    assert results.status == "stopped" and len(results) == 4  # the first generation, not six
    banner = dash.banner.value
    assert "baseline (compiler defaults) failed: wrong_output" in banner
    assert "The run stopped after its first generation: the baseline and all 3 configs" in banner


def _run_form(form: RunForm, store: Path, timeout: float):
    """Build the form's run into ``store``, run it to its end and return its results (its kernel run closed)."""
    run, kernel_run = form.build(store=str(store))
    try:
        run.start().join(timeout=timeout)
        return run.results()
    finally:
        if kernel_run is not None:
            kernel_run.close()


@pytest.mark.skipif(not tool_available("nvcc"), reason="needs nvcc")
def test_a_bare_file_takes_its_fixed_defines_and_arguments_from_the_form(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "k.cu").write_text("#ifndef SCALE\n#error build with -DSCALE=<n>\n#endif\n"
                                   "constexpr int twice(int v) { return 2 * v; }\n"
                                   "__global__ void k(int* x) { x[threadIdx.x] = twice(SCALE); }\n")
    form = RunForm()
    form.path.value = "k.cu"
    assert form.defines.layout.display == "" and form.args.layout.display == ""
    form.args.value = "-maxrregcount=32"
    assert "-maxrregcount=32" in form.note.value and "ptxas control" in form.note.value  # refused as the CLI does
    form.args.value = "-std=c++17 '--expt-relaxed"
    assert "fixed args: must split as a shell would" in form.note.value
    form.args.value = "-std=c++17 --expt-relaxed-constexpr"
    form.defines.value = "SCALE=3"
    spec = form.spec()
    assert spec is not None and spec.build.defines == (("SCALE", "3"),)
    assert spec.build.args == ("-std=c++17", "--expt-relaxed-constexpr")
    form.target.value = "static"
    form.catalog.value = "ptxas"
    form.generations.value = 1
    results = _run_form(form, tmp_path / "r.db", timeout=120)
    # without the define the #error stops it, without --expt-relaxed-constexpr the constexpr call does
    assert results.baseline_record is not None and results.baseline_record.status == "ok", results.baseline_record
    assert results.header.metadata["build"]["defines"] == {"SCALE": "3"}
    assert results.header.metadata["build"]["args"] == ["-std=c++17", "--expt-relaxed-constexpr"]


TRITON_TUTORIAL = Path(__file__).resolve().parents[1] / "data" / "public_kernels" / "triton" / "python" / \
    "tutorials" / "01-vector-add.py"


@pytest.mark.skipif(not tool_available("ptxas"), reason="needs ptxas")
def test_a_triton_kernel_is_tuned_from_the_form_with_its_signature_and_constexprs(tmp_path):
    pytest.importorskip("triton")
    form = RunForm(folder=str(tmp_path / "runs"))
    fields = (form.signature, form.constexprs, form.num_warps, form.num_stages)
    assert all(f.layout.display == "none" for f in fields)  # the toy: none of them
    form.path.value = f"triton:{TRITON_TUTORIAL}:add_kernel"
    assert all(f.layout.display == "" for f in fields) and form.include.layout.display == "none"
    assert "`every tl.constexpr parameter without a default has a value` must hold" in form.note.value
    assert "the lab&#x27;s constexprs field BLOCK_SIZE=128" in form.note.value  # said while typing, not raised
    form.signature.value = "*fp32:16,*fp32:16,*fp32:16,i32"
    form.constexprs.value = "BLOCK_SIZE 1024"  # read as the CLI's --define reads one, with the lab's example
    assert "constexprs: `a define is NAME=VALUE" in form.note.value and "&#x27;BLOCK_SIZE 1024&#x27;" in form.note.value
    assert "Write e.g. BLOCK_SIZE=1024, ACTIVATION=leaky_relu." in form.note.value
    form.constexprs.value = "BLOCK_SIZE=a b"  # a value the CLI refuses, refused here too
    assert "&#x27;BLOCK_SIZE=a b&#x27;" in form.note.value
    form.constexprs.value = "BLOCK_SIZE=1024"
    form.num_warps.value = 8
    assert form.note.value == "" or "no GPU" in form.note.value
    assert form.catalog.value == "ptxas" and form.arch.layout.display == ""
    form.generations.value = 1
    form.pool.value = 3
    results = _run_form(form, tmp_path / "t.db", timeout=300)
    assert results.baseline_record is not None and results.baseline_record.status == "ok"
    made = results.header.kernel.extra["origin"]["triton"]
    assert made["function"] == "add_kernel" and made["constexprs"] == {"BLOCK_SIZE": 1024}
    assert made["num_warps"] == 8
    assert list((tmp_path / "runs" / "triton").glob("add_kernel.*.ptx"))  # kept beside the runs: the run names it
    form.path.value = ""
    assert all(f.layout.display == "none" for f in fields)


@pytest.mark.skipif(not tool_available("ptxas"), reason="needs ptxas")
def test_a_triton_kernel_takes_a_config_of_its_autotune_list_from_the_form(tmp_path):
    pytest.importorskip("triton")
    (tmp_path / "tuned.py").write_text(
        "import triton\nimport triton.language as tl\n\n\n"
        "@triton.autotune(configs=[triton.Config({'BLOCK': 128}, num_warps=8, num_stages=2),\n"
        "                          triton.Config({'BLOCK': 64}, num_warps=2)], key=['n'])\n"
        "@triton.jit\ndef k(x_ptr, n, BLOCK: tl.constexpr):\n"
        "    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)\n"
        "    tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * 2, mask=offs < n)\n")
    form = RunForm(folder=str(tmp_path / "runs"))
    form.path.value = f"triton:{tmp_path / 'tuned.py'}:k"
    form.signature.value = "*fp32,i32"
    assert form.autotune.layout.display == ""
    assert "--autotune-config 1 takes it, as the lab&#x27;s autotune config field does" in form.note.value
    form.autotune.value = 1
    assert (form.num_warps.value, form.num_stages.value) == (8, 2)  # the config's, shown where they apply
    made = form.spec().origin["triton"]
    assert made["constexprs"] == {"BLOCK": 128} and (made["num_warps"], made["num_stages"]) == (8, 2)
    form.autotune.value = 2
    form.constexprs.value = "BLOCK=32"  # the field overrides the config's value
    made = form.spec().origin["triton"]
    assert made["constexprs"] == {"BLOCK": 32} and made["num_warps"] == 2
    form.autotune.value = 3
    assert "`the number is one of its configs, 1 to 2` must hold, but got 3" in form.note.value


@pytest.mark.skipif(not tool_available("nvcc"), reason="needs nvcc")
def test_a_bare_file_takes_its_include_folders_and_entry_from_the_form(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "include").mkdir()
    (tmp_path / "include" / "scale.cuh").write_text("#pragma once\n__device__ float scale(float v) { return 2 * v; }\n")
    (tmp_path / "two.cu").write_text('#include "scale.cuh"\n'
                                     "__global__ void one(float* x) { x[threadIdx.x] = scale(x[threadIdx.x]); }\n"
                                     "__global__ void two(float* x, int n) { if (threadIdx.x < n) x[0] = 1.0f; }\n")
    form = RunForm()
    assert form.include.layout.display == "none" and form.entry.layout.display == "none"  # the toy: no fields
    assert not form.kernel.disabled
    form.path.value = "two.cu"
    assert form.include.layout.display == "" and form.entry.layout.display == ""
    assert form.kernel.disabled  # the dropdown cannot name another kernel than the one the path gives
    form.include.value = "no/such/folder"
    assert "each include directory exists" in form.note.value  # said while typing, not raised
    form.include.value = "include"
    form.entry.value = "two"
    spec = form.spec()
    assert spec is not None and spec.entry == "two" and spec.build.include_dirs == ((tmp_path / "include").resolve(),)
    form.target.value = "static"
    form.catalog.value = "ptxas"
    form.generations.value = 1
    results = _run_form(form, tmp_path / "r.db", timeout=120)
    assert results.baseline_record is not None and results.baseline_record.status == "ok"  # it found scale.cuh
    meta = results.header.metadata
    assert meta["entry"] == "two" and meta["build"]["include_dirs"] == [str((tmp_path / "include").resolve())]
    # a kernel folder names its own: the fields hide again
    form.path.value = ""
    assert form.include.layout.display == "none" and not form.kernel.disabled

