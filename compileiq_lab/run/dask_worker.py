"""The worker side of the Dask executor: what runs in the Dask worker processes (the objective rebuilt once per
process from its blob, evaluated whole or one stage at a time, checked before a search, released after it)."""

from __future__ import annotations

import inspect
import threading
import traceback
from collections.abc import Callable
from typing import Any

from compileiq_lab._version import __version__
from compileiq_lab.exceptions import EnvironmentFaultError
from compileiq_lab.measure.evaluator import Built
from compileiq_lab.measure.measurement import Measurement
from compileiq_lab.measure.objective import call_objective, make_evaluator

__all__ = ["remote_check", "remote_evaluate", "remote_forget", "remote_stage"]

_objectives: dict[str, Any] = {}
_Evaluator = tuple[Callable[[dict[str, Any]], Measurement], Callable[[], None]]
_evaluators: dict[tuple[str, float | None, int], _Evaluator] = {}  # (token, timeout, objectives) -> (call, close)
_lock = threading.Lock()


def _objective(token: str, blob: bytes) -> Any:
    with _lock:
        fn = _objectives.get(token)
        if fn is None:
            import cloudpickle

            fn = _objectives[token] = cloudpickle.loads(blob)
        return fn


def remote_check(token: str, blob: bytes, version: str, runs: bool = True) -> str | None:
    """On a worker: why it cannot evaluate the objective (another compileiq-lab, unloadable, its own
    ``preflight(runs)``: ``runs`` False for a worker that only compiles), or None. Loading it here also makes it
    (and, for a KernelRun, its compilers and GPU runner) ready."""
    if version != __version__:
        return f"it has compileiq-lab {__version__}, this run {version}: install the same version on every worker"
    try:
        fn = _objective(token, blob)
    except Exception as exc:  # noqa: BLE001 - the reason is reported, whatever it is
        return f"cannot load the objective ({type(exc).__name__}: {exc})"[:400]
    check = getattr(fn, "preflight", None)
    if not callable(check):
        return None
    try:  # KernelRun's takes whether this worker runs; a user's own may take nothing
        why = check(runs) if inspect.signature(check).parameters else check()
    except Exception as exc:  # noqa: BLE001 - the reason is reported, whatever it is
        return f"its preflight() failed ({type(exc).__name__}: {exc})"[:400]
    return str(why) if why else None


def remote_evaluate(token: str, blob: bytes, config: dict[str, Any], n_objectives: int,
                    timeout_s: float | None) -> Measurement:
    """On a worker: evaluate one config (with a per-call limit in killable processes when ``timeout_s`` is set).

    Raises:
        EnvironmentFaultError: The worker cannot load the objective, or its machine failed (a full disk): the run
            stops instead of recording a failure that is not the config's.
    """
    try:
        fn = _objective(token, blob)
    except Exception as exc:  # noqa: BLE001 - every candidate would fail the same way: stop the run
        raise EnvironmentFaultError(f"a Dask worker cannot load the objective ({type(exc).__name__}: {exc})") from None
    if timeout_s is None:
        m = call_objective(fn, config, n_objectives)
    else:
        from distributed import get_worker

        key = (token, timeout_s, n_objectives)
        with _lock:
            if key not in _evaluators:  # killable processes, as many as the worker's threads, kept for later calls
                _evaluators[key] = make_evaluator(fn, n_objectives, timeout_s, processes=get_worker().state.nthreads)
            evaluate = _evaluators[key][0]
        m = evaluate(config)
    m.detail = {**(m.detail or {}), "worker": _worker_name()}
    return m


def remote_forget(token: str) -> None:
    """On a worker: drop an objective after its run (its killable processes, a KernelRun's GPU worker)."""
    with _lock:
        fn = _objectives.pop(token, None)
        closers = [_evaluators.pop(k)[1] for k in [k for k in _evaluators if k[0] == token]]
    for close in closers:
        close()
    close_fn = getattr(fn, "close", None)
    if callable(close_fn):
        close_fn()


def remote_stage(token: str, blob: bytes, stage: str, arg: Any, baseline: Built | None = None) -> Any:
    """On a worker: one stage of a staged objective. "compile_stage": config -> Built or Measurement;
    "run_stage": Built -> run dict, with this GPU's identity and, given the baseline's Built, this GPU's own
    baseline metrics (measured here once: the runner reuses a run key's first run)."""
    try:
        fn = _objective(token, blob)
    except Exception as exc:  # noqa: BLE001 - every candidate would fail the same way: stop the run
        raise EnvironmentFaultError(f"a Dask worker cannot load the objective ({type(exc).__name__}: {exc})") from None
    try:
        if stage == "compile_stage":
            out = fn.compile_stage(arg)
            out.detail = {**out.detail, "worker": _worker_name()}
            return out
        run = dict(fn.run_stage(arg))
    except EnvironmentFaultError:
        raise
    except Exception as exc:  # noqa: BLE001 - the candidate's failure is a row, as call_objective makes it locally
        tb = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)[-12:])
        failed = Measurement("error", error=f"{type(exc).__name__}: {exc}"[:500],
                             detail={"traceback": tb, "worker": _worker_name(), "failed_stage": stage})
        if stage == "compile_stage":
            return failed
        return {"status": "error", "error": failed.error, "metrics": {}, "reused": False}
    info = getattr(fn, "gpu_info", None) or {}
    run["gpu"] = {"worker": _worker_name(), "name": info.get("name"), "uuid": info.get("uuid")}
    if baseline is not None:
        base = run if baseline.run_key == arg.run_key else fn.run_stage(baseline)
        if base.get("status") == "ok":
            run["baseline_metrics"] = dict(base["metrics"])
    return run


def _worker_name() -> str:
    from distributed import get_worker

    try:
        return str(get_worker().name)
    except ValueError:  # not in a worker (a direct call)
        return ""
