"""LivePlots: the dashboard's FigureWidgets (Pareto scatter, 3-objective view, convergence), updated in batches."""

from __future__ import annotations

import asyncio
import html
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import ipywidgets as w
import numpy as np

from compileiq_lab.analysis.influence import control_influence
from compileiq_lab.exceptions import ConfigurationError, OptionalDependencyError
from compileiq_lab.kernels import Objective
from compileiq_lab.run.background import in_background
from compileiq_lab.search.pareto import pareto_mask
from compileiq_lab.viz.data import failure_text, history_data, hover_text
from compileiq_lab.viz.figures import weak_fit_note

if TYPE_CHECKING:
    import pandas as pd

    from compileiq_lab.store.results import Results

__all__ = ["LivePlots"]

_FRONT, _FAILED, _BASE = "#d62728", "#7f7f7f", "#ff7f0e"
# trace order in the Pareto FigureWidget (fixed, so updates only assign data)
EVALS, FRONT, BASELINE, FAILED = range(4)


class LivePlots:
    """The live figures of a run: a Pareto scatter with x/y pickers (points coloured by generation,
    the front highlighted, the baseline starred, failures on a strip below), a 3-objective view
    for runs with three or more objectives, and best/median per generation per objective.

    Every trace exists from the start (possibly empty): ``update(results)`` assigns new data
    inside ``batch_update()``, one message per figure, as plain lists: a numpy array in a trace makes
    plotly's widget fail on the browser's reply (``_remove_overlapping_props``: "truth value of an
    array is ambiguous"). Clicking a point calls ``on_select(eval_id)``.

    Args:
        objectives: The run's objectives (axis titles carry their unit and direction).
        generations: The run's generations (the colour bar spans 0..generations).
        on_select: Called with the eval id of a clicked point.
        guard: Wraps each widget callback (the dashboard's: an exception becomes its error line).
    """

    def __init__(self, objectives: list[Objective], generations: int = 1,
                 on_select: Callable[[int], None] | None = None,
                 guard: Callable[[Callable[..., None]], Callable[..., None]] | None = None) -> None:
        import plotly.graph_objects as go

        self.objectives = list(objectives)
        self.names = [o.name for o in self.objectives]
        self.labels = {o.name: o.label for o in self.objectives}
        self.generations = generations
        guard = guard or (lambda fn: fn)
        self.on_select = on_select
        k = len(self.names)
        self.x = w.Dropdown(options=self.names, value=self.names[0], description="x", layout={"width": "220px"})
        self.y = w.Dropdown(options=self.names if k > 1 else ["evaluation"],
                            value=self.names[1] if k > 1 else "evaluation", description="y", layout={"width": "220px"})
        self.view = w.ToggleButtons(options=["2-D", "3-D"] if k >= 3 else ["2-D"], value="2-D",
                                    layout={"width": "auto"})
        scatter = dict(mode="markers", hovertemplate="%{text}<extra></extra>")
        self.pareto = go.FigureWidget(data=[
            go.Scatter(name="evaluations", marker={"color": [], "colorscale": "Viridis", "size": 8, "opacity": 0.8,
                                                   "cmin": 0, "cmax": max(1, generations),
                                                   "colorbar": {"title": {"text": "generation"}}}, **scatter),
            go.Scatter(name="Pareto front", mode="lines+markers", hoverinfo="skip",
                       line={"color": _FRONT, "shape": "hv", "width": 1.5},
                       marker={"symbol": "circle-open", "size": 13, "color": _FRONT, "line": {"width": 2}}),
            go.Scatter(name="baseline (compiler defaults)", marker={"symbol": "star", "size": 16, "color": _BASE},
                       **scatter),
            go.Scatter(name="failed (no scores)", marker={"symbol": "x", "size": 8, "color": _FAILED}, **scatter)],
            layout=go.Layout(template="plotly_white", height=460, margin={"t": 40, "b": 40},
                             legend={"orientation": "h", "y": -0.18}, clickmode="event+select"))
        self.pareto3d: Any = None  # built when the 3-D view is first picked (each FigureWidget costs the browser ~2 s)
        self.influence: Any = None  # built by the first show_influence()
        self.history = go.FigureWidget(layout=go.Layout(
            template="plotly_white", height=300, margin={"t": 40, "b": 40}, title={"text": "per generation"},
            xaxis={"title": {"text": "generation"}}, legend={"orientation": "h", "y": -0.3}))
        for name in self.names:  # best-so-far and median per objective, normalised to the first generation
            self.history.add_scatter(name=f"{name} best so far", mode="lines+markers")
            self.history.add_scatter(name=f"{name} median", mode="lines", line={"dash": "dash"})
        for i in (EVALS, FRONT, BASELINE, FAILED):
            self.pareto.data[i].on_click(guard(self._clicked))
        self.pareto.add_class("compileiq-pareto")
        self.x.observe(guard(self._axes_changed), names="value")
        self.y.observe(guard(self._axes_changed), names="value")
        self.view.observe(guard(self._view_changed), names="value")
        self._results: Results | None = None
        self._cache = _PointCache(self.objectives)
        self.explain = w.Button(description="Explain", icon="question", tooltip="fit a model of the objective on x "
                                "vs the controls and show each control's influence")
        self.explain.on_click(guard(lambda _: self.show_influence()))
        self.explain_note = w.HTML()
        self.side = w.VBox([w.HBox([self.explain, self.explain_note])])
        self.box = w.VBox([w.HBox([self.x, self.y, self.view]), w.HBox([self.pareto, self.side]), self.history])

    # -- updates (notebook thread only) ----------------------------------------------------------
    def update(self, results: Results) -> None:
        """Show ``results`` (a snapshot): Pareto traces, 3-D view and history, one batch per figure."""
        self._results = results
        self._update_pareto(results)
        if self.view.value == "3-D":
            self._update_3d(results)
        self._update_history(results)

    def _update_pareto(self, results: Results) -> None:
        c = self._cache.add(results)
        if self.x.value not in self.names:
            return
        xi = self.names.index(self.x.value)
        yi = self.names.index(self.y.value) if self.y.value in self.names else None
        scores = c.scores()
        ids = np.asarray(c.ok_ids)
        xs = scores[:, xi]
        ys = scores[:, yi] if yi is not None else ids.astype(float)
        on_front = np.isin(ids, list(c.front))
        order = np.lexsort((ys[on_front], xs[on_front]))
        n_failed = len(c.failed_ids)
        lo, hi = (float(xs.min()), float(xs.max())) if len(xs) else (0.0, 1.0)
        y_lo, y_hi = (float(ys.min()), float(ys.max())) if len(ys) else (0.0, 1.0)
        base = c.baseline_index
        fx, fy, fids = xs[on_front][order], ys[on_front][order], ids[on_front][order]
        with self.pareto.batch_update():
            t = self.pareto.data
            t[EVALS].update(x=xs.tolist(), y=ys.tolist(), text=list(c.ok_text), customdata=ids.tolist(),
                            marker={"color": list(c.ok_gen), "cmin": 0, "cmax": max(1, self.generations)})
            t[FRONT].update(x=fx.tolist(), y=fy.tolist(), customdata=fids.tolist(),
                            line={"shape": "hv" if yi is not None else "linear"})
            t[BASELINE].update(x=[float(xs[base])] if base is not None else [],
                               y=[float(ys[base])] if base is not None else [],
                               customdata=[int(ids[base])] if base is not None else [],
                               text=["baseline (compiler defaults)"] if base is not None else [])
            t[FAILED].update(x=np.linspace(lo, hi, n_failed + 2)[1:-1].tolist() if n_failed else [],
                             y=[y_lo - 0.12 * ((y_hi - y_lo) or 1.0)] * n_failed,
                             text=list(c.failed_text), customdata=list(c.failed_ids),
                             name=f"failed ({n_failed}, no scores)")
            self.pareto.layout.xaxis.title.text = html.escape(self.labels[self.x.value])
            self.pareto.layout.yaxis.title.text = html.escape(
                self.labels[self.y.value] if yi is not None else "evaluation id")
            self.pareto.layout.title.text = f"{len(xs)} ok, {n_failed} failed, {len(c.front)} on the front"

    def set_generations(self, generations: int) -> None:
        """The run's generations changed (a resumed run extended): the colour bar spans 0..generations."""
        self.generations = generations

    def _make_3d(self) -> Any:
        import plotly.graph_objects as go

        if self.pareto3d is None:
            self.pareto3d = go.FigureWidget(data=[go.Scatter3d(
                mode="markers", name="evaluations", hovertemplate="%{text}<extra></extra>",
                marker={"size": 3, "color": [], "colorscale": "Viridis"})],
                layout=go.Layout(template="plotly_white", height=460, margin={"t": 30}))
        return self.pareto3d

    def _make_influence(self) -> Any:
        import plotly.graph_objects as go

        if self.influence is None:
            self.influence = go.FigureWidget(data=[go.Bar(orientation="h", name="influence")], layout=go.Layout(
                template="plotly_white", height=460, width=420, margin={"l": 90, "t": 60},
                yaxis={"automargin": True}, title={"text": "which controls matter"}))
            self.side.children = (self.influence, *self.side.children)
        return self.influence

    def _update_3d(self, results: Results) -> None:
        self._make_3d()
        ok = [r for r in results.records if r.status == "ok" and r.scores is not None]
        a = np.array([(r.scores or [])[:3] for r in ok], dtype=float).reshape(len(ok), 3)
        with self.pareto3d.batch_update():
            self.pareto3d.data[0].update(x=a[:, 0].tolist(), y=a[:, 1].tolist(), z=a[:, 2].tolist(),
                                         text=[f"eval {r.eval_id}" for r in ok], customdata=[r.eval_id for r in ok],
                                         marker={"color": [r.generation for r in ok], "cmin": 0,
                                                 "cmax": max(1, self.generations)})
            self.pareto3d.layout.scene = {axis: {"title": {"text": html.escape(self.objectives[i].label)}}
                                          for i, axis in enumerate(("xaxis", "yaxis", "zaxis"))}

    def _update_history(self, results: Results) -> None:
        d = history_data(results)
        with self.history.batch_update():
            for k, obj in enumerate(d["objectives"]):
                ref = next((v for v in obj["best_so_far"] if v), None)  # normalise: objectives differ in scale

                def norm(values: list[float | None], ref: float | None = ref) -> list[float | None]:
                    return [None if v is None or not ref else v / ref for v in values]
                self.history.data[2 * k].update(x=d["generations"], y=norm(obj["best_so_far"]))
                self.history.data[2 * k + 1].update(x=d["generations"], y=norm(obj["median"]))
            self.history.layout.yaxis.title.text = "relative to generation 0's best"

    # -- interaction -------------------------------------------------------------------------------
    def _clicked(self, trace: Any, points: Any, state: Any) -> None:
        if points.point_inds and self.on_select is not None and trace.customdata is not None:
            self.on_select(int(trace.customdata[points.point_inds[0]]))

    def _axes_changed(self, change: dict[str, Any]) -> None:
        if self.x.value == self.y.value and len(self.names) > 1:
            other = next(n for n in self.names if n != self.x.value)
            (self.y if change["owner"] is self.x else self.x).value = other
            return
        if self._results is not None:
            self._update_pareto(self._results)

    def show_influence(self, loop: asyncio.AbstractEventLoop | None = None) -> None:
        """Fit the influence model for the x objective on the results shown and draw its bars.

        The fit takes a few seconds: with a running event loop (a notebook kernel; or ``loop``) it runs in a
        background thread and the bars are drawn back in the loop's thread; without one it runs here.
        """
        if self._results is None:
            return
        if loop is None:
            try:
                loop = asyncio.get_event_loop()
            except RuntimeError:
                loop = None
        results, objective = self._results, self.x.value
        self.explain_note.value = "fitting..."
        try:  # import here, never in two threads at once (a concurrent first import can see a half-made module)
            import pandas  # noqa: F401
            import sklearn.ensemble  # noqa: F401
        except ImportError:
            loop = None  # the fit reports the missing package at once
        if loop is None or not loop.is_running():
            self._draw_influence(*self._fit_influence(results, objective))
            return
        running = loop

        def draw_later(outcome: tuple[pd.DataFrame | None, str, str]) -> None:
            running.call_soon_threadsafe(lambda: self._draw_influence(*outcome))
        in_background(lambda: self._fit_influence(results, objective), draw_later, name="compileiq-influence")

    @staticmethod
    def _fit_influence(results: Results, objective: str) -> tuple[pd.DataFrame | None, str, str]:
        try:
            return control_influence(results, objective, rounds=4, n_trees=50), objective, ""
        except (ConfigurationError, OptionalDependencyError) as exc:
            return None, objective, str(exc)

    def _draw_influence(self, df: pd.DataFrame | None, objective: str, error: str) -> None:
        if df is None:
            self.explain_note.value = html.escape(error)
            return
        weak = weak_fit_note(df.attrs.get("r2"))
        explored = df[df["status"] == "explored"].iloc[::-1]
        if weak is not None:  # a model that does not fit ranks nothing: no bars, and the reason instead
            explored = explored.iloc[0:0]
        skipped = list(df.loc[df["status"] != "explored", "control"])
        self._make_influence()
        with self.influence.batch_update():
            self.influence.data[0].update(
                x=explored["influence"].tolist(), y=list(explored["control"]),
                error_x={"type": "data", "symmetric": False,
                         "array": (explored["high"] - explored["influence"]).tolist(),
                         "arrayminus": (explored["influence"] - explored["low"]).tolist()})
            self.influence.layout.title.text = f"influence on {html.escape(objective)} (R\u00b2 {df.attrs['r2']:.2f})"
        notes = [html.escape(weak).replace("&lt;br&gt;", " ")] if weak is not None else []
        notes += ["not explored: " + html.escape(", ".join(skipped))] if skipped else []
        self.explain_note.value = "<br>".join(notes)

    def _view_changed(self, change: dict[str, Any]) -> None:
        three = change["new"] == "3-D"
        self.box.children = (self.box.children[0], w.HBox([self._make_3d() if three else self.pareto, self.side]),
                             self.history)
        if three and self._results is not None:
            self._update_3d(self._results)


class _PointCache:
    """The run's points, built incrementally: records are append-only, so each update only reads the new
    ones (hover text included), and the front is kept as front(old front + new points), which is exact:
    a dominated point never returns to the front."""

    def __init__(self, objectives: list[Objective]) -> None:
        self.objectives = objectives
        self.reset()

    def reset(self) -> None:
        self.n, self.last_id = 0, -1
        self.ok_ids: list[int] = []
        self.ok_gen: list[int] = []
        self.ok_text: list[str] = []
        self.failed_ids: list[int] = []
        self.failed_text: list[str] = []
        self.baseline_index: int | None = None
        self.front: dict[int, np.ndarray] = {}
        self._rows: list[np.ndarray] = []
        self._scores = np.empty((0, len(self.objectives)))

    def scores(self) -> np.ndarray:
        if self._rows:
            self._scores = np.vstack([self._scores, *self._rows])
            self._rows = []
        return self._scores

    def add(self, results: Results) -> _PointCache:
        recs = results.records
        if len(recs) < self.n or (self.n and recs[self.n - 1].eval_id != self.last_id):
            self.reset()  # another run, or a reopened one
        new = recs[self.n:]
        sign = np.array([o.sign for o in results.objectives])
        fresh: dict[int, np.ndarray] = {}
        for r in new:
            if r.status == "ok" and r.scores is not None:
                row = np.asarray(r.scores, dtype=float)
                if r.is_baseline:
                    self.baseline_index = len(self.ok_ids)
                self.ok_ids.append(r.eval_id)
                self.ok_gen.append(r.generation)
                self.ok_text.append(hover_text(r, self.objectives))
                self._rows.append(row[None, :])
                fresh[r.eval_id] = row
            else:
                self.failed_ids.append(r.eval_id)
                self.failed_text.append(failure_text(r))
        if fresh:
            cand = {**self.front, **fresh}
            keys = list(cand)
            keep = pareto_mask(np.vstack([cand[k] for k in keys]) * sign)
            self.front = {k: cand[k] for k, m in zip(keys, keep) if m}
        if recs:
            self.n, self.last_id = len(recs), recs[-1].eval_id
        return self
