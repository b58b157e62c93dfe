"""Static plotly figures of a run (Pareto scatter, convergence, parallel coordinates)."""

from __future__ import annotations

import html
from typing import TYPE_CHECKING, Any

from compileiq_lab.exceptions import OptionalDependencyError
from compileiq_lab.viz.data import history_data, parallel_data, pareto_data

if TYPE_CHECKING:
    import pandas as pd
    import plotly.graph_objects as go

    from compileiq_lab.store.results import Results

__all__ = ["PLOTLY_MISSING", "history_figure", "parallel_figure", "pareto_figure", "require_plotly"]

PLOTLY_MISSING = "plotting needs plotly: pip install 'compileiq-lab[lab]'"
_FAILED_COLOR = "#d62728"
_FRONT_COLOR = "#111111"


def require_plotly() -> Any:
    """Import and return ``plotly.graph_objects``.

    Raises:
        OptionalDependencyError: plotly is not installed.
    """
    try:
        import plotly.graph_objects as go
    except ImportError as exc:
        raise OptionalDependencyError(PLOTLY_MISSING) from exc
    return go


def _esc(text: str) -> str:
    return html.escape(str(text))


def pareto_figure(results: Results, x: int | str = 0, y: int | str = 1) -> go.Figure:
    """Scatter of objective ``x`` against ``y``: points coloured by generation, the front
    highlighted, the baseline marked and failed evaluations on a strip below the plot.

    Args:
        results: The run.
        x: Objective index or name on the x axis.
        y: Objective index or name on the y axis (ignored with one objective: evaluation id).

    Returns:
        A ``plotly.graph_objects.Figure`` with traces named "evaluations", "Pareto front",
        and, where present, "baseline" and "failed (N)".
    """
    go = require_plotly()
    d = pareto_data(results, x, y)
    p = d["points"]
    fig = go.Figure()
    fig.add_trace(go.Scatter(
        x=p["x"], y=p["y"], mode="markers", name="evaluations", text=p["text"],
        hovertemplate="%{text}<extra></extra>", customdata=p["eval_id"],
        marker={"color": p["generation"], "colorscale": "Viridis", "size": 8, "opacity": 0.8,
                "colorbar": {"title": {"text": "generation"}}, "showscale": bool(p["x"])}))
    fig.add_trace(go.Scatter(
        x=d["front"]["x"], y=d["front"]["y"], mode="lines+markers", name="Pareto front",
        customdata=d["front"]["eval_id"], hoverinfo="skip",
        line={"color": _FRONT_COLOR, "shape": "hv" if d["y_kind"] == "objective" else "linear",
              "width": 1.5},
        marker={"symbol": "circle-open", "size": 13, "color": _FRONT_COLOR, "line": {"width": 2}}))
    if d["baseline"] is not None:
        b = d["baseline"]
        fig.add_trace(go.Scatter(
            x=[b["x"]], y=[b["y"]], mode="markers", name="baseline (compiler defaults)",
            customdata=[b["eval_id"]], hovertemplate="baseline<extra></extra>",
            marker={"symbol": "star", "size": 16, "color": "#ff7f0e", "line": {"width": 1}}))
    _add_failed_strip(go, fig, d)
    fig.update_layout(
        title={"text": _esc(f"{d['x_name']} vs {d['y_name']}")},
        xaxis_title=_esc(d["x_label"]), yaxis_title=_esc(d["y_label"]),
        legend={"orientation": "h", "y": -0.2}, template="plotly_white", height=540)
    return fig


def _add_failed_strip(go: Any, fig: Any, d: dict[str, Any]) -> None:
    """Failed points have no scores: show them on a strip under the data, spread by evaluation order."""
    f = d["failed"]
    if not f["eval_id"]:
        return
    xs, ys = d["points"]["x"] or [0.0], d["points"]["y"] or [0.0]
    lo, hi = min(xs), max(xs)
    span_y = (max(ys) - min(ys)) or 1.0
    n = len(f["eval_id"])
    strip_x = [lo + (hi - lo) * (i + 0.5) / n for i in range(n)] if hi > lo else [lo] * n
    strip_y = [min(ys) - 0.12 * span_y] * n
    fig.add_trace(go.Scatter(
        x=strip_x, y=strip_y, mode="markers", name=f"failed ({n}, no scores)", text=f["text"],
        customdata=f["eval_id"], hovertemplate="%{text}<extra></extra>",
        marker={"symbol": "x", "size": 8, "color": _FAILED_COLOR}))


def history_figure(results: Results) -> go.Figure:
    """Convergence per generation: best-so-far (line) and median (dashed) per objective, one
    panel each, plus a bottom panel of failures per generation stacked by status.

    Args:
        results: The run.

    Returns:
        A ``plotly.graph_objects.Figure`` with traces "<objective> best so far",
        "<objective> median" and "failed: <status>".
    """
    go = require_plotly()
    from plotly.subplots import make_subplots

    d = history_data(results)
    k = len(d["objectives"])
    titles = [_esc(o["label"]) for o in d["objectives"]] + ["failures by status"]
    fig = make_subplots(rows=k + 1, cols=1, shared_xaxes=True, subplot_titles=titles, vertical_spacing=0.08)
    gens = d["generations"]
    for i, obj in enumerate(d["objectives"], start=1):
        name = _esc(obj["name"])
        fig.add_trace(go.Scatter(x=gens, y=obj["best_so_far"], mode="lines+markers",
                                 name=f"{name} best so far", line={"width": 2}), row=i, col=1)
        fig.add_trace(go.Scatter(x=gens, y=obj["median"], mode="lines+markers", connectgaps=False,
                                 name=f"{name} median", line={"dash": "dash"}), row=i, col=1)
    for status, counts in d["failures"].items():
        fig.add_trace(go.Bar(x=gens, y=counts, name=f"failed: {_esc(status)}"), row=k + 1, col=1)
    fig.update_layout(barmode="stack", template="plotly_white", height=260 * (k + 1),
                      title={"text": "convergence per generation"})
    fig.update_xaxes(title_text="generation", row=k + 1, col=1)
    return fig


def parallel_figure(results: Results) -> go.Figure:
    """Parallel coordinates of controls against objectives, one line per ok evaluation,
    coloured by generation; categorical controls show their labels ("default" = knocked out).

    Args:
        results: The run.

    Returns:
        A ``plotly.graph_objects.Figure`` with one ``Parcoords`` trace.
    """
    go = require_plotly()
    d = parallel_data(results)
    dims: list[dict[str, Any]] = []
    for col in d["columns"]:
        dim: dict[str, Any] = {"label": _esc(col["name"]), "values": col["values"]}
        if col["type"] == "categorical":
            dim.update(tickvals=list(range(len(col["labels"]))), ticktext=[_esc(t) for t in col["labels"]],
                       range=[0, max(1, len(col["labels"]) - 1)])
        dims.append(dim)
    fig = go.Figure(go.Parcoords(
        dimensions=dims,
        line={"color": d["generation"], "colorscale": "Viridis", "showscale": bool(d["generation"]),
              "colorbar": {"title": {"text": "generation"}}}))
    fig.update_layout(title={"text": "controls vs objectives"}, template="plotly_white",
                      margin={"l": 60, "r": 60}, height=500)
    return fig


def influence_figure(influence: pd.DataFrame) -> go.Figure:
    """Horizontal bars of per-control influence (a ``control_influence`` DataFrame) with 10-90 % whiskers;
    controls that never varied are listed as "not explored" with no bar.

    Args:
        influence: The DataFrame returned by ``Results.control_influence``.
    """
    go = require_plotly()
    explored = influence[influence["status"] == "explored"].iloc[::-1]
    skipped = list(influence.loc[influence["status"] != "explored", "control"])
    fig = go.Figure(go.Bar(
        x=explored["influence"], y=[_esc(c) for c in explored["control"]], orientation="h", name="influence",
        error_x={"type": "data", "symmetric": False, "array": explored["high"] - explored["influence"],
                 "arrayminus": explored["influence"] - explored["low"]}))
    title = f"control influence on {influence.attrs.get('objective', 'the objective')}"
    if "r2" in influence.attrs:
        title += f" (model R² {influence.attrs['r2']:.2f})"
    if skipped:
        title += f"<br><sub>not explored: {_esc(', '.join(skipped[:12]))}{' ...' if len(skipped) > 12 else ''}</sub>"
    fig.update_layout(title={"text": title}, template="plotly_white", height=max(260, 28 * len(explored) + 120),
                      xaxis_title="rise of the model's error when shuffled / objective variance", margin={"l": 160})
    return fig
