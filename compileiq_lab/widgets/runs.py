"""RunsList: the run stores in a folder, newest first, with their facts; overlay their fronts or open one (to
continue it: ``open_stored_run``)."""

from __future__ import annotations

import functools
import html
import logging
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import ipywidgets as w

from compileiq_lab.exceptions import ConfigurationError
from compileiq_lab.kernels import KernelRun
from compileiq_lab.run import Run
from compileiq_lab.store import DEFAULT_DIR, Results, load_results
from compileiq_lab.viz.overlay import overlay_fronts_figure
from compileiq_lab.widgets.notes import notes_html

__all__ = ["RunEntry", "RunsList", "open_stored_run"]

log = logging.getLogger(__name__)

_NONE = "\u2014"  # an empty cell: a fact the run does not have (a Python objective has no arch or catalog)


@dataclass(frozen=True)
class RunEntry:
    """One run store of the folder, as its header and rows describe it.

    Attributes:
        path: The .db file.
        kernel: The kernel tuned, with the entry named for a bare file (``"histo (stencil2d)"``), or
            ``"Python: <objective>"`` for a run of a Python objective.
        arch: The CUDA target ("" when none).
        catalog: The compiler catalog ("" for a Python objective).
        objectives: Objective names, in score order.
        evaluations: Stored evaluations; ``failed`` of them did not succeed.
        state: How the run stands, as its header says ("finished", "stopped", "running", ...).
        started_at: When the run was created (seconds since the epoch; the file's time when the header lacks it).
        damage: What could not be read from a damaged store (empty when intact).
    """

    path: str
    kernel: str
    arch: str
    catalog: str
    objectives: tuple[str, ...]
    evaluations: int
    failed: int
    state: str
    started_at: float
    damage: tuple[str, ...] = ()

    @property
    def started(self) -> str:
        """The start time, local, to the minute."""
        try:
            return time.strftime("%Y-%m-%d %H:%M", time.localtime(self.started_at)) if self.started_at else "?"
        except (OverflowError, OSError, ValueError):  # a foreign or damaged store's time: never break the list
            return "?"

    def option(self) -> str:
        """The entry's line in the list of runs (the file name keeps two alike runs apart)."""
        what = " ".join(p for p in (self.kernel, self.arch, self.catalog) if p)
        objectives = ", ".join(self.objectives)
        return (f"{self.started}  {what}  [{objectives}]  {self.evaluations} evals, {self.state}  "
                f"({Path(self.path).name})")


def _read_entry(path: Path) -> RunEntry:
    """A store's facts; raises what ``load_results`` raises, and ValueError for a file holding no run."""
    res = load_results(str(path))
    head = res.header
    if res.damage and not res.records and not head.created_at and not head.metadata:
        raise ValueError(f"not a run store ({'; '.join(res.damage)})")
    meta = head.kernel
    if meta is not None:
        entry = meta.extra.get("entry")  # a bare file's named kernel: two kernels of one file are two lines
        kernel, arch, catalog = meta.kernel + (f" ({entry})" if entry else ""), meta.arch or "", meta.catalog
    else:
        kernel, arch, catalog = f"Python: {head.objective.rsplit('.', 1)[-1] or '?'}", "", ""
    failed = sum(1 for r in res.records if r.status != "ok")
    return RunEntry(str(path), kernel, arch, catalog, tuple(res.objective_names), len(res), failed, res.status,
                    float(head.created_at) or path.stat().st_mtime, tuple(res.damage))


def _shared(runs: Sequence[tuple[str, ...]]) -> list[str]:
    """The objective names every run has, in the first run's order."""
    return [n for n in runs[0] if all(n in other for other in runs[1:])] if runs else []


class RunsList:
    """The run stores (``*.db``) of a folder, newest first: a table of their kernel, arch, catalog, objectives,
    evaluations, state and start time, a list to pick runs from, Refresh, "Overlay fronts" (the picked runs'
    fronts on one scatter, ``overlay_fronts_figure``, on the x/y objectives they share) and Open (one picked run:
    ``on_open(path)``; the dashboard reopens it with ``Dashboard.open``).

    A file that cannot be read as a run is left out with a note saying why; nothing here raises in a callback:
    an error shows as the message line (or goes to ``guard``).

    Args:
        folder: Where the runs are (the dashboard's folder; default ``compileiq_runs``).
        on_open: Called with the path of the run to open.
        guard: Wraps each widget callback (the dashboard's: an exception becomes its error line); default: the
            exception is shown as this list's message line.
    """

    def __init__(self, folder: str | Path = DEFAULT_DIR, on_open: Callable[[str], Any] | None = None,
                 guard: Callable[[Callable[..., None]], Callable[..., None]] | None = None) -> None:
        self.folder = Path(folder)
        self.on_open = on_open
        self.entries: list[RunEntry] = []
        self.skipped: list[tuple[str, str]] = []  # (file, why)
        self._updating = False  # the x/y pickers are being refilled: no swapping meanwhile
        guard = guard or self._guard
        self.title = w.HTML()
        self.table = w.HTML(layout={"overflow": "auto", "max_width": "100%", "flex": "0 0 auto"})  # never squeezed
        self.notes = w.HTML()
        self.message = w.HTML()
        self.refresh_button = w.Button(description="Refresh", icon="refresh", tooltip="read the folder again")
        self.select = w.SelectMultiple(options=[], rows=8, description="runs", layout={"width": "95%"})
        self.x = w.Dropdown(description="x", options=[], layout={"width": "220px"})
        self.y = w.Dropdown(description="y", options=[], layout={"width": "220px"})
        self.overlay_button = w.Button(description="Overlay fronts", icon="line-chart",
                                       tooltip="the picked runs' fronts on the x/y objectives, on one scatter")
        self.open_button = w.Button(description="Open", icon="folder-open", tooltip="open the picked run in the "
                                    "dashboard (Start continues it; once the form is edited, the form's run)")
        self.figure: Any = None  # the overlay's FigureWidget, built on the first overlay
        self.figure_area = w.VBox()
        self.refresh_button.on_click(guard(lambda _: self._refresh_clicked()))
        self.overlay_button.on_click(guard(lambda _: self.overlay()))
        self.open_button.on_click(guard(lambda _: self.open()))
        self.select.observe(guard(self._selection_changed), names="value")
        self.x.observe(guard(self._axes_changed), names="value")
        self.y.observe(guard(self._axes_changed), names="value")
        self.box = w.VBox([self.title, self.refresh_button, self.table, self.notes, self.select,
                           w.HBox([self.x, self.y, self.overlay_button, self.open_button],
                                  layout={"flex_flow": "row wrap"}),  # the side panel is narrow: wrap, never cut
                           self.message, self.figure_area])
        self.box.add_class("compileiq-runs")
        self.table.add_class("compileiq-runs-table")
        self.notes.add_class("compileiq-runs-notes")
        self.message.add_class("compileiq-runs-message")
        self.refresh()

    def _ipython_display_(self) -> None:
        from IPython.display import display

        display(self.box)  # type: ignore[no-untyped-call]

    def _guard(self, fn: Callable[..., Any]) -> Callable[..., None]:
        @functools.wraps(fn)
        def guarded(*args: Any, **kwargs: Any) -> None:
            try:
                fn(*args, **kwargs)
            except Exception as exc:  # shown here: a callback must not raise
                log.debug("runs list callback failed", exc_info=True)
                self._say(f"{type(exc).__name__}: {exc}", error=True, tb=traceback.format_exc())
        return guarded

    def _say(self, text: str, error: bool = False, tb: str = "") -> None:
        details = f"<details><summary>traceback</summary><pre>{html.escape(tb)}</pre></details>" if tb else ""
        style = "color:#b00;font-weight:bold" if error else "color:#333"
        self.message.value = f"<span style='{style}'>{html.escape(text)}</span>{details}" if text else ""

    # -- the folder --------------------------------------------------------------------------------
    def refresh(self) -> list[RunEntry]:
        """Read the folder again: every run store's facts, newest first (unreadable files noted and left out);
        the picked runs stay picked while their files are there. Returns the entries."""
        entries: list[RunEntry] = []
        skipped: list[tuple[str, str]] = []
        paths = sorted(self.folder.glob("*.db")) if self.folder.is_dir() else []
        for path in paths:
            try:
                entries.append(_read_entry(path))
            except Exception as exc:  # any unreadable file is a note, never an error of the list
                log.debug("skipping %s", path, exc_info=True)
                why = str(exc).strip()
                skipped.append((path.name, why.splitlines()[0] if why else type(exc).__name__))
        entries.sort(key=lambda e: (e.started_at, e.path), reverse=True)
        self.entries, self.skipped = entries, skipped
        picked = [p for p in self.select.value if any(e.path == p for e in entries)]
        self.select.options = [(e.option(), e.path) for e in entries]
        self.select.value = tuple(picked)
        self._show_table()
        self._selection_changed()
        return entries

    def _refresh_clicked(self) -> None:
        self.refresh()
        self._say("")

    def _show_table(self) -> None:
        where = html.escape(str(self.folder))
        if not self.folder.is_dir():
            self.title.value = f"<b>runs in <code>{where}</code></b>: the folder does not exist (yet)"
        else:
            self.title.value = (f"<b>runs in <code>{where}</code></b>: {len(self.entries)} run store"
                                f"{'' if len(self.entries) == 1 else 's'}, newest first")
        head = ("file", "kernel", "arch", "catalog", "objectives", "evaluations", "state", "started")
        rows = []
        for e in self.entries:
            evals = f"{e.evaluations}" + (f" ({e.failed} failed)" if e.failed else "")
            cells = (Path(e.path).name, e.kernel, e.arch or _NONE, e.catalog or _NONE, ", ".join(e.objectives),
                     evals, e.state + (" (damaged)" if e.damage else ""), e.started)
            rows.append("<tr>" + "".join(f"<td style='padding:0 8px;white-space:nowrap'>{html.escape(c)}</td>"
                                         for c in cells) + "</tr>")
        header = "<tr>" + "".join(f"<th style='padding:0 8px;text-align:left'>{h}</th>" for h in head) + "</tr>"
        self.table.value = (f"<div style='max-height:16em;overflow:auto'><table>{header}{''.join(rows)}</table></div>"
                            if rows else "")
        notes = [f"skipped {name}: {why}" for name, why in self.skipped]
        notes += [f"{Path(e.path).name} is damaged: {'; '.join(e.damage)}" for e in self.entries if e.damage]
        self.notes.value = notes_html(notes)

    # -- picking -----------------------------------------------------------------------------------
    @property
    def picked(self) -> list[RunEntry]:
        """The picked runs, in the list's order (newest first)."""
        chosen = set(self.select.value)
        return [e for e in self.entries if e.path in chosen]

    def _selection_changed(self, change: Any = None) -> None:
        shared = _shared([e.objectives for e in self.picked])
        old_x, old_y = self.x.value, self.y.value
        self._updating = True
        try:
            self.x.options = self.y.options = shared
            self.x.value = old_x if old_x in shared else (shared[0] if shared else None)
            others = [n for n in shared if n != self.x.value]
            self.y.value = old_y if old_y in others else (others[0] if others else None)
        finally:
            self._updating = False

    def _axes_changed(self, change: dict[str, Any]) -> None:
        if not self._updating and self.x.value is not None and self.x.value == self.y.value:
            # one objective on both axes: the other picker takes another one
            other = next((n for n in self.x.options if n != self.x.value), None)
            (self.y if change["owner"] is self.x else self.x).value = other

    # -- actions -----------------------------------------------------------------------------------
    def overlay(self) -> Any:
        """Draw the picked runs' fronts on the x/y objectives into the FigureWidget below (read from their stores
        now: a running run shows its latest points). Returns the FigureWidget, or None (the reason is shown)."""
        picked = self.picked
        if not picked:
            self._say("pick one or more runs in the list to overlay their fronts", error=True)
            return None
        x, y = self.x.value, self.y.value
        if x is None or y is None:  # no two objectives all picked runs share: let the figure say which run lacks
            wide = next((e for e in picked if len(e.objectives) >= 2), None)
            if wide is None:
                self._say("the picked runs have one objective each; a front needs two: pick runs of two or more "
                          "objectives", error=True)
                return None
            x, y = wide.objectives[:2]
        runs: list[Results] = [load_results(e.path) for e in picked]
        try:
            fig = overlay_fronts_figure(runs, x, y)
        except Exception as exc:  # noqa: BLE001 - a refusal (runs without shared objectives, no plotly) is shown
            self._say(str(exc), error=True)
            return None
        if self.figure is None:
            import plotly.graph_objects as go

            self.figure = go.FigureWidget()
            self.figure.add_class("compileiq-overlay")
            self.figure_area.children = (self.figure,)
        self.figure.data = ()  # the last overlay's traces go, this one's come (one message each)
        self.figure.add_traces(list(fig.data))
        self.figure.layout = fig.layout
        self._say(f"fronts of {len(runs)} run{'s' if len(runs) != 1 else ''}: {x} vs {y}")
        return self.figure

    def open(self) -> None:
        """Call ``on_open`` with the one picked run's path."""
        picked = self.picked
        if len(picked) != 1:
            self._say(f"pick exactly one run to open ({len(picked)} picked)", error=True)
            return
        if self.on_open is None:
            self._say("nothing to open the run in: give RunsList(on_open=...) (the dashboard does)", error=True)
            return
        self.on_open(picked[0].path)
        self._say(f"opened {Path(picked[0].path).name}")


def open_stored_run(path: str, objective: Any = None, generations: int | None = None,
                    workers: int | None = None) -> tuple[Run, KernelRun | None]:
    """A stored run to continue: rebuilt from its header (kernel runs), or with ``objective`` given again."""
    header = load_results(path).header
    if header.kernel is None:
        if objective is None:
            raise ConfigurationError(f"run {path!r} was made with a Python objective ({header.objective}); "
                                     "pass it again: Dashboard.open(path, objective=fn)")
        return Run.open(path, objective, workers=workers or 1, generations=generations), None
    kernel_run = KernelRun.from_header(header)
    run = Run.open(path, kernel_run, workers=workers or kernel_run.workers, generations=generations,
                   constraint=kernel_run.constraint)
    return run, kernel_run
