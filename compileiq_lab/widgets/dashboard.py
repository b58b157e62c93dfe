"""Dashboard: set up, start, pause and stop a tuning run in a notebook and watch it live; click a point, export it."""

from __future__ import annotations

import contextlib
import functools
import html
import logging
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import ipywidgets as w

from compileiq_lab.acf.exporting import export_notes, export_point
from compileiq_lab.exceptions import ConfigurationError
from compileiq_lab.kernels import KernelRun
from compileiq_lab.run import ReplayRun, Run
from compileiq_lab.run.events import EvaluationEvent, FailedEvent, FinishedEvent, RunEvent
from compileiq_lab.store import Results, load_results, new_store_path
from compileiq_lab.widgets.bridge import EventBridge
from compileiq_lab.widgets.detail import DetailPanel
from compileiq_lab.widgets.live import LivePlots
from compileiq_lab.widgets.notes import COMM_LOGGER, NOTES, CommErrors, baseline_banner, notes_html, status_html
from compileiq_lab.widgets.runs import open_stored_run
from compileiq_lab.widgets.setup import RunForm
from compileiq_lab.widgets.side import SidePanels

if TYPE_CHECKING:
    from compileiq_lab.store.header import RunHeader
    from compileiq_lab.store.sqlite import EvalRecord

__all__ = ["Dashboard"]

log = logging.getLogger(__name__)

#: Where runs and exports of the form go by default: next to the notebook.
DEFAULT_FOLDER = "compileiq_runs"


class Dashboard:
    """The lab: a form (kernel, target, search-space subset, objectives, settings), Start / Pause / Stop,
    live progress, a Pareto scatter and per-generation scores that stream in while the run goes,
    and a detail panel for a clicked point with an Export button.

    The run works in a background thread; its events are queued and applied here at most ~4
    times a second (the notebook stays usable). Display it as the last expression of a cell.

    Args:
        run: An existing, not yet started Run to watch (its Start button starts it); None shows the form.
        kernel_run: The KernelRun behind ``run`` (for ACF export and argv in the detail panel).
        store: Run store path for runs built from the form (default: a new file in the form's folder).
        folder: Where runs of the form and every export go (shown and editable in the form); default
            ``compileiq_runs`` in the notebook's folder.

    Every widget callback runs guarded: an exception shows as the dashboard's error line (with its
    traceback), and so does a failed widget message the kernel logs.
    """

    def __init__(self, run: Run | ReplayRun | None = None, kernel_run: KernelRun | None = None,
                 store: str | None = None, folder: str | Path = DEFAULT_FOLDER) -> None:
        self.run, self.kernel_run, self.store = run, kernel_run, store
        self._ui_lock = threading.RLock()  # widget callbacks vs the run's updates (see _guard)
        self._records: list[EvalRecord] = []
        self._header: RunHeader | None = None
        self._folder = str(folder)
        self.form = None if run is not None else RunForm(folder=self._folder)
        self.start_button = w.Button(description="Start", button_style="success", icon="play")
        self.pause_button = w.Button(description="Pause", icon="pause", disabled=True)
        self.stop_button = w.Button(description="Stop", button_style="danger", icon="stop", disabled=True)
        self.progress_bar = w.IntProgress(value=0, min=0, max=1, layout={"width": "260px"})
        self.status = w.HTML("not started")
        self.error = w.HTML()
        self.banner = w.HTML()
        self.notes = w.HTML()
        self._pending_notes: list[str] = []
        self._notes_lock = threading.Lock()
        self.detail = DetailPanel()
        self.plots: LivePlots | None = None
        self.panels: SidePanels | None = None
        self.plot_area = w.VBox()
        self.bridge = EventBridge(self._guard(self._apply))
        self._unsubscribe: Any = None
        self.start_button.on_click(self._guard(lambda _: self.start()))
        self.pause_button.on_click(self._guard(lambda _: self.toggle_pause()))
        self.stop_button.on_click(self._guard(lambda _: self.stop()))
        self.detail.export_button.on_click(self._guard(lambda _: self._export_clicked()))
        controls = w.HBox([self.start_button, self.pause_button, self.stop_button, self.progress_bar])
        # the form folds away while a run goes (one click opens it again); the detail panel is a tab beside the plot
        self.setup = w.Accordion([self.form.box] if self.form else [], titles=("setup",) if self.form else (),
                                 selected_index=0 if self.form else None)
        self.setup.add_class("compileiq-setup")
        parts = ([self.setup] if self.form else []) + [controls, self.status, self.error, self.banner,
                                                       self.notes, self.plot_area]
        self.widget = w.VBox(parts)
        self.widget.add_class("compileiq-dashboard")
        self.status.add_class("compileiq-status")
        self.error.add_class("compileiq-error")
        self.banner.add_class("compileiq-banner")
        self.notes.add_class("compileiq-notes")
        self._comm_errors = CommErrors(self)
        logging.getLogger(COMM_LOGGER).addHandler(self._comm_errors)
        package_log = logging.getLogger("compileiq_lab")
        if NOTES not in package_log.handlers:
            package_log.addHandler(NOTES)
        NOTES.dashboards.add(self)
        self._form_error = self._edited = False  # the error line says why the form's choices could not start a run
        if self.form is not None:  # ... until they are edited
            self.form.on_edit(self._form_edited)
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
        return cls(*open_stored_run(path, objective, generations, workers))

    def reopen(self, path: str) -> None:
        """Show the stored run ``path`` here instead (the runs tab's Open): its points at once; Start continues a
        kernel run (until the form is edited: then Start builds the form's run). A run of a Python objective cannot be
        rebuilt from its store: it is replayed instead."""
        if self.run is not None and self.run.running:
            raise ConfigurationError("a run is still going; stop it before opening another")
        with self._notes_lock:  # the last run's notes are not this one's (those of opening it are)
            self._pending_notes = []
        run: Run | ReplayRun
        if load_results(path).header.kernel is None:  # a Python objective's run: replayed, not continued
            from compileiq_lab.run import replay_run

            run, kernel_run = replay_run(path), None
        else:
            run, kernel_run = open_stored_run(path)  # opened first: a run that cannot open leaves this one as it was
        self._release_evaluator()
        self.kernel_run = kernel_run
        self._attach(run)

    def _ipython_display_(self) -> None:
        from IPython.display import display

        display(self.widget)  # type: ignore[no-untyped-call]

    # -- errors ----------------------------------------------------------------------------------
    def show_error(self, message: str, tb: str = "") -> None:
        """Show an error line (with its traceback folded) above the plots."""
        details = f"<details><summary>traceback</summary><pre>{html.escape(tb)}</pre></details>" if tb else ""
        self.error.value = f"<b style='color:#b00'>{html.escape(message)}</b>{details}"

    def _guard(self, fn: Callable[..., Any]) -> Callable[..., None]:
        """``fn`` for a widget callback: an exception it raises is logged and shown as the error line. Callbacks
        and the run's updates take turns (JupyterLab 4 may deliver widget messages in another kernel thread)."""
        @functools.wraps(fn)
        def guarded(*args: Any, **kwargs: Any) -> None:
            try:
                with self._ui_lock, self._owning():
                    fn(*args, **kwargs)
            except Exception as exc:  # shown in the dashboard: a callback must not raise
                log.debug("dashboard callback %s failed", getattr(fn, "__name__", fn), exc_info=True)
                self.show_error(f"{type(exc).__name__}: {exc}", traceback.format_exc())
        return guarded

    @contextlib.contextmanager
    def _owning(self) -> Iterator[None]:
        """The package's warnings in this thread meanwhile go to this dashboard's notes."""
        outer = getattr(NOTES.active, "dashboard", None)
        NOTES.active.dashboard = self
        try:
            yield
        finally:
            NOTES.active.dashboard = outer

    def _form_edited(self, of_the_run: bool) -> None:
        self._edited |= of_the_run  # Start builds a new run from the form, even where a reopened run waits
        if self._form_error:
            self.error.value, self._form_error = "", False
        if self.run is not None and self.plots is not None:
            self._show_progress()

    def queue_note(self, message: str) -> None:
        with self._notes_lock:
            if message not in self._pending_notes:
                self._pending_notes.append(message)

    def _show_notes(self) -> None:
        """The package's warnings since the last run started, one line each (notebook thread only)."""
        with self._notes_lock:
            notes = list(self._pending_notes)
        self.notes.value = notes_html(notes[-6:])

    @property
    def folder(self) -> Path:
        """Where runs of the form and exports go (the form's folder field, else the one given)."""
        return Path(self.form.folder.value.strip() or DEFAULT_FOLDER) if self.form is not None else Path(self._folder)

    # -- control ---------------------------------------------------------------------------------
    def start(self) -> Run | ReplayRun | None:
        """Build the run from the form if needed, and start it. Returns the run (None if it could not be built)."""
        if self.run is not None and self.run.running:
            self.error.value = "<span style='color:#b00'>a run is still going; stop it and wait for it to end</span>"
            return None
        if self.run is None or self.run.state != "idle" or (self.form is not None and self._edited):
            if self.form is None:
                self.error.value = "<span style='color:#b00'>this run has ended; make a new Dashboard</span>"
                return None
            self._release_evaluator()
            with self._notes_lock:  # the notes of the last run go; those of building this one are shown
                self._pending_notes = []
            self.status.value = "<b>building the run</b> from the form ..."
            try:
                with self._owning():
                    run, self.kernel_run = self.form.build(self.store or str(new_store_path(self.folder)))
            except Exception as exc:  # noqa: BLE001 - shown in the UI with its fix
                self.banner.value = ""  # the last run's banner must not stand beside this error
                if self.run is not None:  # (not "building" any more)
                    self._show_progress()
                else:
                    self.status.value = "not started"
                said = html.escape(self.form.fields.in_form_terms(str(exc)))
                self.error.value, self._form_error = f"<span style='color:#b00'>{said}</span>", True
                return None
            kr = self.kernel_run  # what the CLI says before a run: the catalog's note, the controls left out
            for note in filter(None, [*(f"{c} left out: {y}" for c, y in kr.left_out), kr.catalog_note] if kr else ()):
                self.queue_note(note)
            self._attach(run)
        assert self.run is not None
        self.error.value, self._form_error = "", False
        self.run.start()
        self.setup.selected_index = None  # fold the form away while the run goes
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
            self._show_progress()  # "stopping" at once: a call in flight ends first (at worst at its time limit)

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
        """Show one evaluation in the detail panel (what clicking its point does: of several points with
        identical scores, the representative is shown, as ``tune`` and ``export`` pick it)."""
        if self.run is not None:
            results = self.run.results()
            rep = results.representative_of(eval_id)
            self.detail.show(results, rep.eval_id if rep is not None else eval_id, self.kernel_run)
            if self.plots is not None:
                self.plots.highlight(self.detail.eval_id)
                self.plots.show_tab("point")
            if self.panels is not None:
                self.panels.highlight(self.detail.eval_id)

    def export(self, eval_id: int | None = None, path: str | Path | None = None) -> Path:
        """Write the selected (or given) evaluation as an ACF (kernel runs) or JSON into ``folder`` (a relative
        ``path`` is taken inside it); returns the full path."""
        eval_id = self.detail.eval_id if eval_id is None else eval_id
        if self.run is None or eval_id is None:
            raise ConfigurationError("select a point first (click it, or Dashboard.select(eval_id))")
        return export_point(self.run.results(), eval_id, self.kernel_run, path, folder=self.folder)

    # -- internals -------------------------------------------------------------------------------
    def _attach(self, run: Run | ReplayRun) -> None:
        if self._unsubscribe is not None:
            self._unsubscribe()
        self.bridge.discard()
        self.run, self._edited = run, False
        self._unsubscribe = run.subscribe(self.bridge.push)
        self.detail.clear()  # the last run's point must not stay (nor be exported from this run)
        self.error.value = self.banner.value = ""
        self.plots = LivePlots(list(run.search.objectives), run.search.config.generations, on_select=self.select,
                               guard=self._guard)
        self.plots.add_tab("point", self.detail.box, first=True)
        self.panels = SidePanels(list(run.search.objectives), self.folder, self.select, self.reopen, self._guard)
        self.panels.attach(self.plots)
        self.plots.show_tab("point")
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
        if self.panels is not None:
            self.panels.update(snapshot)
        self._show_progress()
        self._show_banner(snapshot)
        self._show_notes()

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
                snapshot = self._snapshot()
                self.plots.update(snapshot)
                if self.panels is not None:
                    self.panels.update(snapshot)
                self._show_progress()
                self._show_banner(snapshot)
                self._show_notes()
        failed = [e for e in events if isinstance(e, FailedEvent)]
        if failed:
            self.error.value = (f"<b style='color:#b00'>the run failed: {html.escape(failed[-1].error)}</b>"
                                f"<pre>{html.escape(failed[-1].traceback)}</pre>")
        if any(isinstance(e, (FinishedEvent, FailedEvent)) for e in events):
            self._buttons()
            if self.run is not None:
                self._show_banner(self.run.results())  # the header now says why a run stopped early
            if self.panels is not None:  # the runs tab read this run's store when it started
                self.panels.runs.refresh()
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
        self.status.value = status_html(p, self._records, self._header, self.run.store_path,
                                        edited=self._edited, form=self.form is not None)

    def _show_banner(self, results: Results) -> None:
        """A banner when the baseline (compiler defaults) failed (see ``baseline_banner``)."""
        self.banner.value = baseline_banner(results, self.form.fields.in_form_terms if self.form else str)

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
        self.detail.exported(out, export_notes(out, self.kernel_run))

