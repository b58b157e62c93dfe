"""Where evaluations run: the local executors (in the calling thread, or a pool of threads) behind one protocol."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Protocol, TypeVar

__all__ = ["Executor", "InlineExecutor", "Job", "ThreadExecutor", "local_executor"]

T = TypeVar("T")
T_co = TypeVar("T_co", covariant=True)


class Job(Protocol[T_co]):
    """A submitted evaluation: its result (waiting for it) or its cancellation."""

    def result(self) -> T_co: ...

    def cancel(self) -> bool: ...


class Executor(Protocol):
    """Runs submitted calls; results are collected in submission order by the loop."""

    def submit(self, fn: Callable[..., T], *args: Any) -> Job[T]: ...

    def shutdown(self) -> None: ...


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


class InlineExecutor:
    """Evaluations one at a time in the calling thread, each when the loop collects it."""

    def submit(self, fn: Callable[..., T], *args: Any) -> Job[T]:
        return _Deferred(fn, args)

    def shutdown(self) -> None:
        return None


class ThreadExecutor:
    """Evaluations at once in a pool of threads (for objectives that wait on compilers or other processes).

    Args:
        workers: Threads in the pool.
    """

    def __init__(self, workers: int) -> None:
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="compileiq-eval")

    def submit(self, fn: Callable[..., T], *args: Any) -> Job[T]:
        future: Future[T] = self._pool.submit(fn, *args)
        return future

    def shutdown(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)


def local_executor(workers: int) -> Executor:
    """The executor for ``workers`` evaluations at once on this machine (1: in the calling thread)."""
    return InlineExecutor() if workers <= 1 else ThreadExecutor(workers)
