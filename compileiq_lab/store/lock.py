"""A run store's writer lock: an ``flock`` on ``<store>.lock`` holding the writer's PID, taken, and probed."""

from __future__ import annotations

import os
import time

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: no writer lock
    fcntl = None  # type: ignore[assignment]

__all__ = ["LOCKS", "lock_path", "take_writer_lock", "writer_pid"]

#: Whether this platform has the writer lock (``fcntl``); without it stores are written unlocked.
LOCKS = fcntl is not None


def lock_path(path: str | os.PathLike[str]) -> str:
    """The writer lock file of the run store at ``path``: beside the file itself, links resolved, so that two names
    of one store (a ``latest.db`` link, a linked folder) take one lock."""
    return os.path.realpath(path) + ".lock"


def take_writer_lock(fd: int, tries: int = 5, wait_s: float = 0.02) -> str | None:
    """Take the writer lock on the open lock file ``fd`` at once, or within a few tries (a ``writer_pid`` probe holds
    it for a moment), and write this process's PID into it: None. Where another process holds it, ``fd`` is closed
    and the holder's PID as the file has it ("?" when it has none) is returned."""
    for attempt in range(tries):
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except OSError:
            if attempt == tries - 1:
                holder = os.read(fd, 32).decode(errors="replace").strip() or "?"
                os.close(fd)
                return holder
            time.sleep(wait_s)
    os.ftruncate(fd, 0)
    os.write(fd, str(os.getpid()).encode())
    return None


def writer_pid(path: str | os.PathLike[str]) -> int | None:
    """The process writing the run store at ``path`` (holding its writer lock: this one's too), or None where none
    is: a run whose header still says "running" was then killed or crashed. 0 where the holder is not known (no
    lock here: a platform without ``fcntl``, a lock file without its PID)."""
    if fcntl is None:
        return 0
    try:
        fd = os.open(lock_path(path), os.O_RDONLY)
    except OSError:
        return None  # never written by a run
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError:
        held = os.read(fd, 32).decode(errors="replace").strip()
        return int(held) if held.isdigit() else 0
    finally:
        os.close(fd)  # (a lock taken here ends with it)
    return None
