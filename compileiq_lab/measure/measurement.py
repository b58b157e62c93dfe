"""Measurement: the outcome of one evaluation, failures included, as a value."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from compileiq_lab.store.statuses import OK, STATUSES

__all__ = ["OK", "STATUSES", "Measurement"]


@dataclass
class Measurement:
    """Outcome of evaluating one config.

    Attributes:
        status: One of ``STATUSES``.
        scores: One float per objective when ``status == "ok"``, else None.
        error: Short reason for a failure ("" when ok).
        elapsed_s: Wall time of the objective call in seconds.
        detail: Extra data (traceback tail, stderr tail, metrics) kept with the row.
    """

    status: str
    scores: tuple[float, ...] | None = None
    error: str = ""
    elapsed_s: float = 0.0
    detail: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"status must be one of {list(STATUSES)}, but got {self.status!r}")

    @property
    def ok(self) -> bool:
        """Whether the evaluation produced usable scores."""
        return self.status == OK
