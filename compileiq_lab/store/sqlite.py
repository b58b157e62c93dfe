"""SQLite run store: a header plus one row per evaluation, committed as each one finishes."""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from compileiq_lab.exceptions import StoreError
from compileiq_lab.store.header import SCHEMA_VERSION, RunHeader

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: no writer lock
    fcntl = None  # type: ignore[assignment]

__all__ = ["DEFAULT_DIR", "MEMORY", "SCHEMA_VERSION", "EvalRecord", "RunStore", "new_store_path"]

DEFAULT_DIR = "compileiq_runs"
MEMORY = ":memory:"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS evals (
    eval_id     INTEGER PRIMARY KEY,
    generation  INTEGER NOT NULL,
    config_key  TEXT NOT NULL UNIQUE,
    params      TEXT NOT NULL,
    status      TEXT NOT NULL,
    error       TEXT NOT NULL,
    scores      TEXT,
    elapsed_s   REAL NOT NULL,
    started_at  REAL NOT NULL,
    is_baseline INTEGER NOT NULL,
    detail      TEXT NOT NULL
);
"""
_COLUMNS = ("eval_id", "generation", "config_key", "params", "status", "error", "scores",
            "elapsed_s", "started_at", "is_baseline", "detail")


@dataclass
class EvalRecord:
    """One stored evaluation (one objective call)."""

    eval_id: int
    generation: int
    config_key: str
    params: dict[str, Any]
    status: str
    error: str
    scores: list[float] | None
    elapsed_s: float
    started_at: float
    is_baseline: bool = False
    detail: dict[str, Any] = field(default_factory=dict)

    def to_row(self) -> tuple[Any, ...]:
        return (self.eval_id, self.generation, self.config_key, json.dumps(self.params, sort_keys=True),
                self.status, self.error, None if self.scores is None else json.dumps(list(self.scores)),
                self.elapsed_s, self.started_at, int(self.is_baseline), json.dumps(self.detail, default=str))

    @classmethod
    def from_row(cls, row: Iterable[Any]) -> EvalRecord:
        d = dict(zip(_COLUMNS, row))
        d["params"] = json.loads(d["params"])
        d["scores"] = None if d["scores"] is None else json.loads(d["scores"])
        d["is_baseline"] = bool(d["is_baseline"])
        d["detail"] = json.loads(d["detail"])
        return cls(**d)


def new_store_path(directory: str | os.PathLike[str] = DEFAULT_DIR) -> Path:
    """A fresh file name for a run: ``<directory>/run-<UTC time>-<random>.db``."""
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    return Path(directory) / f"run-{stamp}-{uuid.uuid4().hex[:6]}.db"


class RunStore:
    """A run on disk (or in memory): header key/values and evaluation rows.

    Writes go through one connection guarded by a lock, so a run thread and a reader can share
    it. The file uses WAL journaling with ``synchronous=NORMAL``: each row is committed before
    the next evaluation starts and survives the process being killed at any moment (an OS
    crash or power loss may lose the last rows).

    Args:
        path: A file path, or ":memory:" for a store that lives only in this process.
        readonly: Open an existing file without the right to change it.
        header: The header of a store that does not exist yet. A new file is built under a
            temporary name and renamed into place with its header, so a store file that exists
            always holds a header, whenever the process dies.
    """

    def __init__(self, path: str | os.PathLike[str] = MEMORY, *, readonly: bool = False,
                 header: RunHeader | None = None) -> None:
        self.path = str(path)
        self.readonly = readonly
        self._lock = threading.RLock()
        if header is not None and not readonly and self.path != MEMORY and not Path(self.path).exists():
            self._create(header)
        self._lock_fd: int | None = None
        try:
            self._conn = self._connect()
        except sqlite3.Error as exc:
            raise StoreError(f"cannot open run store {self.path!r}: {exc}. Pass the path of a .db file in a "
                             "writable folder (e.g. 'runs/tune.db'), or ':memory:'") from exc
        self._records: list[EvalRecord] = [EvalRecord.from_row(r) for r in self._conn.execute(
            f"SELECT {', '.join(_COLUMNS)} FROM evals ORDER BY eval_id")]
        self._by_key = {r.config_key: r for r in self._records}

    def _create(self, header: RunHeader) -> None:
        target = Path(self.path)
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
        conn = sqlite3.connect(tmp, isolation_level=None)
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            conn.executescript(_SCHEMA)
            conn.executemany("INSERT INTO meta(key, value) VALUES (?, ?)",
                             [(k, json.dumps(v)) for k, v in header.to_values().items()])
        finally:
            conn.close()
        os.replace(tmp, target)

    def _connect(self) -> sqlite3.Connection:
        if self.readonly:
            if self.path == MEMORY or not Path(self.path).is_file():
                raise StoreError(f"run store {self.path!r} does not exist; pass the path of a run's .db file")
            conn = sqlite3.connect(f"file:{Path(self.path).resolve()}?mode=ro", uri=True, check_same_thread=False)
            self._check_schema(conn)
            return conn
        if self.path != MEMORY:
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        if self.path != MEMORY:
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
        conn.executescript(_SCHEMA)
        self._check_schema(conn)
        return conn

    def _check_schema(self, conn: sqlite3.Connection) -> None:
        try:
            row = conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"{self.path!r} is not a compileiq-lab run store: {exc}") from exc
        if row is not None and int(json.loads(row[0])) != SCHEMA_VERSION:
            raise StoreError(f"run store {self.path!r} has schema version {row[0]}, this compileiq-lab "
                             f"reads version {SCHEMA_VERSION}; open it with the version that wrote it")

    # -- header ------------------------------------------------------------------------------
    def header(self) -> RunHeader | None:
        """The run's header (None for a store no run has written yet)."""
        with self._lock:
            values = {k: json.loads(v) for k, v in self._conn.execute("SELECT key, value FROM meta")}
        return RunHeader.from_values(values) if values else None

    def write_header(self, header: RunHeader) -> None:
        """Store a header (committed at once). Only the writer of the run (see ``acquire``) should call this."""
        self._require_writable()
        with self._lock:
            self._conn.executemany("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)",
                                   [(k, json.dumps(v)) for k, v in header.to_values().items()])

    def update_header(self, **changes: Any) -> RunHeader:
        """Change some header fields (see ``RunHeader``); returns the new header.

        Raises:
            StoreError: The store has no header yet.
        """
        current = self.header()
        if current is None:
            raise StoreError(f"run store {self.path!r} has no header to update; write one first")
        new = current.replace(**changes)
        self.write_header(new)
        return new

    # -- rows --------------------------------------------------------------------------------
    def append(self, record: EvalRecord) -> None:
        """Commit one evaluation; returns only once it is in the file."""
        self._require_writable()
        with self._lock:
            try:
                self._conn.execute(f"INSERT INTO evals({', '.join(_COLUMNS)}) VALUES "
                                   f"({', '.join('?' * len(_COLUMNS))})", record.to_row())
            except sqlite3.IntegrityError as exc:
                raise StoreError(f"evaluation {record.eval_id} of config {record.config_key} is already "
                                 f"stored in {self.path!r}: {exc}") from exc
            self._records.append(record)
            self._by_key[record.config_key] = record

    def refresh(self) -> int:
        """Read rows another connection committed since this store was opened; returns how many."""
        with self._lock:
            last = self._records[-1].eval_id if self._records else -1
            new = [EvalRecord.from_row(r) for r in self._conn.execute(
                f"SELECT {', '.join(_COLUMNS)} FROM evals WHERE eval_id > ? ORDER BY eval_id", (last,))]
            self._records.extend(new)
            self._by_key.update((r.config_key, r) for r in new)
            return len(new)

    def records(self) -> list[EvalRecord]:
        """Every evaluation, in call order."""
        with self._lock:
            return list(self._records)

    def lookup(self, config_key: str) -> EvalRecord | None:
        """The stored evaluation of a config, if any."""
        return self._by_key.get(config_key)

    def __len__(self) -> int:
        return len(self._records)

    def acquire(self) -> None:
        """Become the only writer of this file (until ``release``, ``close`` or process exit).

        Raises:
            StoreError: If another run (in this or another process) is writing the file.
        """
        if self.path == MEMORY or self._lock_fd is not None or fcntl is None:
            return
        fd = os.open(self.path + ".lock", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            holder = os.read(fd, 32).decode(errors="replace").strip() or "?"
            os.close(fd)
            raise StoreError(f"run store {self.path!r} is being written by another run (process {holder}); "
                             "wait for it or stop it before continuing this run, or read it with "
                             "load_results()") from None
        os.ftruncate(fd, 0)
        os.write(fd, str(os.getpid()).encode())
        self._lock_fd = fd

    def release(self) -> None:
        """Stop being the writer (the lock file stays; it is only a lock)."""
        fd, self._lock_fd = self._lock_fd, None
        if fd is not None:
            os.close(fd)  # closing the descriptor releases the flock

    def close(self) -> None:
        """Close the connection (the file stays)."""
        with self._lock:
            self.release()
            self._conn.close()

    def _require_writable(self) -> None:
        if self.readonly:
            raise StoreError(f"run store {self.path!r} is open read-only")
