"""Long-lived killable worker processes: a generic request/reply child, and the objective worker on top."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

from compileiq_lab.exceptions import ConfigurationError, EnvironmentFaultError
from compileiq_lab.measure import _wire
from compileiq_lab.measure.measurement import Measurement
from compileiq_lab.toolchain.tools import kill_process_group

__all__ = ["OBJECTIVE_BACKEND", "WorkerDied", "WorkerObjective", "WorkerProcess", "WorkerTimeout"]

log = logging.getLogger(__name__)
_STARTUP_TIMEOUT_S = 120.0
#: The backend that serves pickled objectives (see ``compileiq_lab.measure._worker_main``).
OBJECTIVE_BACKEND = "compileiq_lab.measure._worker_main:ObjectiveBackend"


class WorkerTimeout(Exception):
    """The worker did not answer within the call's limit; it was killed."""


class WorkerDied(Exception):
    """The worker process ended during a call; ``how`` says how (signal or exit code)."""

    def __init__(self, how: str) -> None:
        super().__init__(how)
        self.how = how


class WorkerProcess:
    """A child process that loads a backend once and then answers ``(op, payload)`` requests.

    The backend is named ``"module:Class"``; the child imports it with the parent's ``sys.path``,
    calls ``Class().setup(setup)`` once (its return value is ``info``) and then
    ``handle(op, payload)`` per request. The child runs in its own session (Ctrl-C reaches only
    the parent), dies with its parent, and is killed with its whole process group when a call
    exceeds its limit. It is started lazily and restarted by the next call after a kill.

    Args:
        backend: ``"module:Class"`` of the backend.
        setup: Picklable argument of ``setup`` (sent again at every restart).
        startup_timeout_s: Limit for the child to import and set up.
        what: Name used in error messages ("objective worker", "GPU worker").
    """

    def __init__(self, backend: str, setup: Any, startup_timeout_s: float = _STARTUP_TIMEOUT_S,
                 what: str = "worker") -> None:
        self.backend, self.setup, self.what = backend, setup, what
        self.startup_timeout_s = startup_timeout_s
        self._proc: subprocess.Popen[bytes] | None = None
        self._to_child = -1
        self._from_child = -1
        self.restarts = 0
        self.info: Any = None

    @property
    def alive(self) -> bool:
        """Whether a child is running."""
        return self._proc is not None and self._proc.poll() is None

    @property
    def pid(self) -> int | None:
        """The child's PID, or None."""
        return self._proc.pid if self._proc is not None else None

    def start(self) -> Any:
        """Start the child if none is running; returns the backend's setup info.

        Raises:
            ConfigurationError: The child could not start or its backend's setup failed.
        """
        if self._proc is not None:
            return self.info
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
            _wire.send(self._to_child, {"sys_path": list(sys.path), "backend": self.backend, "setup": self.setup})
            kind, info = _wire.recv(self._from_child, self.startup_timeout_s)
        except (_wire.WireTimeout, _wire.WireClosed, OSError) as exc:
            self.kill()
            raise ConfigurationError(f"the {self.what} process did not start ({type(exc).__name__}); "
                                     "check that its modules can be imported") from exc
        except BaseException:
            self.kill()
            raise
        if kind != "ready":
            self.kill()
            raise ConfigurationError(f"the {self.what} could not start: {info}")
        self.info = info
        return info

    def call(self, op: str, payload: Any, timeout_s: float | None) -> Any:
        """Send one request and return the reply.

        Raises:
            WorkerTimeout: No reply within ``timeout_s``; the child was killed.
            WorkerDied: The child ended during the call.
        """
        self.start()
        try:
            _wire.send(self._to_child, (op, payload))
            return _wire.recv(self._from_child, timeout_s)
        except _wire.WireTimeout:
            self.kill()
            raise WorkerTimeout(f"no answer within {timeout_s} s") from None
        except (_wire.WireClosed, BrokenPipeError):
            before = self.restarts
            code = self.kill()
            if self.restarts == before:  # it had already exited: kill() did not count it
                self.restarts += 1
            how = f"killed by signal {-code}" if code is not None and code < 0 else f"exit code {code}"
            raise WorkerDied(how) from None
        except BaseException:
            self.kill()
            raise

    def close(self) -> None:
        """Stop the child (politely, then by force)."""
        if self._proc is None:
            return
        try:
            _wire.send(self._to_child, None)
            self._proc.wait(timeout=2)
        except (OSError, subprocess.TimeoutExpired):
            pass
        self.kill()

    def kill(self) -> int | None:
        """Kill the child and its process group now; returns its exit code (None if none ran)."""
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
        log.debug("%s %d ended with %s", self.what, proc.pid, code)
        return code


class WorkerObjective:
    """Evaluate ``fn`` in a long-lived child process; kill and replace it on timeout or crash.

    The function is serialised with cloudpickle, so functions defined in a notebook cell or a
    script's ``__main__`` work. Cost: one process start (plus the imports the function needs)
    when the run begins and after every timeout or crash, and one pipe round trip (~0.1 ms) per
    call.

    Args:
        fn: The objective.
        n_objectives: Number of values it must return.
        timeout_s: Limit per call in seconds.
    """

    def __init__(self, fn: Callable[[dict[str, Any]], Any], n_objectives: int, timeout_s: float) -> None:
        import cloudpickle

        try:
            payload = cloudpickle.dumps(fn)
        except Exception as exc:
            raise ConfigurationError(
                f"timeout_s needs the objective to be picklable (it runs in a worker process), but "
                f"pickling {getattr(fn, '__name__', fn)!r} failed: {type(exc).__name__}: {exc}. "
                "Avoid capturing open files, locks or sockets in the function, or set timeout_s=None."
            ) from exc
        self.n_objectives = n_objectives
        self.timeout_s = timeout_s
        self._worker = WorkerProcess(OBJECTIVE_BACKEND, {"fn": payload, "n_objectives": n_objectives},
                                     what="objective worker")

    @property
    def restarts(self) -> int:
        """How many times the worker was replaced (timeouts and crashes)."""
        return self._worker.restarts

    def start(self) -> None:
        """Start the worker now (also done lazily by the first call)."""
        try:
            self._worker.start()
        except ConfigurationError as exc:
            raise ConfigurationError(str(exc).replace("could not start", "could not load the objective")) from exc

    def __call__(self, config: dict[str, Any]) -> Measurement:
        """Evaluate one config; a call past ``timeout_s`` is killed and recorded as "timeout"."""
        self.start()
        t0 = time.perf_counter()
        try:
            reply: Measurement | dict[str, Any] = self._worker.call("call", config, self.timeout_s)
            if isinstance(reply, dict):
                if reply.get("environment_fault"):
                    raise EnvironmentFaultError(str(reply["error"]).partition(": ")[2] or str(reply["error"]))
                return Measurement("error", error=str(reply.get("error", "")), detail={
                    "traceback": str(reply.get("traceback", ""))})
            return reply
        except WorkerTimeout:
            return Measurement("timeout", error=f"objective did not return within its per-call limit of "
                                                f"{self.timeout_s:g} s",
                               elapsed_s=time.perf_counter() - t0)
        except WorkerDied as exc:
            return Measurement("crashed", error=f"objective worker process died ({exc.how})",
                               elapsed_s=time.perf_counter() - t0)

    def close(self) -> None:
        """Stop the worker (politely, then by force)."""
        self._worker.close()
