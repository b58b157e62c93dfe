"""The tabs beside the live scatter: evaluations table, failures and the runs of the folder, kept in step."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from compileiq_lab.widgets.failures import FailuresView
from compileiq_lab.widgets.runs import RunsList
from compileiq_lab.widgets.table import EvaluationsTable

if TYPE_CHECKING:
    from compileiq_lab.kernels import Objective
    from compileiq_lab.store.results import Results
    from compileiq_lab.widgets.live import LivePlots

__all__ = ["SidePanels"]

Guard = Callable[[Callable[..., None]], Callable[..., None]]


class SidePanels:
    """The evaluations table (sortable, filterable; a picked row selects its point), the failures grouped by
    status (a picked failure opens in the point tab) and the runs list (open a run, overlay the fronts of several),
    as tabs of a run's ``LivePlots``.

    Args:
        objectives: The run's objectives.
        folder: Where the runs list looks for run stores.
        on_select: Called with an eval id picked in the table or the failures.
        on_open: Called with a run store picked in the runs list.
        guard: Wraps each widget callback (the dashboard's).
    """

    def __init__(self, objectives: list[Objective], folder: str | Path, on_select: Callable[[int], None],
                 on_open: Callable[[str], Any], guard: Guard) -> None:
        self.table = EvaluationsTable(objectives, on_select=on_select, guard=guard)
        self.failures = FailuresView()
        self.failures.on_select(on_select)
        self.runs = RunsList(folder, on_open=on_open, guard=guard)

    def attach(self, plots: LivePlots) -> None:
        """Put the panels in the plots' side tabs (after the point tab)."""
        plots.add_tab("evaluations", self.table.box)
        plots.add_tab("failures", self.failures.box)
        plots.add_tab("runs", self.runs.box)

    def update(self, results: Results) -> None:
        """Show a fresh snapshot of the run (cheap when little changed)."""
        self.table.update(results)
        self.failures.update(results)

    def highlight(self, eval_id: int | None) -> None:
        """Mark the selected evaluation in the table (without calling back)."""
        self.table.highlight(eval_id)
