"""Where evaluations run: the local executors (in the calling thread, or a pool of threads) and Dask, behind one
protocol."""

from __future__ import annotations

import logging
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Protocol, TypeVar

from compileiq_lab.measure.measurement import Measurement
from compileiq_lab.measure.objective import make_evaluator

__all__ = ["Executor", "ExecutorSpec", "InlineExecutor", "Job", "ThreadExecutor", "local_executor", "open_executor"]

log = logging.getLogger(__name__)
T = TypeVar("T")
T_co = TypeVar("T_co", covariant=True)


class Job(Protocol[T_co]):
    """A submitted evaluation: its result (waiting for it) or its cancellation."""

    def result(self) -> T_co: ...

    def cancel(self) -> bool: ...


Evaluate = Callable[[dict[str, Any]], Measurement]


class Executor(Protocol):
    """Runs the loop's calls (``slots`` at once) and decides where the objective itself is called."""

    @property
    def slots(self) -> int: ...

    def submit(self, fn: Callable[..., T], *args: Any) -> Job[T]: ...

    def evaluator(self, fn: Callable[[dict[str, Any]], Any], n_objectives: int,
                  timeout_s: float | None) -> tuple[Evaluate, Callable[[], None]]: ...

    def shutdown(self) -> None: ...


#: What ``Search(executor=...)`` takes: None or "local" (this machine), "dask", "dask-cuda", a scheduler address,
#: a ``distributed.Client``, or an Executor.
ExecutorSpec = Any


class _Here:
    """The objective called in this process (with a per-call limit: in as many killable worker processes as slots)."""

    slots = 1

    def evaluator(self, fn: Callable[[dict[str, Any]], Any], n_objectives: int,
                  timeout_s: float | None) -> tuple[Evaluate, Callable[[], None]]:
        return make_evaluator(fn, n_objectives, timeout_s, processes=self.slots)


class _Deferred(Job[T]):
    """A call made only when its result is asked for (so a stop between two calls is honoured)."""

    def __init__(self, fn: Callable[..., T], args: tuple[Any, ...]) -> None:
        self._fn: Callable[..., T] | None = fn
        self._args = args

    def result(self) -> T:
        fn, self._fn = self._fn, None
        if fn is None:
            raise RuntimeError("this job was already run or cancelled")
        return fn(*self._args)

    def cancel(self) -> bool:
        self._fn = None
        return True


class InlineExecutor(_Here):
    """Evaluations one at a time in the calling thread, each when the loop collects it."""

    def submit(self, fn: Callable[..., T], *args: Any) -> Job[T]:
        return _Deferred(fn, args)

    def shutdown(self) -> None:
        return None


class ThreadExecutor(_Here):
    """Evaluations at once in a pool of threads (for objectives that wait on compilers or other processes).

    Args:
        workers: Threads in the pool.
    """

    def __init__(self, workers: int) -> None:
        self.slots = workers
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="compileiq-eval")

    def submit(self, fn: Callable[..., T], *args: Any) -> Job[T]:
        future: Future[T] = self._pool.submit(fn, *args)
        return future

    def shutdown(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)


def local_executor(workers: int) -> Executor:
    """The executor for ``workers`` evaluations at once on this machine (1: in the calling thread)."""
    return InlineExecutor() if workers <= 1 else ThreadExecutor(workers)


def open_executor(spec: ExecutorSpec, workers: int | None) -> tuple[Executor, bool]:
    """The executor a search runs on, and whether it was made here (made per ``start``: then the caller shuts it
    down after the run; an Executor object given is used as it is and left running for its owner).

    Args:
        spec: See ``ExecutorSpec``.
        workers: Evaluations at once (None: 1 here, every worker thread of a Dask cluster).

    Raises:
        ConfigurationError: A spec that names no executor, or a Dask cluster that cannot be used (see
            ``compileiq_lab.run.dask_executor.DaskExecutor``).
    """
    if spec is None or spec == "local":
        return local_executor(workers or 1), True
    if hasattr(spec, "submit") and hasattr(spec, "evaluator") and hasattr(spec, "slots"):
        if workers is not None and workers != spec.slots:
            log.warning("workers=%d is ignored: the executor given runs %d evaluations at once", workers, spec.slots)
        return spec, False
    from compileiq_lab.run.dask_executor import DaskExecutor

    return DaskExecutor(spec, workers=workers), True
