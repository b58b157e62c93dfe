"""Static objectives and problems shipped for tests, benchmarks, demos and teaching (recorded compiler tables too)."""

from __future__ import annotations

from compileiq_lab.testing.exercises import check_answer
from compileiq_lab.testing.objectives import (
    FlagProblem,
    toy_objective,
    toy_space,
)
from compileiq_lab.testing.tables import Table, TableCompileError, TableObjective
from compileiq_lab.testing.tools import tool_available

__all__ = ["FlagProblem", "Table", "TableCompileError", "TableObjective", "check_answer", "tool_available",
           "toy_objective", "toy_space"]
