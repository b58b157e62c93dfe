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
from compileiq_lab.viz.data import history_data, parallel_data
from compileiq_lab.viz.figures import weak_fit_note
from compileiq_lab.widgets.points import PointCache, distinct_count, front_2d

if TYPE_CHECKING:
    import pandas as pd

    from compileiq_lab.store.results import Results

__all__ = ["BASELINE", "EVALS", "FAILED", "FRONT", "SELECTED", "LivePlots"]

_FRONT, _FAILED, _BASE, _PICK = "#d62728", "#7f7f7f", "#ff7f0e", "#17becf"
# trace order in the Pareto FigureWidget (fixed, so updates only assign data)
EVALS, FRONT, BASELINE, FAILED, SELECTED = range(5)
#: Height of the scatter and of the 3-D view (the same: the 3-D view is no smaller).
PLOT_HEIGHT = 520


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
        # pandas is imported here, in the notebook's thread: JupyterLab 4 may handle widget messages in another
        # kernel thread (comms over subshells), and a module imported in two threads at once is seen half-made
        import pandas  # noqa: F401

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
        if k == 1:  # nothing to pick: the score over the evaluations
            self.x.layout.display = self.y.layout.display = "none"
        self.view = w.ToggleButtons(options=["2-D", "3-D"] if k >= 3 else ["2-D"], value="2-D",
                                    layout={"width": "auto", "display": "" if k >= 3 else "none"})
        self.pareto = _pareto_figure(k, generations)
        self.selected: int | None = None
        self.pareto3d: Any = None  # built when the 3-D view is first picked (each FigureWidget costs the browser ~2 s)
        self.influence: Any = None  # built by the first show_influence()
        self.history = _history_figure(self.names, generations)
        for i in (EVALS, FRONT, BASELINE, FAILED, SELECTED):
            self.pareto.data[i].on_click(guard(self._clicked))
        self.pareto.add_class("compileiq-pareto")
        self.x.observe(guard(self._axes_changed), names="value")
        self.y.observe(guard(self._axes_changed), names="value")
        self.view.observe(guard(self._view_changed), names="value")
        self._results: Results | None = None
        self._cache = PointCache(self.objectives)
        self._side_widgets(guard)
        self.tabs = w.Tab(layout={"flex": "2 1 0%", "min_width": "320px", "max_width": "560px"})
        self.tabs.add_class("compileiq-side")
        self.add_tab("influence", self.influence_box)
        self.add_tab("parallel", self.parallel_box)
        self.scatter_area = w.Box([self.pareto], layout={"flex": "3 1 0%", "min_width": "420px"})
        self.side = self.tabs  # the panel beside the scatter
        self.box = w.VBox([w.HBox([self.x, self.y, self.view]),
                           w.HBox([self.scatter_area, self.tabs], layout={"width": "100%", "align_items": "stretch"}),
                           self.history], layout={"width": "100%"})

    def _side_widgets(self, guard: Callable[[Callable[..., None]], Callable[..., None]]) -> None:
        """The side panel's tabs' contents: the influence of each control (Explain) and parallel coordinates."""
        self.influence_objective = w.Dropdown(options=self.names, value=self.names[0], description="objective",
                                              style={"description_width": "initial"}, layout={"width": "240px"})
        self.explain = w.Button(description="Explain", icon="question", tooltip="fit a model of the objective "
                                "vs the controls and show each control's influence")
        self.explain.on_click(guard(lambda _: self.show_influence()))
        self.explain_note = w.HTML()
        self.influence_box = w.VBox([w.HBox([self.influence_objective, self.explain]), self.explain_note])
        self.parallel: Any = None  # built when its tab is first drawn
        self.parallel_button = w.Button(description="Draw", icon="refresh",
                                        tooltip="parallel coordinates of the controls and objectives of every point")
        self.parallel_button.on_click(guard(lambda _: self.show_parallel()))
        self.parallel_box = w.VBox([self.parallel_button])

    # -- side panel ----------------------------------------------------------------------------------
    def add_tab(self, title: str, widget: w.Widget, first: bool = False) -> None:
        """Put ``widget`` in a tab of the panel beside the scatter (``first``: before the others)."""
        children, titles = list(self.tabs.children), list(self.tabs.titles)
        if first:
            children.insert(0, widget)
            titles.insert(0, title)
        else:
            children.append(widget)
            titles.append(title)
        self.tabs.children, self.tabs.titles = tuple(children), tuple(titles)

    def show_tab(self, title: str) -> None:
        """Open the side panel's tab ``title``."""
        titles = list(self.tabs.titles)
        if title in titles:
            self.tabs.selected_index = titles.index(title)

    def highlight(self, eval_id: int | None) -> None:
        """Ring one point (the one selected in the table or clicked), or none."""
        self.selected = eval_id
        if self._results is not None:
            self._update_selected()

    def _update_selected(self) -> None:
        t = self.pareto.data[EVALS]
        ids = list(t.customdata or [])
        if self.selected in ids:
            i = ids.index(self.selected)
            self.pareto.data[SELECTED].update(x=[t.x[i]], y=[t.y[i]], customdata=[self.selected])
        else:
            self.pareto.data[SELECTED].update(x=[], y=[], customdata=[])

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
        # one objective: no trade-off to draw; the score over the evaluations (call order), the best ringed
        xs = scores[:, xi] if yi is not None else ids.astype(float)
        ys = scores[:, yi] if yi is not None else scores[:, xi]
        if yi is not None and len(self.names) > 2:  # the front of the two axes shown: a staircase that only falls
            sign = [o.sign for o in self.objectives]
            shown = front_2d(xs, ys, sign[xi], sign[yi])
            on_front = np.isin(np.arange(len(ids)), shown)
        else:
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
                             text=list(c.failed_text), customdata=list(c.failed_ids))
            self.pareto.layout.xaxis.title.text = html.escape(
                self.labels[self.x.value] if yi is not None else "evaluation id (call order)")
            self.pareto.layout.yaxis.title.text = html.escape(
                self.labels[self.y.value] if yi is not None else self.labels[self.x.value])
            run_front = distinct_count([tuple(np.asarray(v).tolist()) for v in c.front.values()])
            shown_front = (f"{distinct_count(list(zip(fx.tolist(), fy.tolist())))} on the front of these two axes "
                           f"({run_front} on the run's front)" if yi is not None and len(self.names) > 2
                           else f"{run_front} on the front")
            self.pareto.layout.title.text = f"{len(xs)} ok, {n_failed} failed, {shown_front}"
            self._update_selected()

    def set_generations(self, generations: int) -> None:
        """The run's generations changed (a resumed run extended): the colour bar spans 0..generations."""
        self.generations = generations

    def _make_3d(self) -> Any:
        import plotly.graph_objects as go

        if self.pareto3d is None:
            self.pareto3d = go.FigureWidget(data=[
                go.Scatter3d(mode="markers", name="evaluations", hovertemplate="%{text}<extra></extra>",
                             marker={"size": 3, "color": [], "colorscale": "Viridis", "opacity": 0.7}),
                go.Scatter3d(mode="markers", name="Pareto front", hovertemplate="%{text}<extra></extra>",
                             marker={"size": 6, "color": _FRONT, "symbol": "diamond"})],
                layout=go.Layout(template="plotly_white", height=PLOT_HEIGHT, margin={"t": 30, "l": 0, "r": 0, "b": 0},
                                 autosize=True, legend={"orientation": "h", "y": 0}))
            self.pareto3d.add_class("compileiq-pareto3d")
        return self.pareto3d

    def _make_influence(self) -> Any:
        import plotly.graph_objects as go

        if self.influence is None:
            self.influence = go.FigureWidget(data=[go.Bar(orientation="h", name="influence")], layout=go.Layout(
                template="plotly_white", height=460, margin={"l": 90, "t": 60}, autosize=True,
                yaxis={"automargin": True}, title={"text": "which controls matter"}))
            self.influence_box.children = (*self.influence_box.children, self.influence)
        return self.influence

    def _update_3d(self, results: Results) -> None:
        self._make_3d()
        c = self._cache.add(results)
        a = c.scores()[:, :3]
        ids = c.ok_ids
        front = [i for i, e in enumerate(ids) if e in c.front]
        with self.pareto3d.batch_update():
            self.pareto3d.data[0].update(x=a[:, 0].tolist(), y=a[:, 1].tolist(), z=a[:, 2].tolist(),
                                         text=list(c.ok_text), customdata=list(ids),
                                         marker={"color": list(c.ok_gen), "cmin": 0, "cmax": max(1, self.generations)})
            self.pareto3d.data[1].update(x=a[front, 0].tolist(), y=a[front, 1].tolist(), z=a[front, 2].tolist(),
                                         text=[c.ok_text[i] for i in front], customdata=[ids[i] for i in front])
            self.pareto3d.layout.scene = {  # short titles: a long label is cut off in a 3-D scene
                axis: {"title": {"text": html.escape(f"{o.name} ({o.unit})" if o.unit else o.name)}}
                for axis, o in zip(("xaxis", "yaxis", "zaxis"), self.objectives)}

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
        results, objective = self._results, self.influence_objective.value
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
        self.scatter_area.children = (self._make_3d() if three else self.pareto,)
        if three and self._results is not None:
            self._update_3d(self._results)

    def show_parallel(self) -> None:
        """Draw (or redraw) parallel coordinates of the controls against the objectives of the points shown."""
        import plotly.graph_objects as go

        if self._results is None:
            return
        d = parallel_data(self._results)
        dims: list[dict[str, Any]] = []
        for col in d["columns"]:
            dim: dict[str, Any] = {"label": html.escape(col["name"]), "values": list(col["values"])}
            if col["type"] == "categorical":
                dim.update(tickvals=list(range(len(col["labels"]))),
                           ticktext=[html.escape(str(t)) for t in col["labels"]])
            dims.append(dim)
        trace = go.Parcoords(dimensions=dims, line={"color": list(d["generation"]), "colorscale": "Viridis"},
                             labelangle=-25, labelside="bottom")
        if self.parallel is None:
            self.parallel = go.FigureWidget(data=[trace], layout=go.Layout(
                template="plotly_white", height=PLOT_HEIGHT - 60, margin={"l": 40, "r": 40, "t": 30, "b": 90},
                autosize=True))
            self.parallel_box.children = (self.parallel_button, self.parallel)
        else:
            with self.parallel.batch_update():
                self.parallel.data[0].update(dimensions=dims, line={"color": list(d["generation"])})


def _pareto_figure(k: int, generations: int) -> Any:
    """The scatter of ``k`` objectives: the evaluations (coloured by generation), the front, the baseline, the failed
    evaluations and the selected point, in the trace order EVALS, FRONT, BASELINE, FAILED, SELECTED."""
    import plotly.graph_objects as go

    scatter = dict(mode="markers", hovertemplate="%{text}<extra></extra>")
    return go.FigureWidget(data=[
        go.Scatter(name="evaluations", marker={"color": [], "colorscale": "Viridis", "size": 8, "opacity": 0.8,
                                               "cmin": 0, "cmax": max(1, generations),
                                               "colorbar": {"title": {"text": "generation"}}}, **scatter),
        # names are set here once: renamed inside a batch_update before the figure is shown, plotly's
        # widget shows "trace N" for the others
        go.Scatter(name="Pareto front (these axes)" if k > 2 else "Pareto front" if k > 1 else "best",
                   mode="lines+markers", hoverinfo="skip",
                   line={"color": _FRONT, "shape": "hv", "width": 1.5},
                   marker={"symbol": "circle-open", "size": 13, "color": _FRONT, "line": {"width": 2}}),
        go.Scatter(name="baseline (compiler defaults)", marker={"symbol": "star", "size": 16, "color": _BASE},
                   **scatter),
        go.Scatter(name="failed (no scores)", marker={"symbol": "x", "size": 8, "color": _FAILED}, **scatter),
        go.Scatter(name="selected", hoverinfo="skip", mode="markers",
                   marker={"symbol": "circle-open", "size": 22, "color": _PICK, "line": {"width": 3}})],
        layout=go.Layout(template="plotly_white", height=PLOT_HEIGHT, margin={"t": 40, "b": 40, "r": 10},
                         legend={"orientation": "h", "y": -0.18}, clickmode="event+select", autosize=True,
                         modebar={"orientation": "v"},  # (across the top it covers the title's counts)
                         hoverlabel={"align": "left", "font": {"size": 11}}))


def _history_figure(names: list[str], generations: int) -> Any:
    """Per generation, each objective's best so far and median (normalised to the first generation)."""
    import plotly.graph_objects as go

    fig = go.FigureWidget(layout=go.Layout(
        template="plotly_white", height=300, margin={"t": 40, "b": 40}, title={"text": "per generation"},
        xaxis={"title": {"text": "generation"}, **({"dtick": 1} if generations <= 20 else {})},
        autosize=True))  # the legend at the side: below, its rows covered the axis title once they wrapped
    for name in names:  # best-so-far and median per objective, normalised to the first generation
        fig.add_scatter(name=f"{name} best so far", mode="lines+markers")
        fig.add_scatter(name=f"{name} median", mode="lines", line={"dash": "dash"})
    return fig

