"""What an output file must never be written over: a run store, the files beside it, or any other run store."""

from __future__ import annotations

import os
from pathlib import Path

from compileiq_lab.store.lock import lock_path

__all__ = ["overwrite_problem"]

#: The first bytes of an SQLite database (every run store).
_SQLITE_MAGIC = b"SQLite format 3\x00"


def overwrite_problem(path: str | os.PathLike[str], store: str | None = None) -> str:
    """Why writing ``path`` would destroy a run, or "" where it would not: it is the ``store`` (given by any name,
    a link's too) or one of the files SQLite and the writer lock keep beside it (-wal, -shm, .lock), or another run
    store (any SQLite database)."""
    out = Path(path).resolve()
    if store is not None and store != ":memory:":
        base = os.path.realpath(store)
        if out in {Path(base + end) for end in ("", "-wal", "-shm")} | {Path(lock_path(store))}:
            return (f"it is the run store it comes from ({store!r}) or a file SQLite keeps beside it: writing there "
                    "would destroy the run")
    try:
        with out.open("rb") as f:
            held = f.read(len(_SQLITE_MAGIC)) == _SQLITE_MAGIC
    except OSError:  # (not there, or not readable: nothing to keep)
        return ""
    return "it is a run store (an SQLite database): writing there would destroy it" if held else ""
