"""Dashboard: set up, start, pause and stop a tuning run in a notebook and watch it live; click a point, export it."""

from __future__ import annotations

import html
import logging
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import ipywidgets as w

from compileiq_lab.exceptions import ConfigurationError
from compileiq_lab.kernels import KernelRun
from compileiq_lab.run import Run
from compileiq_lab.run.events import EvaluationEvent, FailedEvent, FinishedEvent, RunEvent
from compileiq_lab.store import Results, load_results
from compileiq_lab.widgets.bridge import EventBridge
from compileiq_lab.widgets.detail import DetailPanel, export_point
from compileiq_lab.widgets.live import LivePlots
from compileiq_lab.widgets.setup import RunForm

if TYPE_CHECKING:
    from compileiq_lab.store.header import RunHeader
    from compileiq_lab.store.sqlite import EvalRecord

__all__ = ["Dashboard"]

log = logging.getLogger(__name__)


class Dashboard:
    """The lab: a form (kernel, target, search-space subset, objectives, settings), Start / Pause / Stop,
    live progress, a Pareto scatter and per-generation scores that stream in while the run goes,
    and a detail panel for a clicked point with an Export button.

    The run works in a background thread; its events are queued and applied here at most ~4
    times a second (the notebook stays usable). Display it as the last expression of a cell.

    Args:
        run: An existing, not yet started Run to watch (its Start button starts it); None shows the form.
        kernel_run: The KernelRun behind ``run`` (for ACF export and argv in the detail panel).
        store: Run store path for runs built from the form (default: a new file under ./compileiq_runs/).
    """

    def __init__(self, run: Run | None = None, kernel_run: KernelRun | None = None, store: str | None = None) -> None:
        self.run, self.kernel_run, self.store = run, kernel_run, store
        self._records: list[EvalRecord] = []
        self._header: RunHeader | None = None
        self.form = None if run is not None else RunForm()
        self.start_button = w.Button(description="Start", button_style="success", icon="play")
        self.pause_button = w.Button(description="Pause", icon="pause", disabled=True)
        self.stop_button = w.Button(description="Stop", button_style="danger", icon="stop", disabled=True)
        self.progress_bar = w.IntProgress(value=0, min=0, max=1, layout={"width": "260px"})
        self.status = w.HTML("not started")
        self.error = w.HTML()
        self.detail = DetailPanel()
        self.plots: LivePlots | None = None
        self.plot_area = w.VBox()
        self.bridge = EventBridge(self._apply)
        self._unsubscribe: Any = None
        self.start_button.on_click(lambda _: self.start())
        self.pause_button.on_click(lambda _: self.toggle_pause())
        self.stop_button.on_click(lambda _: self.stop())
        self.detail.export_button.on_click(lambda _: self._export_clicked())
        controls = w.HBox([self.start_button, self.pause_button, self.stop_button, self.progress_bar])
        parts = ([self.form.box] if self.form else []) + [controls, self.status, self.error, self.plot_area,
                                                          self.detail.box]
        self.widget = w.VBox(parts)
        self.widget.add_class("compileiq-dashboard")
        self.status.add_class("compileiq-status")
        if run is not None:
            self._attach(run)

    @classmethod
    def open(cls, path: str, objective: Any = None, generations: int | None = None,
             workers: int | None = None) -> Dashboard:
        """A dashboard over a stored run (after a closed notebook or a restarted kernel): its points are shown
        at once, and Start continues it (to ``generations`` if given) without redoing any evaluation.

        Runs made by `tune` or the dashboard's form are rebuilt from their header (kernel, catalog,
        objectives, arch); a run of a Python objective needs that ``objective`` again.

        Raises:
            ConfigurationError: A Python-objective run opened without its objective.
        """
        header = load_results(path).header
        if header.kernel is None:
            if objective is None:
                raise ConfigurationError(f"run {path!r} was made with a Python objective ({header.objective}); "
                                         "pass it again: Dashboard.open(path, objective=fn)")
            return cls(Run.open(path, objective, workers=workers or 1, generations=generations))
        kernel_run = KernelRun.from_header(header)
        run = Run.open(path, kernel_run, workers=workers or kernel_run.workers, generations=generations,
                       constraint=kernel_run.constraint)
        return cls(run, kernel_run)

    def _ipython_display_(self) -> None:
        from IPython.display import display

        display(self.widget)  # type: ignore[no-untyped-call]

    # -- control ---------------------------------------------------------------------------------
    def start(self) -> Run | None:
        """Build the run from the form if needed, and start it. Returns the run (None if it could not be built)."""
        if self.run is not None and self.run.running:
            self.error.value = "<span style='color:#b00'>a run is still going; stop it and wait for it to end</span>"
            return None
        if self.run is None or self.run.state not in ("idle",):
            if self.form is None:
                self.error.value = "<span style='color:#b00'>this run has ended; make a new Dashboard</span>"
                return None
            self._release_evaluator()
            try:
                run, self.kernel_run = self.form.build(self.store)
            except Exception as exc:  # noqa: BLE001 - shown in the UI with its fix
                self.error.value = f"<span style='color:#b00'>{html.escape(str(exc))}</span>"
                return None
            self._attach(run)
        assert self.run is not None
        self.error.value = ""
        self.run.start()
        self._buttons()
        return self.run

    def toggle_pause(self) -> None:
        """Pause a running run, or resume a paused one."""
        if self.run is None:
            return
        self.run.resume() if self.run.state == "paused" else self.run.pause()
        self._buttons()
        self._show_progress()

    def stop(self) -> None:
        """Stop the run before its next evaluation."""
        if self.run is not None:
            self.run.stop()
            self._buttons()

    def wait(self, timeout: float | None = None) -> Results | None:
        """Block until the run ends (or ``timeout``), then show its final state (for scripts and headless notebooks)."""
        try:
            return self.run.join(timeout) if self.run is not None else None
        finally:
            self.flush()

    def flush(self) -> None:
        """Apply queued updates now (they are applied automatically in a live notebook)."""
        self.bridge.flush()
        if self.run is not None and self.plots is not None:
            self.refresh()

    def select(self, eval_id: int) -> None:
        """Show one evaluation in the detail panel (what clicking its point does)."""
        if self.run is not None:
            self.detail.show(self.run.results(), eval_id, self.kernel_run)

    def export(self, eval_id: int | None = None, path: str | Path | None = None) -> Path:
        """Write the selected (or given) evaluation as an ACF (kernel runs) or JSON; returns the path."""
        eval_id = self.detail.eval_id if eval_id is None else eval_id
        if self.run is None or eval_id is None:
            raise ConfigurationError("select a point first (click it, or Dashboard.select(eval_id))")
        return export_point(self.run.results(), eval_id, self.kernel_run, path)

    # -- internals -------------------------------------------------------------------------------
    def _attach(self, run: Run) -> None:
        if self._unsubscribe is not None:
            self._unsubscribe()
        self.bridge.discard()
        self.run = run
        self._unsubscribe = run.subscribe(self.bridge.push)
        self.plots = LivePlots([o.name for o in run.search.objectives], on_select=self.select)
        self.plot_area.children = (self.plots.box,)
        self.progress_bar.max = run.search.config.generations
        self.refresh()
        self._buttons()

    def refresh(self) -> None:
        """Redraw everything from a fresh snapshot of the run's store."""
        assert self.run is not None and self.plots is not None
        snapshot = self.run.results()
        self._records, self._header = list(snapshot.records), snapshot.header
        self.plots.update(snapshot)
        self._show_progress()

    def _snapshot(self) -> Results:
        """The run as the dashboard knows it: the rows the events carried, no store read."""
        assert self.run is not None
        return Results(self._records, objectives=self.run.search.objectives, header=self._header,
                       status=self.run.state, store_path=self.run.store_path)

    def _apply(self, events: list[RunEvent]) -> None:
        t0 = time.perf_counter()
        gap = False
        for e in events:
            if isinstance(e, EvaluationEvent):  # rows are committed in eval-id order: append the next one
                gap |= e.record.eval_id > len(self._records)
                if e.record.eval_id == len(self._records):
                    self._records.append(e.record)
        if self.run is not None and self.plots is not None:
            if gap:
                self.refresh()  # a row went missing on the way: read the store once
            else:
                self.plots.update(self._snapshot())
                self._show_progress()
        failed = [e for e in events if isinstance(e, FailedEvent)]
        if failed:
            self.error.value = (f"<b style='color:#b00'>the run failed: {html.escape(failed[-1].error)}</b>"
                                f"<pre>{html.escape(failed[-1].traceback)}</pre>")
        if any(isinstance(e, (FinishedEvent, FailedEvent)) for e in events):
            self._buttons()
            if self.form is not None:  # built here: stop its GPU worker (the results stay in the store)
                self._release_evaluator()
        if any(isinstance(e, FinishedEvent) for e in events) and self.plots is not None:
            self.plots.show_influence()
        log.debug("dashboard update of %d events took %.1f ms", len(events), 1e3 * (time.perf_counter() - t0))

    def _release_evaluator(self) -> None:
        if self.kernel_run is not None:
            self.kernel_run.close()

    def _show_progress(self) -> None:
        assert self.run is not None
        p = self.run.progress()
        self.progress_bar.value = min(p["generation"], self.progress_bar.max)
        fails = ", ".join(f"{n} {html.escape(s)}" for s, n in sorted(p["statuses"].items()) if s != "ok")
        eta = f", about {p['eta_s']:.0f} s left" if p["eta_s"] and self.run.running else ""
        self.status.value = (f"<b>{html.escape(p['state'])}</b>: generation {p['generation']}/{p['generations']}, "
                             f"{p['evaluations']} evaluations{' (failed: ' + fails + ')' if fails else ''}, "
                             f"{p['elapsed_s']:.0f} s{eta}; store <code>{html.escape(self.run.store_path)}</code>")

    def _buttons(self) -> None:
        state = self.run.state if self.run is not None else "idle"
        live = state in ("running", "paused", "stopping")
        self.start_button.disabled = live or (self.form is None and state != "idle")
        self.pause_button.disabled = state not in ("running", "paused")
        self.pause_button.description = "Resume" if state == "paused" else "Pause"
        self.stop_button.disabled = state not in ("running", "paused")

    def _export_clicked(self) -> None:
        try:
            out = self.export(path=self.detail.path.value.strip() or None)
        except Exception as exc:  # noqa: BLE001 - shown in the UI
            self.detail.message.value = f"<span style='color:#b00'>{html.escape(str(exc))}</span>"
            return
        self.detail.message.value = f"wrote <code class='compileiq-export'>{html.escape(str(out))}</code>"
