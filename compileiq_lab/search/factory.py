"""Strategies by name: GA, NSGA-II and random, built with their hooks (constraint, surrogate screen) at once."""

from __future__ import annotations

from typing import Any

from compileiq_lab.exceptions import ConfigurationError
from compileiq_lab.search.base import Strategy

__all__ = ["STRATEGIES", "make_strategy"]

STRATEGIES = ("ga", "nsga2", "random")


def make_strategy(name: str, *args: Any, **kwargs: Any) -> Strategy:
    """Build a strategy by name ("ga", "nsga2" or "random"); arguments as for ``Strategy``.

    Raises:
        ConfigurationError: For an unknown name (the valid ones are listed).
    """
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
