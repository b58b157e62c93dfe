"""compileiq-lab: find the compiler settings under which a kernel runs best, in the open."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from compileiq_lab._version import __version__

__all__ = [
    "Search",
    "Run",
    "SearchConfiguration",
    "SearchSpace",
    "Results",
    "Measurement",
    "load_results",
    "ACF",
    "load_acf",
    "range",
    "choice",
    "literal",
    "log_sampling",
    "flag",
    "CompileIQLabError",
    "__version__",
]

# name -> module; resolved on first access so `import compileiq_lab` stays light
_LAZY = {
    "Search": "compileiq_lab.run.facade",
    "Run": "compileiq_lab.run.thread",
    "SearchConfiguration": "compileiq_lab.search.config",
    "SearchSpace": "compileiq_lab.space",
    "Results": "compileiq_lab.store.results",
    "load_results": "compileiq_lab.store.results",
    "ACF": "compileiq_lab.acf",
    "load_acf": "compileiq_lab.acf",
    "Measurement": "compileiq_lab.measure.measurement",
    "range": "compileiq_lab.space",
    "choice": "compileiq_lab.space",
    "literal": "compileiq_lab.space",
    "log_sampling": "compileiq_lab.space",
    "flag": "compileiq_lab.space",
    "CompileIQLabError": "compileiq_lab.exceptions",
}

if TYPE_CHECKING:
    from compileiq_lab.acf import ACF, load_acf
    from compileiq_lab.search.config import SearchConfiguration
    from compileiq_lab.exceptions import CompileIQLabError
    from compileiq_lab.measure.measurement import Measurement
    from compileiq_lab.store.results import Results, load_results
    from compileiq_lab.run.thread import Run
    from compileiq_lab.space import SearchSpace, choice, flag, literal, log_sampling, range
    from compileiq_lab.run.facade import Search


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'compileiq_lab' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
