"""Pure ask/tell search strategies (GA, NSGA-II, random), their settings and Pareto utilities."""

from __future__ import annotations

from compileiq_lab.search.base import Strategy
from compileiq_lab.search.config import ResolvedConfiguration, SearchConfiguration, default_pool_size
from compileiq_lab.search.factory import STRATEGIES, make_strategy
from compileiq_lab.search.pareto import dominates, hypervolume, pareto_mask

__all__ = ["STRATEGIES", "ResolvedConfiguration", "SearchConfiguration", "Strategy", "default_pool_size",
           "dominates", "hypervolume", "make_strategy", "pareto_mask"]
