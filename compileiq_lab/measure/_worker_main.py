"""Worker process entry: load a pickled objective once, then evaluate configs sent over a pipe."""

from __future__ import annotations

import os
import pickle
import signal
import sys
import threading
import time
import traceback

from compileiq_lab.measure import _wire
from compileiq_lab.measure.measurement import Measurement
from compileiq_lab.measure.objective import call_objective


def _watch_parent(parent_pid: int) -> None:
    # a worker must not outlive the run that started it (kill -9 of the parent included), nor
    # leave the objective's own children behind: the worker leads its process group
    while True:
        time.sleep(0.5)
        if os.getppid() != parent_pid:
            try:
                os.killpg(os.getpgid(0), signal.SIGKILL)
            finally:
                os._exit(3)


def _reply(wfd: int, m: Measurement) -> None:
    try:
        payload = pickle.dumps(m, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception:  # noqa: BLE001 - an unpicklable detail must not lose the scores
        m.detail = {k: repr(v) for k, v in m.detail.items()}
        payload = pickle.dumps(m, protocol=pickle.HIGHEST_PROTOCOL)
    _wire.send(wfd, None, raw=payload)


def main(argv: list[str]) -> int:
    """Serve objective calls until told to stop or the parent goes away."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    rfd, wfd, parent_pid = int(argv[0]), int(argv[1]), int(argv[2])
    threading.Thread(target=_watch_parent, args=(parent_pid,), daemon=True).start()
    init = _wire.recv(rfd)
    sys.path[:] = init["sys_path"]
    try:
        import cloudpickle

        fn = cloudpickle.loads(init["fn"])
    except BaseException as exc:  # noqa: BLE001 - reported to the parent
        _wire.send(wfd, ("init_error", f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=8)}"))
        return 2
    _wire.send(wfd, ("ready", os.getpid()))
    n_objectives = init["n_objectives"]
    while True:
        try:
            config = _wire.recv(rfd)
        except _wire.WireClosed:
            return 0
        if config is None:
            return 0
        _reply(wfd, call_objective(fn, config, n_objectives))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
