"""Search-space DSL (range, choice, literal, log_sampling, flag) and the SearchSpace encoding."""

from __future__ import annotations

from compileiq_lab.space.params import Param, choice, flag, literal, log_sampling, param_from_spec, range
from compileiq_lab.space.space import SearchSpace, config_key

__all__ = [
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
