"""The `tune` command's progress on stderr: one line per generation, rewritten in place on a terminal."""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Callable
from typing import Any

from compileiq_lab.run.events import EvaluationEvent, FinishedEvent, GenerationEvent, RunEvent

__all__ = ["ProgressLine", "progress_callback"]


class ProgressLine:
    """The run's progress on stderr: one line rewritten in place on a terminal (a log record first ends it, so the
    two never share a line), a line per generation elsewhere (a log file or a pipe)."""

    def __init__(self) -> None:
        self.tty = sys.stderr.isatty()
        self.open = False  # a rewritten line is on screen without its newline

    def show(self, text: str, minor: bool = False) -> None:
        """Show the progress; a ``minor`` update (each evaluation) only where it can be rewritten in place."""
        if self.tty:
            print(f"\r{text}\033[K", end="", file=sys.stderr, flush=True)
            self.open = True
        elif not minor:
            print(text, file=sys.stderr, flush=True)

    def end(self) -> None:
        if self.open:
            print(file=sys.stderr, flush=True)
            self.open = False

    def filter(self, record: logging.LogRecord) -> bool:
        """A logging filter: ends an open progress line before the record is written; drops the engine's warning
        that the run stops after the baseline (tune ends with that reason as its error)."""
        self.end()
        return not hasattr(record, "stop_reason")


def progress_callback(total_generations: int, line: ProgressLine, stored: tuple[int, int] = (0, 0),
                      shown: Callable[[Any], str] = str) -> Callable[[RunEvent], None]:
    """The run's events as progress lines; ``stored``: the evaluations (and failed ones) a continued run's store holds
    already, which the counts start from (the replayed rows raise no events); ``shown``: how the best score is written
    (the first objective's ``format``: with its unit)."""
    state: dict[str, Any] = {"evals": stored[0], "failed": stored[1], "t0": time.monotonic(), "generation": 0,
                             "best": None}

    def text() -> str:
        g = state["generation"]
        bar = "#" * int(20 * g / total_generations) if total_generations else ""
        return (f"generation {g:3d}/{total_generations} [{bar:20}] {state['evals']} evaluations, {state['failed']} "
                f"failed, best {shown(state['best']) if state['best'] is not None else None}, "
                f"{time.monotonic() - state['t0']:.0f} s")

    def on_event(event: RunEvent) -> None:
        if isinstance(event, EvaluationEvent):
            state["evals"] += 1
            state["failed"] += event.record.status != "ok"
            line.show(text(), minor=True)
        elif isinstance(event, GenerationEvent):
            state["generation"], state["best"] = event.generation, event.best_score
            line.show(text())
        elif isinstance(event, FinishedEvent):
            line.end()
    return on_event
