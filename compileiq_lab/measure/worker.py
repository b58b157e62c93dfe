"""Run a Python objective in a killable worker process, so a hung call can time out."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import time
from typing import Any, Callable

from compileiq_lab.exceptions import ConfigurationError
from compileiq_lab.measure import _wire
from compileiq_lab.measure.measurement import Measurement
from compileiq_lab.tools import kill_process_group

__all__ = ["WorkerObjective"]

log = logging.getLogger(__name__)
_STARTUP_TIMEOUT_S = 120.0


class WorkerObjective:
    """Evaluate ``fn`` in a long-lived child process; kill and replace it on timeout or crash.

    The function is serialised with cloudpickle, so functions defined in a notebook cell or a
    script's ``__main__`` work. Cost: one process start (plus the imports the function needs)
    when the run begins and after every timeout or crash, and one pipe round trip (~0.1 ms) per
    call. The child runs in its own session, so Ctrl-C reaches only the parent, which kills it.

    Args:
        fn: The objective.
        n_objectives: Number of values it must return.
        timeout_s: Limit per call in seconds.
    """

    def __init__(self, fn: Callable[[dict[str, Any]], Any], n_objectives: int, timeout_s: float) -> None:
        import cloudpickle

        try:
            self._payload = cloudpickle.dumps(fn)
        except Exception as exc:  # noqa: BLE001 - re-raised with the fix
            raise ConfigurationError(
                f"timeout_s needs the objective to be picklable (it runs in a worker process), but "
                f"pickling {getattr(fn, '__name__', fn)!r} failed: {type(exc).__name__}: {exc}. "
                "Avoid capturing open files, locks or sockets in the function, or set timeout_s=None."
            ) from exc
        self.n_objectives = n_objectives
        self.timeout_s = timeout_s
        self._proc: subprocess.Popen[bytes] | None = None
        self._to_child = -1
        self._from_child = -1
        self.restarts = 0

    def start(self) -> None:
        """Start the worker now (also done lazily by the first call)."""
        if self._proc is not None:
            return
        c_read, p_write = os.pipe()
        p_read, c_write = os.pipe()
        cmd = [sys.executable, "-m", "compileiq_lab.measure._worker_main", str(c_read), str(c_write),
               str(os.getpid())]
        self._proc = subprocess.Popen(cmd, pass_fds=(c_read, c_write), start_new_session=True,
                                      stdin=subprocess.DEVNULL)
        os.close(c_read)
        os.close(c_write)
        self._to_child, self._from_child = p_write, p_read
        try:
            _wire.send(self._to_child, {"sys_path": list(sys.path), "fn": self._payload,
                                        "n_objectives": self.n_objectives})
            kind, info = _wire.recv(self._from_child, _STARTUP_TIMEOUT_S)
        except (_wire.WireTimeout, _wire.WireClosed, OSError) as exc:
            self._kill()
            raise ConfigurationError(f"the objective worker process did not start ({type(exc).__name__}); "
                                     "check that the objective's module can be imported") from exc
        except BaseException:
            self._kill()
            raise
        if kind != "ready":
            self._kill()
            raise ConfigurationError(f"the worker process could not load the objective: {info}")

    def __call__(self, config: dict[str, Any]) -> Measurement:
        """Evaluate one config; a call past ``timeout_s`` is killed and recorded as "timeout"."""
        self.start()
        t0 = time.perf_counter()
        try:
            _wire.send(self._to_child, config)
            return _wire.recv(self._from_child, self.timeout_s)
        except _wire.WireTimeout:
            self._kill()
            return Measurement("timeout", error=f"objective did not return within timeout_s={self.timeout_s}",
                               elapsed_s=time.perf_counter() - t0)
        except (_wire.WireClosed, BrokenPipeError):
            code = self._kill()
            how = f"killed by signal {-code}" if code is not None and code < 0 else f"exit code {code}"
            return Measurement("crashed", error=f"objective worker process died ({how})",
                               elapsed_s=time.perf_counter() - t0)
        except BaseException:
            self._kill()
            raise

    def close(self) -> None:
        """Stop the worker (politely, then by force)."""
        if self._proc is None:
            return
        try:
            _wire.send(self._to_child, None)
            self._proc.wait(timeout=2)
        except (OSError, subprocess.TimeoutExpired):
            pass
        self._kill()

    def _kill(self) -> int | None:
        proc, self._proc = self._proc, None
        for fd in (self._to_child, self._from_child):
            if fd >= 0:
                try:
                    os.close(fd)
                except OSError:
                    pass
        self._to_child = self._from_child = -1
        if proc is None:
            return None
        if proc.poll() is None:
            self.restarts += 1
            kill_process_group(proc)
        code = proc.wait()
        log.debug("objective worker %d ended with %s", proc.pid, code)
        return code
