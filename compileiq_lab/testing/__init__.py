"""Static objectives and problems shipped for tests, benchmarks, demos and teaching."""

from __future__ import annotations

from compileiq_lab.testing.objectives import (
    FlagProblem,
    toy_objective,
    toy_space,
)

__all__ = ["FlagProblem", "toy_objective", "toy_space"]
