"""Call a user objective in-process and classify what it returns (number, tuple, failure)."""

from __future__ import annotations

import math
import numbers
import queue
import time
import traceback
from collections.abc import Callable, Mapping
from functools import partial
from typing import Any

from compileiq_lab.exceptions import EnvironmentFaultError
from compileiq_lab.measure.measurement import Measurement

__all__ = ["INVALID_SCORE", "call_objective", "classify_return", "make_evaluator"]

_TB_LINES = 12
#: What an objective returns for a failed evaluation, as CompileIQ marks one (recorded as "invalid", never ranked).
INVALID_SCORE = "*"


def _is_invalid_score(value: Any) -> bool:
    return isinstance(value, str) and value == INVALID_SCORE


def classify_return(value: Any, n_objectives: int) -> Measurement:
    """Turn an objective's return value into a Measurement.

    Args:
        value: What the objective returned: a number, a sequence of numbers, or a Measurement.
        n_objectives: How many numbers are expected.

    Returns:
        An "ok" measurement with the scores, or an "invalid" one saying what was wrong.
    """
    if isinstance(value, Measurement):
        if value.ok:
            inner = classify_return(value.scores, n_objectives)
            if not inner.ok:
                return inner
            value.scores = inner.scores
        return value
    if value is None:
        return Measurement("invalid", error="objective returned None; return a number "
                           f"({n_objectives} values for {n_objectives} objectives)")
    if _is_invalid_score(value) or (isinstance(value, (tuple, list)) and any(map(_is_invalid_score, value))):
        return Measurement("invalid", error="objective returned INVALID_SCORE: a failed evaluation, as it marks one")
    items = _as_items(value)
    if items is None:
        return Measurement("invalid", error=f"objective returned {type(value).__name__} {_short(value)}; "
                           "return a number or a tuple of numbers")
    if len(items) != n_objectives:
        return Measurement("invalid", error=f"objective returned {len(items)} value{'s' * (len(items) != 1)} but "
                           f"num_objectives={n_objectives}: {_short(value)}")
    scores = []
    for v in items:
        if isinstance(v, bool) or not isinstance(v, numbers.Real):
            return Measurement("invalid", error=f"objective returned a non-number {_short(v)} "
                               f"({type(v).__name__}) in {_short(value)}")
        try:
            f = float(v)
        except (OverflowError, ValueError):
            f = math.inf
        if not math.isfinite(f):
            where = f" in {_short(value)}" if len(items) > 1 else ""
            return Measurement("invalid", error=f"objective returned a non-finite value {f}{where}")
        scores.append(f)
    return Measurement("ok", scores=tuple(scores))


def _as_items(value: Any) -> list[Any] | None:
    if isinstance(value, (str, bytes, Mapping)):
        return None
    if isinstance(value, numbers.Real) or (hasattr(value, "shape") and getattr(value, "shape", None) == ()):
        return [value.item() if hasattr(value, "item") else value]
    try:
        return list(value)
    except TypeError:
        return None


def _short(value: Any, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def call_objective(fn: Callable[[dict[str, Any]], Any], config: dict[str, Any], n_objectives: int) -> Measurement:
    """Call ``fn(config)`` and return a Measurement; exceptions become status "error".

    KeyboardInterrupt and EnvironmentFaultError (a full disk: the machine's failure, not the config's) are not
    caught: they stop the run (with every finished row kept). Every other exception, BaseException subclasses such as
    SystemExit or asyncio.CancelledError included, is the config's row.

    Args:
        fn: The objective function.
        config: The config dict (knocked-out parameters absent).
        n_objectives: Expected number of values.

    Returns:
        The measurement, with ``elapsed_s`` set to the wall time of the call.
    """
    t0 = time.perf_counter()
    try:
        m = classify_return(fn(config), n_objectives)  # (reading a returned iterator may raise too)
    except (EnvironmentFaultError, KeyboardInterrupt, GeneratorExit):
        raise
    except BaseException as exc:  # noqa: BLE001 - failures are values (SystemExit, asyncio.CancelledError, a timeout
        # library's own BaseException), as they are when the objective runs in a worker process
        elapsed = time.perf_counter() - t0
        tb = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)[-_TB_LINES:])
        return Measurement("error", error=f"{type(exc).__name__}: {_text_of(exc)}"[:500], elapsed_s=elapsed,
                           detail={"traceback": tb})
    elapsed = time.perf_counter() - t0
    given = m.elapsed_s  # an objective's Measurement may carry its own time (e.g. the kernel's alone)
    m.elapsed_s = given if isinstance(given, (int, float)) and math.isfinite(given) and given > 0 else elapsed
    return m


def _text_of(exc: BaseException) -> str:
    """An exception's message, or what is known of it when its ``__str__`` itself raises."""
    try:
        return str(exc)
    except Exception as inner:  # noqa: BLE001 - a broken __str__ must not end the run
        return f"<message not printable: {type(inner).__name__} in its __str__>"


def make_evaluator(fn: Callable[[dict[str, Any]], Any], n_objectives: int, timeout_s: float | None,
                   processes: int = 1) -> tuple[Callable[[dict[str, Any]], Measurement], Callable[[], None]]:
    """An evaluator for ``fn`` and the function that releases it.

    Without a timeout the objective is called in-process; with one it runs in killable worker
    processes (see ``compileiq_lab.measure.worker.WorkerObjective``), started here: ``processes``
    of them, each call taking a free one (so that many calls from threads run at once).

    Args:
        fn: The objective.
        n_objectives: Number of values it must return.
        timeout_s: Limit per call, or None.
        processes: Worker processes to start when there is a timeout.
    """
    if timeout_s is None:
        return partial(call_objective, fn, n_objectives=n_objectives), lambda: None
    from compileiq_lab.measure.worker import WorkerObjective

    free: queue.SimpleQueue[WorkerObjective] = queue.SimpleQueue()
    started: list[WorkerObjective] = []
    try:
        for _ in range(max(1, processes)):
            worker = WorkerObjective(fn, n_objectives, timeout_s)
            started.append(worker)
            worker.start()
            free.put(worker)
    except BaseException:
        for worker in started:
            worker.close()
        raise

    def evaluate(config: dict[str, Any]) -> Measurement:
        worker = free.get()
        try:
            return worker(config)
        finally:
            free.put(worker)

    def close() -> None:
        for worker in started:
            worker.close()
    return evaluate, close
