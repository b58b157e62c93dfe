"""Work off the calling thread (e.g. a model fit behind the lab): a daemon thread that hands its outcome on."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import TypeVar

__all__ = ["in_background"]

log = logging.getLogger(__name__)
T = TypeVar("T")


def in_background(work: Callable[[], T], done: Callable[[T], None], name: str = "compileiq-task") -> threading.Thread:
    """Run ``work()`` in a daemon thread and pass what it returns to ``done`` (called in that thread: hand it
    to your own thread, e.g. with ``loop.call_soon_threadsafe``). An exception of ``work`` is logged.

    Args:
        work: The job (it must not touch widgets).
        done: Receives the job's result.
        name: The thread's name.

    Returns:
        The started thread.
    """
    def main() -> None:
        try:
            outcome = work()
        except Exception:
            log.exception("background job %s failed", name)
            return
        done(outcome)

    thread = threading.Thread(target=main, name=name, daemon=True)
    thread.start()
    return thread
