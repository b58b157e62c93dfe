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
    if _is_database(out):
        return "it is a run store (an SQLite database): writing there would destroy it"
    beside = next((Path(str(out)[:-len(end)]) for end in _BESIDE if out.name.endswith(end)), None)
    if beside is not None and _is_database(beside):  # another store's, perhaps while its run writes it
        return f"it is a file SQLite or the writer lock keeps beside the run store {beside.name}: writing there " \
               "would destroy that run"
    return ""


#: The files SQLite and the writer lock keep beside a store (``<store>-wal``, ...).
_BESIDE = ("-wal", "-shm", "-journal", ".lock")


def _is_database(path: Path) -> bool:
    """Whether ``path`` is an SQLite database (unreadable, absent or no regular file, such as a pipe: not one)."""
    if not path.is_file():
        return False
    try:
        with path.open("rb") as f:
            return f.read(len(_SQLITE_MAGIC)) == _SQLITE_MAGIC
    except OSError:
        return False
