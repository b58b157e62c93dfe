"""The stages of a widening search drawn on one convergence history: each stage's band, tiers and best so far."""

from __future__ import annotations

import html
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from compileiq_lab.exceptions import ConfigurationError
from compileiq_lab.viz.data import history_data
from compileiq_lab.viz.figures import require_plotly

if TYPE_CHECKING:
    import plotly.graph_objects as go

    from compileiq_lab.store.results import Results

__all__ = ["stage_label", "stages_history_figure"]

#: Band colours of alternate stages.
_BANDS = ("rgba(31,119,180,0.07)", "rgba(255,127,14,0.07)")


def stage_label(results: Results, number: int) -> str:
    """``"stage 2: common+advanced"`` from a stage's header (``widening_search`` stores its tiers there)."""
    meta = results.header.kernel
    extra: dict[str, Any] = dict(meta.extra) if meta is not None else {}
    tiers = extra.get("tiers")
    named = "+".join(str(t) for t in tiers) if isinstance(tiers, (list, tuple)) and tiers else ""
    return f"stage {extra.get('widening_stage', number)}" + (f": {named}" if named else "")


def stages_history_figure(stages: Sequence[Results], objective: int | str = 0) -> go.Figure:
    """One convergence line through the stages of a widening search (``widening_search(...).stages``, each
    stage's run store loaded): generations numbered on across the stages, each stage a shaded band named by its
    tiers, the best so far carried over from stage to stage (a stage opens with the last one's front), and the
    median of each generation.

    Raises:
        ConfigurationError: No stages, or a stage without the objective.
    """
    go = require_plotly()
    if not stages:
        raise ConfigurationError("stages_history_figure needs the stages' results, got none; pass "
                                 "[load_results(s.store) for s in widening_search(...).stages]")
    name = objective if isinstance(objective, str) else stages[0].objective_names[objective]
    fig = go.Figure()
    offset, best, sign = 0, None, None
    xs_best: list[int] = []
    ys_best: list[float | None] = []
    for number, results in enumerate(stages, start=1):
        if name not in results.objective_names:
            raise ConfigurationError(f"stage {number} has no objective {name!r} (it has "
                                     f"{', '.join(results.objective_names)}); draw an objective every stage has")
        k = results.objective_names.index(name)
        sign = results.objectives[k].sign
        d = history_data(results)
        obj = d["objectives"][k]
        xs = [offset + i + 1 for i in range(len(d["generations"]))]
        for x, b in zip(xs, obj["best"]):
            if b is not None and (best is None or b * sign < best * sign):
                best = b
            xs_best.append(x)
            ys_best.append(best)
        fig.add_trace(go.Scatter(x=xs, y=obj["median"], mode="lines", line={"dash": "dash", "color": "#7f7f7f"},
                                 name="median per generation", legendgroup="median", showlegend=number == 1))
        if xs:
            fig.add_vrect(x0=xs[0] - 0.5, x1=xs[-1] + 0.5, fillcolor=_BANDS[(number - 1) % 2], line_width=0,
                          annotation_text=html.escape(stage_label(results, number)),
                          annotation_position="top left", annotation_font_size=11)
        offset = xs[-1] if xs else offset
    fig.add_trace(go.Scatter(x=xs_best, y=ys_best, mode="lines+markers", name="best so far",
                             line={"color": "#d62728", "width": 2}))
    label = stages[0].objectives[stages[0].objective_names.index(name)].label
    fig.update_layout(title={"text": f"widening search: {len(stages)} stages"}, template="plotly_white",
                      xaxis_title="generation (numbered on across the stages)", yaxis_title=html.escape(label),
                      height=380, legend={"orientation": "h", "y": -0.25})
    return fig
