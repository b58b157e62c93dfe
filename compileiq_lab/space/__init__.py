"""Search-space DSL (range, choice, literal, log_sampling, flag), the SearchSpace encoding and the objectives."""

from __future__ import annotations

from compileiq_lab.space.objectives import METRICS, Objective
from compileiq_lab.space.params import Param, choice, flag, literal, log_sampling, param_from_spec, range
from compileiq_lab.space.space import SearchSpace, config_key

__all__ = [
    "METRICS",
    "Objective",
    "Param",
    "SearchSpace",
    "choice",
    "config_key",
    "flag",
    "literal",
    "log_sampling",
    "param_from_spec",
    "range",
]
