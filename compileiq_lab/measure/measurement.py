"""Measurement: the outcome of one evaluation, failures included, as a value."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["OK", "STATUSES", "Measurement"]

OK = "ok"
#: Every status an evaluation can end with. Only "ok" carries scores the search ranks.
STATUSES = (
    "ok",            # scores are finite numbers
    "error",         # the objective raised
    "invalid",       # NaN/inf, None, a non-number or the wrong number of values
    "timeout",       # the objective exceeded timeout_s and its worker was killed
    "crashed",       # the worker process died during the call
    "compile_error", "compile_timeout", "run_error", "run_timeout", "wrong_output",
)


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
