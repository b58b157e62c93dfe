"""Plot data (plain lists, no plotly) and plotly figures of a run; figures load plotly lazily."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from compileiq_lab.viz.data import (
    failure_summary,
    front_table,
    history_data,
    parallel_data,
    pareto_data,
)

__all__ = [
    "failure_summary",
    "front_table",
    "history_data",
    "history_figure",
    "overlay_fronts_figure",
    "parallel_data",
    "parallel_figure",
    "pareto_data",
    "pareto_figure",
    "stages_history_figure",
]

_FIGURES = {"pareto_figure": "compileiq_lab.viz.figures", "history_figure": "compileiq_lab.viz.figures",
            "parallel_figure": "compileiq_lab.viz.figures", "overlay_fronts_figure": "compileiq_lab.viz.overlay",
            "stages_history_figure": "compileiq_lab.viz.stages"}

if TYPE_CHECKING:
    from compileiq_lab.viz.figures import history_figure, parallel_figure, pareto_figure
    from compileiq_lab.viz.overlay import overlay_fronts_figure
    from compileiq_lab.viz.stages import stages_history_figure


def __getattr__(name: str) -> Any:
    if name in _FIGURES:
        value = getattr(importlib.import_module(_FIGURES[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'compileiq_lab.viz' has no attribute {name!r}")
