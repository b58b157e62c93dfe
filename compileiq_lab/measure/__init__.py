"""Measurement: outcomes as values, objective calls in-process or in a killable worker."""

from __future__ import annotations

from compileiq_lab.measure.measurement import OK, STATUSES, Measurement
from compileiq_lab.measure.objective import call_objective, classify_return

__all__ = ["OK", "STATUSES", "Measurement", "call_objective", "classify_return"]
