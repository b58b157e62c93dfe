"""Pure ask/tell search strategies (GA, NSGA-II, random) and Pareto utilities."""

from __future__ import annotations

from typing import Any

from compileiq_lab.exceptions import ConfigurationError
from compileiq_lab.search.base import Strategy
from compileiq_lab.search.pareto import dominates, hypervolume, pareto_mask

__all__ = ["Strategy", "STRATEGIES", "make_strategy", "pareto_mask", "dominates", "hypervolume"]

STRATEGIES = ("ga", "nsga2", "random")


def make_strategy(name: str, *args: Any, **kwargs: Any) -> Strategy:
    """Build a strategy by name ("ga", "nsga2" or "random")."""
    if name == "ga":
        from compileiq_lab.search.evolutionary import GAStrategy

        return GAStrategy(*args, **kwargs)
    if name == "nsga2":
        from compileiq_lab.search.evolutionary import NSGA2Strategy

        return NSGA2Strategy(*args, **kwargs)
    if name == "random":
        from compileiq_lab.search.random import RandomStrategy

        return RandomStrategy(*args, **kwargs)
    raise ConfigurationError(f"unknown strategy {name!r}; valid strategies: {list(STRATEGIES)}")
