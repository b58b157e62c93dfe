"""The notebook lab: a live dashboard over a background Run (the only package that imports ipywidgets)."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__all__ = ["Dashboard", "EvaluationsTable", "EventBridge", "FailuresView", "LivePlots", "RunsList"]

_LAZY = {"Dashboard": "compileiq_lab.widgets.dashboard", "EventBridge": "compileiq_lab.widgets.bridge",
         "LivePlots": "compileiq_lab.widgets.live", "EvaluationsTable": "compileiq_lab.widgets.table",
         "FailuresView": "compileiq_lab.widgets.failures", "RunsList": "compileiq_lab.widgets.runs"}

if TYPE_CHECKING:
    from compileiq_lab.widgets.bridge import EventBridge
    from compileiq_lab.widgets.dashboard import Dashboard
    from compileiq_lab.widgets.failures import FailuresView
    from compileiq_lab.widgets.live import LivePlots
    from compileiq_lab.widgets.runs import RunsList
    from compileiq_lab.widgets.table import EvaluationsTable


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'compileiq_lab.widgets' has no attribute {name!r}")
