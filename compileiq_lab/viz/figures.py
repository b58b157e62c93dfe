"""Static plotly figures of a run (Pareto scatter, convergence, parallel coordinates)."""

from __future__ import annotations

import html
import math
from typing import TYPE_CHECKING, Any

from compileiq_lab.exceptions import OptionalDependencyError
from compileiq_lab.viz.data import history_data, parallel_data, pareto_data

if TYPE_CHECKING:
    import pandas as pd
    import plotly.graph_objects as go

    from compileiq_lab.store.results import Results

__all__ = ["PLOTLY_MISSING", "WEAK_FIT_R2", "history_figure", "influence_figure", "parallel_figure", "pareto_figure",
           "require_plotly", "weak_fit_note"]

PLOTLY_MISSING = "plotting needs plotly: pip install 'compileiq-lab[lab]'"
#: Below this out-of-bag R² ``influence_figure`` draws no bars. An influence is the rise of the model's error when a
#: control is shuffled; a forest that explains less than half of the objective's variance on rows it did not see
#: mostly fits noise, so its ranking of the controls is noise too, and bars would be read as findings.
WEAK_FIT_R2 = 0.5
_FAILED_COLOR = "#d62728"
_FRONT_COLOR = "#111111"
_BEST_COLOR = "#2ca02c"
_BASELINE_COLOR = "#ff7f0e"
_MAX_INTEGER_TICKS = 20  # up to this many generations, one tick per generation


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

    With one objective there is no front: the figure is the score per evaluation, in call order
    (x: evaluation id, y: the score), with the best-so-far line and the best point(s) ringed
    (``y`` is ignored).

    Args:
        results: The run.
        x: Objective index or name on the x axis (with one objective: the objective on the y axis).
        y: Objective index or name on the y axis (ignored with one objective).

    Returns:
        A ``plotly.graph_objects.Figure`` with traces named "evaluations", "Pareto front" (one
        objective: "best so far" and "best"), and, where present, "baseline (compiler defaults)"
        and "failed (N, no scores)".
    """
    go = require_plotly()
    d = pareto_data(results, x, y)
    if d["y_kind"] == "eval_id":
        return _score_per_evaluation(go, d)
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
        line={"color": _FRONT_COLOR, "shape": "hv", "width": 1.5},
        marker={"symbol": "circle-open", "size": 13, "color": _FRONT_COLOR, "line": {"width": 2}}))
    if d["baseline"] is not None:
        b = d["baseline"]
        _add_baseline(go, fig, b["x"], b["y"], b["eval_id"])
    _add_failed_strip(go, fig, d["failed"], d["points"]["x"], d["points"]["y"], spread=True)
    fig.update_layout(
        title={"text": _esc(f"{d['x_name']} vs {d['y_name']}")},
        xaxis_title=_esc(d["x_label"]), yaxis_title=_esc(d["y_label"]),
        legend={"orientation": "h", "y": -0.2}, template="plotly_white", height=540)
    return fig


def _score_per_evaluation(go: Any, d: dict[str, Any]) -> Any:
    """One objective: the score (y) of each evaluation in call order (x), the best so far, the best point(s)."""
    p = d["points"]
    order = sorted(range(len(p["eval_id"])), key=lambda i: p["eval_id"][i])
    ids = [p["eval_id"][i] for i in order]
    scores = [p["x"][i] for i in order]
    pick = min if d["x_direction"] == "min" else max
    running: list[float] = []
    for s in scores:
        running.append(s if not running else pick(running[-1], s))
    fig = go.Figure()
    fig.add_trace(go.Scatter(
        x=ids, y=scores, mode="markers", name="evaluations", text=[p["text"][i] for i in order],
        hovertemplate="%{text}<extra></extra>", customdata=ids,
        marker={"color": [p["generation"][i] for i in order], "colorscale": "Viridis", "size": 8, "opacity": 0.8,
                "colorbar": {"title": {"text": "generation"}}, "showscale": bool(ids)}))
    fig.add_trace(go.Scatter(
        x=ids, y=running, mode="lines", name="best so far", hoverinfo="skip",
        line={"color": _FRONT_COLOR, "shape": "hv", "width": 1.5}))
    best = d["front"]  # with one objective the "front" is every evaluation that reached the best score
    fig.add_trace(go.Scatter(
        x=best["eval_id"], y=best["x"], mode="markers", name="best", customdata=best["eval_id"],
        hovertemplate="best: eval %{x}, score %{y}<extra></extra>",
        marker={"symbol": "circle-open", "size": 14, "color": _BEST_COLOR, "line": {"width": 2.5}}))
    if d["baseline"] is not None:
        b = d["baseline"]
        _add_baseline(go, fig, b["eval_id"], b["x"], b["eval_id"])
    _add_failed_strip(go, fig, d["failed"], ids, scores, spread=False)
    fig.update_layout(
        title={"text": _esc(f"{d['x_name']} per evaluation")},
        xaxis_title="evaluation (call order)", yaxis_title=_esc(d["x_label"]),
        legend={"orientation": "h", "y": -0.2}, template="plotly_white", height=540)
    return fig


def _add_baseline(go: Any, fig: Any, x: float, y: float, eval_id: int) -> None:
    fig.add_trace(go.Scatter(
        x=[x], y=[y], mode="markers", name="baseline (compiler defaults)",
        customdata=[eval_id], hovertemplate="baseline<extra></extra>",
        marker={"symbol": "star", "size": 16, "color": _BASELINE_COLOR, "line": {"width": 1}}))


def _add_failed_strip(go: Any, fig: Any, f: dict[str, list[Any]], xs: list[Any], ys: list[Any],
                      spread: bool) -> None:
    """Failed points have no scores: show them on a strip under the data, at their evaluation id (``spread=False``:
    the x axis is the evaluation id) or spread over the x range in evaluation order (``spread=True``)."""
    if not f["eval_id"]:
        return
    xs, ys = xs or [0.0], ys or [0.0]
    n = len(f["eval_id"])
    if spread:
        lo, hi = min(xs), max(xs)
        strip_x = [lo + (hi - lo) * (i + 0.5) / n for i in range(n)] if hi > lo else [lo] * n
    else:
        strip_x = list(f["eval_id"])
    span_y = (max(ys) - min(ys)) or 1.0
    strip_y = [min(ys) - 0.12 * span_y] * n
    fig.add_trace(go.Scatter(
        x=strip_x, y=strip_y, mode="markers", name=f"failed ({n}, no scores)", text=f["text"],
        customdata=f["eval_id"], hovertemplate="%{text}<extra></extra>",
        marker={"symbol": "x", "size": 8, "color": _FAILED_COLOR}))


def history_figure(results: Results) -> go.Figure:
    """Convergence per generation: best-so-far (line) and median (dashed) per objective, one
    panel each, plus a bottom panel of failures per generation stacked by status (left out, and
    said in the title, when no evaluation failed). Every panel has its generation axis.

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
    failed = bool(d["failures"])
    rows = k + 1 if failed else k
    titles = [_esc(o["label"]) for o in d["objectives"]] + (["failures by status"] if failed else [])
    height = 300 * rows
    fig = make_subplots(rows=rows, cols=1, shared_xaxes=True, subplot_titles=titles,
                        vertical_spacing=min(0.3, 110 / height))
    gens = d["generations"]
    for i, obj in enumerate(d["objectives"], start=1):
        name = _esc(obj["name"])
        fig.add_trace(go.Scatter(x=gens, y=obj["best_so_far"], mode="lines+markers",
                                 name=f"{name} best so far", line={"width": 2}), row=i, col=1)
        fig.add_trace(go.Scatter(x=gens, y=obj["median"], mode="lines+markers", connectgaps=False,
                                 name=f"{name} median", line={"dash": "dash"}), row=i, col=1)
    for status, counts in d["failures"].items():
        fig.add_trace(go.Bar(x=gens, y=counts, name=f"failed: {_esc(status)}"), row=k + 1, col=1)
    title = "convergence per generation"
    if not failed and gens:
        title += "<br><sub>no evaluation failed (no failures panel)</sub>"
    fig.update_layout(barmode="stack", template="plotly_white", height=height, title={"text": title})
    ticks: dict[str, Any] = {"tickmode": "linear", "dtick": 1} if len(gens) <= _MAX_INTEGER_TICKS else {}
    # shared axes hide the tick labels of all panels but the bottom one: show them, and the title, on each
    fig.update_xaxes(title_text="generation", showticklabels=True, **ticks)
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
        dimensions=dims, labelangle=-25, labelside="bottom",  # slanted below the axes: long names never overlap
        line={"color": d["generation"], "colorscale": "Viridis", "showscale": bool(d["generation"]),
              "colorbar": {"title": {"text": "generation"}}}))
    fig.update_layout(title={"text": "controls vs objectives"}, template="plotly_white",
                      margin={"l": 60, "r": 60, "b": 110}, height=540)
    return fig


def influence_figure(influence: pd.DataFrame) -> go.Figure:
    """Horizontal bars of per-control influence (a ``control_influence`` DataFrame) with 10-90 % whiskers;
    controls that never varied are listed as "not explored" with no bar.

    When the model's out-of-bag R² (``influence.attrs["r2"]``) is below ``WEAK_FIT_R2`` (or could not be
    measured), no bar is drawn: the controls are listed with a note that the run does not show which of them matter.

    Args:
        influence: The DataFrame returned by ``Results.control_influence``.
    """
    go = require_plotly()
    title = f"control influence on {influence.attrs.get('objective', 'the objective')}"
    r2 = influence.attrs.get("r2")
    if r2 is not None:
        title += f" (model R² {r2:.2f})"
        if not (math.isfinite(r2) and r2 >= WEAK_FIT_R2):
            return _weak_influence_figure(go, influence, r2, title)
    explored = influence[influence["status"] == "explored"].iloc[::-1]
    skipped = list(influence.loc[influence["status"] != "explored", "control"])
    fig = go.Figure(go.Bar(
        x=explored["influence"], y=[_esc(c) for c in explored["control"]], orientation="h", name="influence",
        error_x={"type": "data", "symmetric": False, "array": explored["high"] - explored["influence"],
                 "arrayminus": explored["influence"] - explored["low"]}))
    if skipped:
        title += f"<br><sub>not explored: {_esc(', '.join(skipped[:12]))}{' ...' if len(skipped) > 12 else ''}</sub>"
    fig.update_layout(title={"text": title}, template="plotly_white", height=max(260, 28 * len(explored) + 120),
                      xaxis_title="rise of the model's error when shuffled / objective variance", margin={"l": 160})
    return fig


def weak_fit_note(r2: float | None) -> str | None:
    """Why an influence model with out-of-bag ``r2`` ranks nothing (below ``WEAK_FIT_R2``, or not measured), as
    one sentence with a ``<br>`` in it; None for a fit good enough to show (or no R² given)."""
    if r2 is None or (math.isfinite(r2) and r2 >= WEAK_FIT_R2):
        return None
    fit = f"R² = {r2:.2f} < {WEAK_FIT_R2:g}" if math.isfinite(r2) else "R² could not be measured"
    return (f"model too weak to say ({fit}): the run does not show which controls matter;<br>"
            "more evaluations or a wider exploration are needed")


def _weak_influence_figure(go: Any, influence: pd.DataFrame, r2: float, title: str) -> Any:
    """No bars: the controls on the y axis (unexplored ones marked) and a note on why nothing is shown."""
    labels = [_esc(c) + ("" if s == "explored" else " (not explored)")
              for c, s in zip(influence["control"], influence["status"])][::-1]
    note = weak_fit_note(r2)
    fig = go.Figure()
    fig.add_annotation(text=note, xref="paper", yref="paper", x=0.5, y=0.5, showarrow=False, align="center",
                       bgcolor="rgba(255,255,255,0.9)", bordercolor="#999999", borderwidth=1, font={"size": 13})
    n = len(labels)
    fig.update_layout(
        title={"text": title}, template="plotly_white", height=max(260, 28 * n + 120), margin={"l": 200},
        xaxis={"visible": False, "range": [0, 1]},
        yaxis={"tickmode": "array", "tickvals": list(range(n)), "ticktext": labels, "range": [-0.5, max(n, 1) - 0.5],
               "showgrid": False, "zeroline": False})
    return fig
