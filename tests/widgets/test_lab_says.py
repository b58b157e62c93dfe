"""What the lab says of a run: a runtime not re-measured, a reopened run that Start continues or a form that starts a
new one, the objectives a run's target leads with, measurements with their units, and the form's limits."""

from __future__ import annotations

import shutil

import pytest

pytest.importorskip("ipywidgets")

import compileiq_lab.space as ss
from compileiq_lab import KernelRun, Search, SearchConfiguration
from compileiq_lab.kernels import objective_choices
from compileiq_lab.viz.data import quantity_text
from compileiq_lab.widgets import Dashboard
from compileiq_lab.widgets.detail import DetailPanel

needs_gcc = pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc not installed")


@needs_gcc
def test_a_runtime_never_re_measured_is_said_to_be_one_measurement(tmp_path) -> None:
    kr = KernelRun("dot", objectives=["runtime"], workdir=tmp_path / "w")
    results = Search.of(kr, store=str(tmp_path / "r d.db"), generations=1, pool_size=2, seed=0).start()
    kr.close()
    point = next(r for r in results.records if r.status == "ok" and not r.is_baseline)
    panel = DetailPanel()
    panel.show(results, point.eval_id, None)
    assert "not re-measured: its runtime is the search's single measurement" in panel.html.value
    assert f"compileiq-lab validate &#x27;{tmp_path}/r d.db&#x27;" in panel.html.value  # quoted to paste
    panel.show(results, results.baseline_record.eval_id, None)
    assert "not re-measured" not in panel.html.value  # the baseline has no change to doubt
    python = Search(lambda c: 1e-3 * c["x"], {"x": ss.range(1, 9)}, SearchConfiguration(
        generations=1, pool_size=3, seed=0, objective_names=["runtime"]), store=str(tmp_path / "p.db")).start()
    panel.show(python, python.records[0].eval_id, None)
    assert "not re-measured" not in panel.html.value  # validate re-measures kernel runs only


def _static_dot(tmp_path, monkeypatch) -> Dashboard:
    """A dashboard whose form holds the bundled C kernel "dot" for static metrics."""
    monkeypatch.chdir(tmp_path)
    dash = Dashboard(folder=tmp_path / "runs")
    dash.form.kernel.value = "dot"
    dash.form.target.value = "static"
    return dash


@needs_gcc
def test_start_continues_a_reopened_run_until_the_form_is_edited(tmp_path, monkeypatch) -> None:
    dash = _static_dot(tmp_path, monkeypatch)
    form = dash.form
    form.objectives.value = ("text_bytes",)
    form.categories.value = (form.categories.options[0],)
    form.generations.value = 1
    dash.start()
    first = dash.wait(timeout=300)
    assert first is not None and first.status == "finished"
    dash.reopen(first.store_path)
    assert "stored up to generation 1 (finished: edit the form for a new run)" in dash.status.value
    form.folder.value = str(tmp_path / "exports")  # where exports go: not a choice of the run
    assert dash.start() is not None and dash.run.store_path == first.store_path  # continued (nothing left to do)
    dash.wait(timeout=300)
    dash.reopen(first.store_path)
    form.generations.value = 1  # set to the value it has: no change, no edit
    assert "(finished: edit the form" in dash.status.value
    form.seed.value = 1
    assert "(Start builds a new run from the form)" in dash.status.value  # said as soon as it is edited
    assert dash.start() is not None and dash.run.store_path != first.store_path  # a new run of the form's choices
    dash.wait(timeout=300)


def test_a_run_target_leads_with_its_run_objectives_and_measurements_have_units() -> None:
    assert objective_choices("c", "cpu")[0] == "runtime"  # the lab's first objective, what the export picks
    assert objective_choices("c", "static")[0] != "runtime"
    assert quantity_text("runtime_mean", 0.00031119) == "311.2 µs"
    assert quantity_text("runtime_cv", 2.51441) == "251 %" and quantity_text("runtime_iqr", 2e-6) == "2 µs"


def test_the_forms_limits_end_the_run_and_the_status_says_which(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    dash = Dashboard(folder=tmp_path / "runs")
    form = dash.form
    assert form.timeout.layout.display == "none"  # the toy's calls have no limit to set
    form.generations.value, form.max_evals.value = 50, 7
    dash.start()
    results = dash.wait(timeout=300)
    assert results is not None and results.status == "finished" and len(results.records) == 7
    assert results.header.stop_reason == "max_evaluations"
    assert "<b>finished</b> (its evaluation limit was reached)" in dash.status.value
    form.max_evals.value, form.time_budget.value = 0, 0.5
    run, _ = form.build(str(tmp_path / "t.db"))
    assert run.search.config.max_evaluations is None and run.search.config.time_budget_s == 30


@needs_gcc
def test_the_call_limit_field_is_the_kernel_runs_timeout(tmp_path, monkeypatch) -> None:
    form = _static_dot(tmp_path, monkeypatch).form
    assert form.timeout.layout.display != "none"
    form.timeout.value = 7.5
    _, kernel_run = form.build(str(tmp_path / "k.db"))
    assert kernel_run is not None and kernel_run.timeout_s == 7.5
    kernel_run.close()
