"""Worker process entry: load a backend once, then answer (op, payload) requests sent over a pipe."""

from __future__ import annotations

import importlib
import os
import pickle
import signal
import sys
import threading
import time
import traceback
from typing import Any

from compileiq_lab.exceptions import EnvironmentFaultError
from compileiq_lab.measure import _wire
from compileiq_lab.measure.objective import call_objective

_TB_LINES = 10


def _watch_parent(parent_pid: int) -> None:
    # a worker must not outlive the run that started it (kill -9 of the parent included), nor
    # leave its own children behind: the worker leads its process group
    while True:
        time.sleep(0.5)
        if os.getppid() != parent_pid:
            try:
                os.killpg(os.getpgid(0), signal.SIGKILL)
            finally:
                os._exit(3)


class ObjectiveBackend:
    """Serves a cloudpickled objective: ``setup({"fn", "n_objectives"})``, then ``handle("call", config)``."""

    def setup(self, init: dict[str, Any]) -> int:
        import cloudpickle

        self.fn = cloudpickle.loads(init["fn"])
        self.n_objectives = init["n_objectives"]
        return os.getpid()

    def handle(self, op: str, config: Any) -> Any:
        return call_objective(self.fn, config, self.n_objectives)


def _reply(wfd: int, reply: Any) -> None:
    try:
        payload = pickle.dumps(reply, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception:  # noqa: BLE001 - an unpicklable detail must not lose the scores
        if hasattr(reply, "detail"):
            reply.detail = {k: repr(v) for k, v in reply.detail.items()}
        else:
            reply = {"status": "run_error", "error": f"the worker's reply could not be pickled: {reply!r}"[:500],
                     "fatal": False}
        payload = pickle.dumps(reply, protocol=pickle.HIGHEST_PROTOCOL)
    _wire.send(wfd, None, raw=payload)


def _load_backend(spec: str) -> Any:
    module, _, name = spec.partition(":")
    return getattr(importlib.import_module(module), name)()


def main(argv: list[str]) -> int:
    """Serve requests until told to stop or the parent goes away."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    rfd, wfd, parent_pid = int(argv[0]), int(argv[1]), int(argv[2])
    threading.Thread(target=_watch_parent, args=(parent_pid,), daemon=True).start()
    init = _wire.recv(rfd)
    sys.path[:] = init["sys_path"]
    try:
        backend = _load_backend(init["backend"])
        info = backend.setup(init["setup"])
    except BaseException as exc:  # noqa: BLE001 - reported to the parent
        _wire.send(wfd, ("init_error", f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=8)}"))
        return 2
    _wire.send(wfd, ("ready", info))
    while True:
        try:
            request = _wire.recv(rfd)
        except _wire.WireClosed:
            return 0
        if request is None:
            return 0
        op, payload = request
        try:
            reply = backend.handle(op, payload)
        except Exception as exc:  # noqa: BLE001 - a failed request is a value; the parent may replace us
            tb = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)[-_TB_LINES:])
            reply = {"status": "run_error", "error": f"{type(exc).__name__}: {exc}"[:800], "traceback": tb,
                     "fatal": True, "environment_fault": isinstance(exc, EnvironmentFaultError)}
        _reply(wfd, reply)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
