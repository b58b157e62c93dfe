"""Evaluations on Dask distributed: an existing cluster, a LocalCluster, or dask-cuda's one worker per GPU.

The run stays a single writer: each evaluation is a Dask task whose Measurement comes back to the process that owns
the run store, which commits it as it arrives. The objective travels to the workers once per task as a cloudpickle
blob (small: a function, or a ``KernelRun``'s recipe) and is rebuilt once per worker process. A task whose worker
dies is rescheduled once, then recorded as ``crashed``.
"""

from __future__ import annotations

import hashlib
import logging
import os
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TypeVar

from compileiq_lab._version import __version__
from compileiq_lab.exceptions import ConfigurationError
from compileiq_lab.measure.evaluator import Built, finish_built
from compileiq_lab.measure.measurement import Measurement
from compileiq_lab.run.dask_worker import remote_check, remote_evaluate, remote_forget, remote_stage
from compileiq_lab.space.space import config_key

__all__ = ["CLUSTER_SETTINGS", "CONNECT_TIMEOUT_S", "DaskExecutor", "check_workers", "describe_workers"]

log = logging.getLogger(__name__)
T = TypeVar("T")

#: How long to wait for a scheduler to answer, and for a first worker to join it.
CONNECT_TIMEOUT_S = 10.0
#: The Dask settings of the clusters made here: the scheduler gives up on a task at its first dead worker (the executor
#: reschedules it once itself), and no task waits on a worker beyond its threads (a task queued on a worker that a
#: crashing candidate kills would be charged with that death).
CLUSTER_SETTINGS = {"distributed.scheduler.allowed-failures": 0, "distributed.scheduler.worker-saturation": 1.0}
#: Times a task is submitted when its worker dies under it (the first try and one reschedule).
_TRIES = 2
_INSTALL = "Dask executors need distributed: pip install 'compileiq-lab[dist]'"


def _distributed() -> Any:
    try:
        import distributed
    except ImportError as exc:
        raise ConfigurationError(f"{_INSTALL} ({exc})") from None
    return distributed


class DaskExecutor:
    """Evaluate on a Dask cluster; up to ``slots`` evaluations are out at once.

    Args:
        target: A ``distributed.Client``; a scheduler address (``"tcp://host:8786"``); ``"dask"`` for a LocalCluster
            of one single-threaded worker process per core; ``"dask-cuda"`` for dask-cuda's LocalCUDACluster (one
            worker per visible GPU, each with the resource ``GPU=1``).
        workers: Evaluations at once (default: the cluster's worker threads); for "dask", also its worker count.
        connect_timeout_s: How long to wait for the scheduler and for a first worker (default ``CONNECT_TIMEOUT_S``).

    Raises:
        ConfigurationError: An unknown target, an unreachable scheduler, a cluster without workers, or a missing
            ``distributed``/``dask-cuda`` (each message says what to do).
    """

    def __init__(self, target: Any, workers: int | None = None, connect_timeout_s: float | None = None) -> None:
        distributed = _distributed()
        connect_timeout_s = CONNECT_TIMEOUT_S if connect_timeout_s is None else connect_timeout_s
        self._cluster: Any = None
        self._own_client = True
        self.where = str(target)
        if isinstance(target, distributed.Client):
            self.client, self._own_client = target, False
            self.where = f"the Client's scheduler {target.scheduler.address if target.scheduler else '?'}"
        elif target in ("dask", "dask-cuda"):
            self._cluster = _local_cluster(target, workers)
            try:
                self.client = distributed.Client(self._cluster)
            except BaseException:
                self._cluster.close()
                raise
            self.where = f"a {type(self._cluster).__name__} on this machine"
        elif isinstance(target, str) and "://" in target:
            try:
                self.client = distributed.Client(target, timeout=f"{connect_timeout_s}s")
            except (OSError, TimeoutError, ValueError) as exc:
                raise ConfigurationError(
                    f"could not reach the Dask scheduler at {target!r} within {connect_timeout_s:g} s ({exc}); start "
                    f"one there (`dask scheduler`) with workers (`dask worker {target}`), check the address and port, "
                    "or use executor='dask' for a cluster on this machine") from None
        else:
            raise ConfigurationError(f"executor must be 'local', 'dask', 'dask-cuda', a scheduler address such as "
                                     f"'tcp://host:8786' or a distributed.Client, but got {target!r}")
        try:
            self.client.wait_for_workers(1, timeout=connect_timeout_s)
        except (TimeoutError, OSError) as exc:
            self.shutdown()
            raise ConfigurationError(f"no Dask worker joined {self.where} within {connect_timeout_s:g} s ({exc}); "
                                     f"start workers with `dask worker <scheduler address>`") from None
        threads = sum(w.get("nthreads", 1) for w in describe_workers(self.client).values())
        self.slots = workers or max(1, threads)
        self._pool = ThreadPoolExecutor(max_workers=self.slots, thread_name_prefix="compileiq-dask")

    # -- the Executor protocol ------------------------------------------------------------------
    def submit(self, fn: Callable[..., T], *args: Any) -> Future[T]:
        """Run ``fn`` in one of ``slots`` local threads (the loop's gate and stop stay here; the objective call it
        makes goes to the cluster)."""
        future: Future[T] = self._pool.submit(fn, *args)
        return future

    def shutdown(self) -> None:
        """Stop the local threads; close the client and the cluster this executor made (never a Client it was
        given)."""
        pool = getattr(self, "_pool", None)
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)
        if self._own_client and getattr(self, "client", None) is not None:
            self.client.close()
        if self._cluster is not None:
            self._cluster.close()
            self._cluster = None

    def evaluator(self, fn: Callable[[dict[str, Any]], Any], n_objectives: int, timeout_s: float | None
                  ) -> tuple[Callable[[dict[str, Any]], Measurement], Callable[[], None]]:
        """The evaluator that runs ``fn`` on the cluster, after checking that the workers can run it.

        Tasks ask for the objective's ``dask_resources`` (e.g. ``{"GPU": 1}`` for a KernelRun that times GPU runs),
        so they only go to workers that declare them.

        Raises:
            ConfigurationError: The objective cannot be pickled, no worker has the resources it needs, or a worker
                cannot load or run it (a missing compiler, another compileiq-lab version); said before any search.
        """
        blob = _pickle(fn)
        token = hashlib.sha256(blob).hexdigest()[:16]
        resources = dict(getattr(fn, "dask_resources", None) or {}) or None
        staged = resources is not None and all(callable(getattr(fn, m, None)) for m in ("compile_stage", "run_stage"))
        check_workers(self.client, self.where, blob, token, resources, staged)
        if getattr(fn, "exclusive_runs", False) and self.slots > 1:
            log.warning("this objective times runs on the CPU: the cluster evaluates one candidate at a time (two at "
                        "once on one machine would distort each other's timings)")
            self._pool.shutdown(wait=False)
            self.slots = 1
            self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="compileiq-dask")

        def release() -> None:  # the workers drop the objective (a KernelRun's GPU worker, killable processes)
            if self.client.status == "running":
                try:
                    self.client.run(remote_forget, token)
                except Exception as exc:  # noqa: BLE001 - a worker gone already has nothing to release
                    log.debug("releasing the objective on the workers: %s", exc)

        if not staged:
            def evaluate(config: dict[str, Any]) -> Measurement:
                out: Measurement = self._task(config, remote_evaluate, token, blob, config, n_objectives, timeout_s,
                                              resources=resources)
                return out
            return evaluate, release
        return _StagedEvaluator(self, fn, token, blob, resources or {}), release

    def _task(self, config: dict[str, Any], fn: Callable[..., Any], *args: Any,
              resources: Mapping[str, float] | None = None) -> Any:
        """One task's result; a task whose worker died is submitted once more, then becomes a ``crashed``
        Measurement."""
        distributed = _distributed()
        last = ""
        for attempt in range(1, _TRIES + 1):
            future = self.client.submit(fn, *args, resources=dict(resources) if resources else None, pure=False)
            try:
                return future.result()
            except distributed.KilledWorker as exc:
                log.warning("the Dask worker evaluating %r died (try %d of %d): %s", config, attempt, _TRIES, exc)
                last = str(exc)
            finally:
                future.release()
        return Measurement("crashed", error=f"the Dask worker evaluating it died {_TRIES} times: {last}"[:500])


class _StagedEvaluator:
    """A kernel run's candidates on a cluster: the compile on any worker, the run on a worker with the resources,
    each distinct run key (machine code + launch) run once across all workers, and every GPU worker's own baseline
    measured there once (rows record it, so a speedup is against the GPU that measured the point)."""

    def __init__(self, executor: DaskExecutor, fn: Any, token: str, blob: bytes, resources: dict[str, float]) -> None:
        self._executor, self._token, self._blob, self._resources = executor, token, blob, resources
        base = getattr(fn, "baseline_config", lambda: None)()
        self._baseline_key = None if base is None else config_key(base)
        self._baseline: Built | None = None
        self._base_config = base
        self._asked_baseline = False
        self._baseline_ready = threading.Event()
        self._runs: dict[str, Future[dict[str, Any]]] = {}
        self._lock = threading.Lock()

    def _ensure_baseline(self, config: dict[str, Any]) -> None:
        """Compile the baseline once (each GPU measures it as its own) when this session has not evaluated it;
        calls that arrive meanwhile wait for it."""
        with self._lock:
            first = not self._asked_baseline
            self._asked_baseline = True
        if not first:
            self._baseline_ready.wait()
            return
        try:
            built = self._executor._task(config, remote_stage, self._token, self._blob, "compile_stage",
                                         self._base_config, None)
            if isinstance(built, Built):
                self._baseline = built
        finally:
            self._baseline_ready.set()

    def __call__(self, config: dict[str, Any]) -> Measurement:
        t0 = time.perf_counter()
        m = self._evaluate(config)
        m.elapsed_s = m.elapsed_s or time.perf_counter() - t0  # both stages, the waits for a worker included
        return m

    def _evaluate(self, config: dict[str, Any]) -> Measurement:
        built = self._executor._task(config, remote_stage, self._token, self._blob, "compile_stage", config, None)
        if isinstance(built, Measurement):
            return built
        if config_key(config) == self._baseline_key:
            with self._lock:
                self._baseline = self._baseline or built
                self._asked_baseline = True
            self._baseline_ready.set()
        elif self._baseline_key is not None:
            self._ensure_baseline(config)  # a resumed run: its baseline row is stored, each GPU still needs its own
        with self._lock:
            shared = self._runs.get(built.run_key)
            mine = shared is None
            if shared is None:
                shared = self._runs[built.run_key] = Future()
        if not mine:
            return self._row(built, {**shared.result(), "reused": True})
        try:
            run = self._executor._task(config, remote_stage, self._token, self._blob, "run_stage", built,
                                       self._baseline, resources=self._resources)
        except BaseException as exc:
            with self._lock:
                del self._runs[built.run_key]
            shared.set_exception(exc)
            raise
        if isinstance(run, Measurement):  # its GPU worker died twice
            run = {"status": run.status, "error": run.error, "metrics": {}, "reused": False}
        shared.set_result(run)
        return self._row(built, run)

    @staticmethod
    def _row(built: Built, run: dict[str, Any]) -> Measurement:
        m = finish_built(built, run)
        if run.get("gpu"):
            m.detail["gpu"] = run["gpu"]
        base = run.get("baseline_metrics")
        if isinstance(base, Mapping) and all(o in base for o in built.objectives):
            m.detail["baseline_scores"] = [float(base[o]) for o in built.objectives]
        return m


def _local_cluster(kind: str, workers: int | None) -> Any:
    """A cluster on this machine, with ``CLUSTER_SETTINGS``."""
    import dask

    settings = CLUSTER_SETTINGS
    if kind == "dask-cuda":
        try:
            from dask_cuda import LocalCUDACluster
        except ImportError as exc:
            raise ConfigurationError(f"executor='dask-cuda' needs dask-cuda: pip install dask-cuda ({exc})") from None
        with dask.config.set(settings):
            return LocalCUDACluster(resources={"GPU": 1}, dashboard_address=":0", silence_logs=logging.WARNING)
    from distributed import LocalCluster

    with dask.config.set(settings):
        return LocalCluster(  # type: ignore[no-untyped-call]
            n_workers=workers or os.cpu_count() or 1, threads_per_worker=1, processes=True,
            dashboard_address=":0", silence_logs=logging.WARNING)


def _pickle(fn: Any) -> bytes:
    import cloudpickle

    try:
        return bytes(cloudpickle.dumps(fn))
    except Exception as exc:  # noqa: BLE001 - whatever pickling raises, the fix is the same
        raise ConfigurationError(f"a Dask executor sends the objective to its workers, so it must pickle, but "
                                 f"{fn!r:.80} does not ({type(exc).__name__}: {exc}); make it a module-level "
                                 "function or an object without open files, locks or threads") from None


def describe_workers(client: Any) -> dict[str, dict[str, Any]]:
    """The scheduler's view of its workers: address -> {"nthreads", "resources", "name", ...}."""
    return dict(client.scheduler_info(n_workers=-1).get("workers", {}))


def check_workers(client: Any, where: str, blob: bytes, token: str, resources: Mapping[str, float] | None,
                  staged: bool = False) -> None:
    """Refuse a cluster that cannot evaluate the objective, before anything is evaluated.

    With ``staged``, every worker must compile (``preflight(runs=False)``) and those with ``resources`` must also run.

    Raises:
        ConfigurationError: No worker has ``resources``, or some of the workers that would run tasks cannot load the
            objective or fail its ``preflight()`` (each named with its reason).
    """
    workers = describe_workers(client)
    if resources:
        able = [a for a, w in workers.items()
                if all(w.get("resources", {}).get(k, 0) >= v for k, v in resources.items())]
        if not able:
            have = {a: w.get("resources", {}) for a, w in workers.items()}
            raise ConfigurationError(
                f"this objective needs Dask workers with resources {dict(resources)} (its GPU runs), but none of the "
                f"{len(workers)} workers of {where} has them (resources: {have}); start one worker per GPU with "
                "`dask worker <scheduler> --resources GPU=1` (or `dask cuda worker <scheduler> --resources GPU=1`), "
                "or tune static objectives")
    else:
        able = list(workers)
    answers = client.run(remote_check, token, blob, __version__, True, workers=able)
    others = [a for a in workers if a not in able] if staged else []
    if others:
        answers.update(client.run(remote_check, token, blob, __version__, False, workers=others))
    bad = {a: why for a, why in answers.items() if why}
    if bad:
        lines = "; ".join(f"{a}: {why}" for a, why in sorted(bad.items())[:5])
        raise ConfigurationError(f"{len(bad)} of {len(answers)} Dask workers of {where} cannot evaluate this "
                                 f"objective ({lines}); install what they lack there, or start the run where it works")
