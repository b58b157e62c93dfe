"""The Pareto fronts of several runs on one scatter (two architectures, two catalogs), each on the two axes shown."""

from __future__ import annotations

import html
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from compileiq_lab.exceptions import ConfigurationError
from compileiq_lab.search.pareto import pareto_mask
from compileiq_lab.viz.data import hover_text
from compileiq_lab.viz.figures import require_plotly

if TYPE_CHECKING:
    import plotly.graph_objects as go

    from compileiq_lab.space.objectives import Objective
    from compileiq_lab.store.results import Results
    from compileiq_lab.store.sqlite import EvalRecord

__all__ = ["front_2d", "overlay_fronts_figure", "run_label"]

#: One colour per run (plotly's qualitative palette), repeated past ten runs.
_COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf", "#bcbd22",
           "#7f7f7f")


def run_label(results: Results) -> str:
    """How a run is named in a legend: ``"kernel arch catalog, N evals"`` for a kernel run, else its Python
    objective's name (or the store's file name), N evals."""
    meta = results.header.kernel
    if meta is not None:
        what = " ".join(p for p in (meta.kernel, meta.arch, meta.catalog) if p)
    else:
        what = results.header.objective.rsplit(".", 1)[-1] or Path(results.store_path).stem
    return f"{what}, {len(results)} evals"


def front_2d(results: Results, x: str, y: str) -> list[EvalRecord]:
    """The ok evaluations no other one dominates on objectives ``x`` and ``y`` alone (each in its own direction),
    sorted by x then y. Not the run's front over all its objectives: projected to two axes that one zig-zags."""
    ok = _ok(results)
    xi, yi = results.objective_names.index(x), results.objective_names.index(y)
    sign = np.array([results.objectives[xi].sign, results.objectives[yi].sign], dtype=float)
    F = np.array([_xy(r, xi, yi) for r in ok], dtype=float).reshape(len(ok), 2) * sign
    front = [r for r, keep in zip(ok, pareto_mask(F)) if keep]
    return sorted(front, key=lambda r: (*_xy(r, xi, yi), r.eval_id))


def _ok(results: Results) -> list[EvalRecord]:
    return [r for r in results.records if r.status == "ok" and r.scores is not None]


def _xy(r: EvalRecord, xi: int, yi: int) -> tuple[float, float]:
    scores = r.scores or []
    return float(scores[xi]), float(scores[yi])


def _describe(results: Results, label: str) -> str:
    where = "" if results.store_path == ":memory:" else f" ({results.store_path})"
    return f"run {label!r}{where}"


def _axis_names(runs: Sequence[Results], labels: Sequence[str], x: int | str, y: int | str) -> tuple[str, str]:
    """The objective names asked for (an index counts in the first run), checked against every run."""
    first = runs[0].objective_names
    names = []
    for which in (x, y):
        if isinstance(which, str):
            names.append(which)
        elif 0 <= which < len(first):
            names.append(first[which])
        else:
            raise ConfigurationError(f"objective index {which} is out of range: the first run, "
                                     f"{_describe(runs[0], labels[0])}, has objectives {first}; "
                                     "pass an index below its count or an objective's name")
    if names[0] == names[1]:
        raise ConfigurationError(f"x and y are the same objective ({names[0]!r}); pick two different ones")
    for run, label in zip(runs, labels):
        missing = [n for n in names if n not in run.objective_names]
        if missing:
            raise ConfigurationError(
                f"every run must have the objectives drawn ({names[0]!r} and {names[1]!r}); "
                f"{_describe(run, label)} lacks {missing} and has {run.objective_names}: "
                "pick objectives all runs share, or leave that run out")
    for name in names:
        senses = {run.objectives[run.objective_names.index(name)].direction for run in runs}
        if len(senses) > 1:
            raise ConfigurationError(f"objective {name!r} is minimised in some runs and maximised in others; "
                                     "their fronts cannot share an axis: leave out the runs that differ")
    return names[0], names[1]


def _labels(runs: Sequence[Results], labels: Sequence[str] | None) -> list[str]:
    if labels is not None:
        if len(labels) != len(runs):
            raise ConfigurationError(f"{len(labels)} labels for {len(runs)} runs; give one label per run, or none")
        return [str(label) for label in labels]
    plain = [run_label(run) for run in runs]
    return [f"{label} [{Path(run.store_path).name}]"  # two runs described alike: told apart by their files
            if plain.count(label) > 1 and run.store_path != ":memory:" else label for run, label in zip(runs, plain)]


def _objective(results: Results, name: str) -> Objective:
    return results.objectives[results.objective_names.index(name)]


def overlay_fronts_figure(runs: Sequence[Results], x: int | str = 0, y: int | str = 1,
                          labels: Sequence[str] | None = None) -> go.Figure:
    """The Pareto fronts of several runs on one scatter of objective ``x`` against ``y``: per run a staircase
    through its front on these two objectives (``front_2d``), faint markers for all its ok points and its
    baseline starred, each in the run's colour; the hover says which run a point belongs to.

    Args:
        runs: The runs (e.g. one kernel on two architectures, or with two catalogs).
        x: Objective name, or index in the first run, on the x axis.
        y: Objective name, or index in the first run, on the y axis.
        labels: One legend name per run (default: ``run_label``; runs described alike get their file name).

    Returns:
        A ``plotly.graph_objects.Figure``; per run, traces with ``meta`` ``{"run": index, "role": "front" |
        "points" | "baseline", "path": store path}``, ``customdata`` the eval ids.

    Raises:
        ConfigurationError: No runs, x equal to y, one label count off, a run lacking an objective drawn (named with
            the objectives it has), or an objective minimised in one run and maximised in another.
    """
    go = require_plotly()
    runs = list(runs)
    if not runs:
        raise ConfigurationError("no runs to overlay; pass one or more Results (e.g. load_results(path))")
    names = _labels(runs, labels)
    xn, yn = _axis_names(runs, names, x, y)
    fig = go.Figure()
    for i, (run, label) in enumerate(zip(runs, names)):
        color, group, who = _COLORS[i % len(_COLORS)], f"run {i}", html.escape(label)
        xi, yi = run.objective_names.index(xn), run.objective_names.index(yn)
        meta = {"run": i, "path": run.store_path}
        ok = _ok(run)
        fig.add_trace(go.Scatter(
            x=[_xy(r, xi, yi)[0] for r in ok], y=[_xy(r, xi, yi)[1] for r in ok],
            mode="markers", name=f"{who}: all ok points", legendgroup=group, meta={**meta, "role": "points"},
            customdata=[r.eval_id for r in ok], text=[f"<b>{who}</b><br>{hover_text(r, run.objectives)}" for r in ok],
            hovertemplate="%{text}<extra></extra>", marker={"color": color, "size": 7, "opacity": 0.25}))
        front = front_2d(run, xn, yn)
        fig.add_trace(go.Scatter(
            x=[_xy(r, xi, yi)[0] for r in front], y=[_xy(r, xi, yi)[1] for r in front],
            mode="lines+markers", name=f"{who}: front", legendgroup=group, meta={**meta, "role": "front"},
            customdata=[r.eval_id for r in front],
            text=[f"<b>{who}</b> (on its front)<br>{hover_text(r, run.objectives)}" for r in front],
            hovertemplate="%{text}<extra></extra>",
            line={"color": color, "width": 2, "shape": "hv" if _objective(run, xn).direction == "min" else "vh"},
            marker={"color": color, "size": 9}))
        base = next((r for r in ok if r.is_baseline), None)
        if base is not None:
            fig.add_trace(go.Scatter(
                x=[_xy(base, xi, yi)[0]], y=[_xy(base, xi, yi)[1]],
                mode="markers", name=f"{who}: baseline (compiler defaults)", legendgroup=group,
                meta={**meta, "role": "baseline"}, customdata=[base.eval_id],
                text=[f"<b>{who}</b>: baseline (compiler defaults)<br>{hover_text(base, run.objectives)}"],
                hovertemplate="%{text}<extra></extra>",
                marker={"symbol": "star", "size": 17, "color": color, "line": {"width": 1.5, "color": "#111111"}}))
    fig.update_layout(
        title={"text": f"Pareto fronts of {len(runs)} run{'s' if len(runs) != 1 else ''}: "
                       f"{html.escape(xn)} vs {html.escape(yn)}"
                       "<br><sub>each front is over these two objectives only</sub>"},
        xaxis_title=html.escape(_objective(runs[0], xn).label), yaxis_title=html.escape(_objective(runs[0], yn).label),
        legend={"orientation": "h", "y": -0.2}, template="plotly_white", height=560)
    return fig
