"""Scratch folders of kernel runs: removed when their process exits, and, when it died first, by a later run."""

from __future__ import annotations

import atexit
import logging
import os
import re
import shutil
import stat
import tempfile
import time
from pathlib import Path

__all__ = ["PREFIX", "STALE_AFTER_S", "scratch_folder", "sweep_stale"]

log = logging.getLogger(__name__)

#: A scratch folder's name: this prefix, the process id of the run that made it, a dash and a random part.
PREFIX = "compileiq-"
_NAME = re.compile(rf"{re.escape(PREFIX)}(?P<pid>\d+)-[A-Za-z0-9_]+")
#: A dead process's folder is removed only when nothing in it changed for this long (a process of another PID
#: namespace sharing the temporary folder may still be writing it).
STALE_AFTER_S = 600.0


def scratch_folder() -> Path:
    """A new scratch folder in the temporary folder, removed at this process's exit. A process killed before its
    exit handlers run (``kill -9``, the out-of-memory killer, a notebook kernel killed on restart) leaves its folder
    behind, with every binary the run compiled: the folders of dead processes are removed first (``sweep_stale``)."""
    sweep_stale()
    path = tempfile.mkdtemp(prefix=f"{PREFIX}{os.getpid()}-")
    atexit.register(shutil.rmtree, path, True)  # scratch only: results live in the run store
    return Path(path)


def sweep_stale(root: str | os.PathLike[str] | None = None, now: float | None = None) -> list[Path]:
    """Remove the scratch folders in ``root`` (default: the temporary folder) that this user's processes left when
    they died: a folder named by ``scratch_folder`` (a symlink never is), owned by this user, whose process is gone
    and in which nothing changed for ``STALE_AFTER_S``. Returns the folders removed; any that cannot be read or
    removed is left as it is."""
    folder = Path(tempfile.gettempdir() if root is None else root)
    now = time.time() if now is None else now
    removed = []
    try:
        entries = list(folder.glob(f"{PREFIX}*"))
    except OSError:
        return []
    for entry in entries:
        match = _NAME.fullmatch(entry.name)
        if not match or _alive(int(match["pid"])):
            continue
        try:
            info = entry.lstat()
            if not stat.S_ISDIR(info.st_mode) or info.st_uid != _uid():
                continue
            changed = max([info.st_mtime] + [child.lstat().st_mtime for child in entry.iterdir()])
        except OSError:
            continue
        if now - changed < STALE_AFTER_S:
            continue
        shutil.rmtree(entry, ignore_errors=True)
        if not entry.exists():
            removed.append(entry)
    if removed:
        log.info("removed %d scratch folder(s) left by runs that were killed: %s", len(removed),
                 ", ".join(p.name for p in removed))
    return removed


def _alive(pid: int) -> bool:
    """Whether a process with this id exists (one of another user's counts: it is not ours to judge)."""
    if pid <= 0:
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (OSError, OverflowError):
        return True
    return True


def _uid() -> int:
    return os.getuid() if hasattr(os, "getuid") else -1
