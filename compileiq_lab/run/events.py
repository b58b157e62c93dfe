"""What a run tells its subscribers, as frozen dataclasses: an evaluation, a finished generation, the run's end."""

from __future__ import annotations

from dataclasses import dataclass, field

from compileiq_lab.store.sqlite import EvalRecord

__all__ = ["EvaluationEvent", "FailedEvent", "FinishedEvent", "GenerationEvent", "RunEvent"]


@dataclass(frozen=True)
class EvaluationEvent:
    """A new evaluation, committed to the run store (``record`` is the stored row)."""

    record: EvalRecord


@dataclass(frozen=True)
class GenerationEvent:
    """Every candidate of a generation has its outcome (0 is the baseline; replayed generations too).

    Attributes:
        generation: The generation.
        n_candidates: Distinct candidates it had.
        n_failed: How many of them failed.
        best_score: The best first-objective score of the run so far (None while nothing succeeded).
        n_evaluations: The run's evaluations so far (a resumed run's replayed generation: as many as it had then).
    """

    generation: int
    n_candidates: int
    n_failed: int
    best_score: float | None
    n_evaluations: int


@dataclass(frozen=True)
class FinishedEvent:
    """The run ended: ``status`` is "finished", "exhausted", "baseline_failed", "stopped" or "interrupted".

    Attributes:
        status: How it ended.
        n_evaluations: Evaluations in the store.
        reason: Why (the header's ``stop_reason``): for "finished", the limit reached ("generations",
            "max_evaluations" or "time_budget"); for "baseline_failed", why no control can help; else usually "".
            Left out of comparisons: ``FinishedEvent(status, n)`` equals the event of that ending whatever its reason.
    """

    status: str
    n_evaluations: int
    reason: str = field(default="", compare=False)


@dataclass(frozen=True)
class FailedEvent:
    """The run thread ended with an exception (kept by the Run and raised again by ``join``)."""

    error: str
    traceback: str


#: Any event of a run.
RunEvent = EvaluationEvent | GenerationEvent | FinishedEvent | FailedEvent
