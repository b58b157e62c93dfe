"""compileiq-lab: find the compiler settings under which a kernel runs best, in the open."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from compileiq_lab._version import __version__

__all__ = [
    "ACF",
    "BASELINE_CONFIG",
    "INVALID_SCORE",
    "CompileIQLabError",
    "EngineConfig",
    "KernelRun",
    "Measurement",
    "MultiProcessWorker",
    "Objective",
    "Results",
    "Run",
    "Score",
    "Search",
    "SearchConfiguration",
    "SearchSpace",
    "Worker",
    "WorkerTypes",
    "__version__",
    "choice",
    "compare_fronts",
    "control_influence",
    "control_interactions",
    "export_point",
    "flag",
    "history_figure",
    "literal",
    "load_acf",
    "load_results",
    "log_sampling",
    "pareto_figure",
    "range",
    "validate",
    "warm_start_configs",
    "widening_search",
]

# name -> module; resolved on first access so `import compileiq_lab` stays light
_LAZY = {
    "Search": "compileiq_lab.run.facade",
    "Run": "compileiq_lab.run.thread",
    "SearchConfiguration": "compileiq_lab.search.config",
    "SearchSpace": "compileiq_lab.space.space",
    "Objective": "compileiq_lab.space.objectives",
    "Results": "compileiq_lab.store.results",
    "load_results": "compileiq_lab.store.results",
    "KernelRun": "compileiq_lab.kernels.run",
    "ACF": "compileiq_lab.acf.format",
    "load_acf": "compileiq_lab.acf.format",
    "export_point": "compileiq_lab.acf.exporting",
    "Measurement": "compileiq_lab.measure.measurement",
    "range": "compileiq_lab.space.params",
    "choice": "compileiq_lab.space.params",
    "literal": "compileiq_lab.space.params",
    "log_sampling": "compileiq_lab.space.params",
    "flag": "compileiq_lab.space.params",
    "pareto_figure": "compileiq_lab.viz.figures",
    "history_figure": "compileiq_lab.viz.figures",
    "control_influence": "compileiq_lab.analysis.influence",
    "control_interactions": "compileiq_lab.analysis.influence",
    "validate": "compileiq_lab.analysis.validation",
    "widening_search": "compileiq_lab.analysis.widening",
    "warm_start_configs": "compileiq_lab.analysis.registry",
    "compare_fronts": "compileiq_lab.analysis.registry",
    "WorkerTypes": "compileiq_lab.run.compat",
    "Worker": "compileiq_lab.run.compat",
    "MultiProcessWorker": "compileiq_lab.run.compat",
    "EngineConfig": "compileiq_lab.run.compat",
    "Score": "compileiq_lab.run.compat",
    "INVALID_SCORE": "compileiq_lab.run.compat",
    "BASELINE_CONFIG": "compileiq_lab.run.compat",
    "CompileIQLabError": "compileiq_lab.exceptions",
}

if TYPE_CHECKING:
    from compileiq_lab.acf.exporting import export_point
    from compileiq_lab.acf.format import ACF, load_acf
    from compileiq_lab.analysis.influence import control_influence, control_interactions
    from compileiq_lab.analysis.registry import compare_fronts, warm_start_configs
    from compileiq_lab.analysis.validation import validate
    from compileiq_lab.analysis.widening import widening_search
    from compileiq_lab.exceptions import CompileIQLabError
    from compileiq_lab.kernels.run import KernelRun
    from compileiq_lab.measure.measurement import Measurement
    from compileiq_lab.run.compat import (
        BASELINE_CONFIG,
        INVALID_SCORE,
        EngineConfig,
        MultiProcessWorker,
        Score,
        Worker,
        WorkerTypes,
    )
    from compileiq_lab.run.facade import Search
    from compileiq_lab.run.thread import Run
    from compileiq_lab.search.config import SearchConfiguration
    from compileiq_lab.space.objectives import Objective
    from compileiq_lab.space.params import choice, flag, literal, log_sampling, range
    from compileiq_lab.space.space import SearchSpace
    from compileiq_lab.store.results import Results, load_results
    from compileiq_lab.viz.figures import history_figure, pareto_figure


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'compileiq_lab' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
