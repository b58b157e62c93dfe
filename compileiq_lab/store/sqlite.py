"""SQLite run store: a header plus one row per evaluation, committed as each one finishes."""

from __future__ import annotations

import json
import logging
import os
import sqlite3
import threading
import time
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import quote

from compileiq_lab.exceptions import CompileIQLabError, EnvironmentFaultError, StoreError
from compileiq_lab.store.checks import check_file, check_readable, check_schema
from compileiq_lab.store.damage import check_header_values, read_header_values, read_rows, scan_pages
from compileiq_lab.store.header import HEADER_KEYS, SCHEMA_VERSION, RunHeader
from compileiq_lab.store.lock import LOCKS, lock_path, take_writer_lock
from compileiq_lab.store.record import COLUMNS, MEMORY_SCHEMA, SCHEMA, SELECT, EvalRecord, whole_key

__all__ = ["DEFAULT_DIR", "MEMORY", "SCHEMA_VERSION", "EvalRecord", "RunStore", "new_store_path"]

log = logging.getLogger(__name__)

DEFAULT_DIR = "compileiq_runs"
MEMORY = ":memory:"


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
        if isinstance(path, bool) or not isinstance(path, (str, os.PathLike)) or not os.fspath(path):
            raise StoreError(f"run store: `the store is a .db path or ':memory:'` must hold, but got "
                             f"{type(path).__name__} {path!r}; "
                             "pass e.g. 'runs/tune.db', ':memory:' for a run kept in memory only, or leave it out "
                             "for a new file under ./compileiq_runs/")
        self.path = str(path)
        self.readonly = readonly
        self._file = None if self.path == MEMORY else self.path  # read page by page where SQLite cannot
        self._row_damage: list[str] = []
        self._header_damage: list[str] = []
        self._lock = threading.RLock()
        self._lock_fd: int | None = None
        if self.path != MEMORY and Path(self.path).is_dir():  # refused before a lock file is made beside it
            raise StoreError(f"a run store is a file, but {self.path!r} is a folder; pass a .db file in it (e.g. "
                             f"{str(Path(self.path) / 'tune.db')!r}), or ':memory:'")
        if header is not None and not readonly and self.path != MEMORY:
            self.acquire()  # the creator of a store is its only writer: two creators cannot replace each other
            try:
                if not Path(self.path).exists():
                    self._create(header)
            except BaseException:
                self.release()
                raise
        try:
            self._conn = self._connect()
        except sqlite3.Error as exc:
            self.release()
            raise StoreError(f"cannot open run store {self.path!r}: {exc}. Pass the path of a .db file in a "
                             "writable folder (e.g. 'runs/tune.db'), or ':memory:'") from exc
        except BaseException:
            self.release()
            raise
        self._records, notes = read_rows(self._conn, SELECT, EvalRecord.from_row, self._file)
        self._row_damage += notes
        self._by_key: dict[str, EvalRecord] = {}
        self._by_whole: dict[str, EvalRecord] = {}  # stored floats' keys, their whole numbers written as ints
        self._index(self._records)
        if not self.readonly and self.path != MEMORY:
            self.header()  # its damage, if any, is known before anything is written
            if self.damage:
                self._conn.close()
                self.release()
                raise StoreError(self._damaged_message("it cannot be continued: writing into it could lose more"))

    def _create(self, header: RunHeader) -> None:
        """Build the file under a temporary name and link it into place (never over a file that appeared)."""
        target = Path(self.path)
        tmp = target.with_name(f".{target.name}.{os.getpid()}.{uuid.uuid4().hex[:6]}.tmp")
        try:
            conn = sqlite3.connect(tmp, isolation_level=None)
            try:
                conn.execute("PRAGMA journal_mode=WAL")
                conn.executescript(SCHEMA)
                conn.executemany("INSERT INTO meta(key, value) VALUES (?, ?)",
                                 [(k, json.dumps(v)) for k, v in header.to_values().items()])
            finally:
                conn.close()
            try:
                os.link(tmp, target)  # fails if the file exists: a store is never replaced
            except FileExistsError:
                pass  # another creator won: its file is the run
            except OSError:  # a file system without hard links: the writer lock already excludes other creators
                if not target.exists():
                    os.replace(tmp, target)
        except OSError as exc:
            raise self._unwritable(exc) from exc
        finally:
            for leftover in (tmp, Path(f"{tmp}-wal"), Path(f"{tmp}-shm")):
                leftover.unlink(missing_ok=True)

    def _write_failed(self, exc: sqlite3.Error, what: str) -> CompileIQLabError:
        """The error for a write the file did not take: a full disk is the machine's fault, anything else the file's."""
        text = str(exc)
        if "full" in text or "quota" in text.lower():
            return EnvironmentFaultError(f"cannot write {what} to the run store {self.path!r}: {text}. Free space "
                                         "on its disk, then run the same command again: it continues from the last "
                                         "committed row")
        if "locked" in text or "busy" in text:
            return StoreError(f"cannot write {what} to the run store {self.path!r}: another program that has it open "
                              f"holds it ({text}), e.g. an sqlite3 shell; close it and run the same command again: "
                              "it continues from the last committed row")
        return StoreError(f"cannot write {what} to the run store {self.path!r}: {text}. Check that the file is "
                          "writable and intact (`compileiq-lab show` reads what it holds)")

    def _unwritable(self, exc: OSError) -> StoreError:
        """The error for a store that cannot be written where it was asked for."""
        where = exc.filename or self.path
        return StoreError(f"cannot write the run store {self.path!r}: {exc.strerror or exc} ({where}). Pass "
                          "--store / store= with a path in a folder you can write, or ':memory:' to keep nothing")

    def _connect(self) -> sqlite3.Connection:
        if self.readonly:
            return self._connect_readonly()
        existed = self.path != MEMORY and Path(self.path).is_file() and Path(self.path).stat().st_size > 0
        if self.path != MEMORY:
            try:
                Path(self.path).parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise self._unwritable(exc) from exc
        conn = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        try:
            if self.path != MEMORY:
                conn.execute("PRAGMA journal_mode=WAL")
                conn.execute("PRAGMA synchronous=NORMAL")
            if existed:  # never re-create a table a damaged file lost: check it as it is
                check_file(conn, self.path, SCHEMA)
            else:
                conn.executescript(MEMORY_SCHEMA if self.path == MEMORY else SCHEMA)
            check_schema(conn, self.path)
        except sqlite3.OperationalError as exc:
            conn.close()
            if "locked" not in str(exc) and "busy" not in str(exc):
                raise StoreError(f"{self.path!r} is not a compileiq-lab run store ({exc}); nothing can be read from "
                                 "it. Pass the path of a run's .db file, or a new path for a new run") from exc
            raise StoreError(f"run store {self.path!r} is locked by another program that has it open ({exc}), e.g. "
                             "an sqlite3 shell or a browser of the file; close it and run again") from exc
        except sqlite3.DatabaseError as exc:
            conn.close()
            raise StoreError(f"{self.path!r} is not a compileiq-lab run store, or a damaged one, and cannot be "
                             f"written ({exc}). Pass the path of a run's .db file, or a new path for a new run; where "
                             "`compileiq-lab show` still reads rows from it, continue in a new store with "
                             "--warm-start FILE (its best configs start the new run)") from exc
        except BaseException:
            conn.close()
            raise
        return conn

    def _connect_readonly(self) -> sqlite3.Connection:
        """Open for reading, also where nothing can be written (a read-only mount or folder: SQLite then cannot make
        the WAL's shared-memory file, and reads the file as immutable instead)."""
        if self.path == MEMORY or not Path(self.path).is_file():
            raise StoreError(f"run store {self.path!r} does not exist (or is not a file); pass the path of a run's "
                             ".db file")
        uri = f"file:{quote(str(Path(self.path).resolve()))}?mode=ro"
        conn = None
        for suffix in ("", "&immutable=1"):
            conn = sqlite3.connect(uri + suffix, uri=True, check_same_thread=False)
            try:
                check_readable(conn, self.path)  # (a refused file is closed below, as for any error)
                return conn
            except sqlite3.OperationalError as exc:
                conn.close()
                if suffix:  # the first try fails where the WAL's shared memory cannot be made: a read-only place
                    raise StoreError(f"cannot read run store {self.path!r}: {exc}; check that the file is "
                                     "readable") from exc
            except sqlite3.DatabaseError as exc:
                conn.close()
                return self._from_pages(exc)
            except BaseException:
                conn.close()
                raise
        raise AssertionError("unreachable")  # pragma: no cover

    def _from_pages(self, exc: sqlite3.DatabaseError) -> sqlite3.Connection:
        """A file SQLite cannot open (its first page is damaged): the rows and header its other pages still hold, in
        memory, or the error when they hold none."""
        try:
            wide, narrow = scan_pages(self.path)
        except OSError:
            wide, narrow = {}, []
        meta = [(k, v) for _, (k, v) in sorted(narrow, key=lambda item: item[0])
                if k in HEADER_KEYS and isinstance(v, str)]
        if not wide and not meta:
            raise StoreError(f"{self.path!r} is not a compileiq-lab run store ({exc}); nothing can be read from it. "
                             "Pass the path of a run's .db file") from exc
        conn = sqlite3.connect(MEMORY, check_same_thread=False)
        conn.executescript(SCHEMA)
        conn.executemany("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", meta)
        rows = [(rowid, *values[1:]) for rowid, values in sorted(wide.items())]
        conn.executemany(f"INSERT OR IGNORE INTO evals({', '.join(COLUMNS)}) VALUES "
                         f"({', '.join('?' * len(COLUMNS))})", rows)
        self._file = None  # what the pages hold is all there is
        self._row_damage.append(f"SQLite cannot open the file ({exc}); {len(rows)} rows and {len(meta)} header keys "
                                "read from its pages directly")
        return conn

    # -- damage ------------------------------------------------------------------------------
    @property
    def damage(self) -> list[str]:
        """What could not be read from the file (rows, header keys); empty for an intact store."""
        return [*self._row_damage, *self._header_damage]

    def _damaged_message(self, consequence: str) -> str:
        notes = self.damage
        return (f"run store {self.path!r} is damaged ({'; '.join(notes[:3])}{' ...' if len(notes) > 3 else ''}): "
                f"{consequence}. `compileiq-lab show {self.path}` and `export` read its {len(self._records)} intact "
                f"rows; continue in a new store (--store NEW.db --warm-start {self.path})")

    # -- header ------------------------------------------------------------------------------
    def header(self) -> RunHeader | None:
        """The run's header (None for a store no run has written yet)."""
        with self._lock:
            values, notes = read_header_values(self._conn, HEADER_KEYS, self._file)
        values, wrong = check_header_values(values)
        notes += wrong
        header = None
        if values:
            try:
                header = RunHeader.from_values(values)
            except (TypeError, ValueError, KeyError) as exc:  # a validation of the wrong shape
                notes.append(f"header key 'validation' is damaged ({exc})")
                header = RunHeader.from_values({k: v for k, v in values.items() if k != "validation"})
        self._header_damage = notes
        return header

    def write_header(self, header: RunHeader) -> None:
        """Store a header (committed at once). Only the writer of the run (see ``acquire``) should call this."""
        self._require_writable()
        with self._lock:
            try:
                self._conn.executemany("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)",
                                       [(k, json.dumps(v)) for k, v in header.to_values().items()])
            except sqlite3.Error as exc:
                raise self._write_failed(exc, "the header") from exc

    def update_header(self, **changes: Any) -> RunHeader:
        """Change some header fields (see ``RunHeader``); returns the new header.

        Raises:
            StoreError: The store has no header yet.
        """
        with self._lock:  # read and written as one (the run's clock writes from a thread of its own)
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
            if record.config_key in self._by_key:
                raise StoreError(f"evaluation {record.eval_id} of config {record.config_key} is already stored in "
                                 f"{self.path!r} (as evaluation {self._by_key[record.config_key].eval_id})")
            try:
                self._conn.execute(f"INSERT INTO evals({', '.join(COLUMNS)}) VALUES "
                                   f"({', '.join('?' * len(COLUMNS))})", record.to_row())
            except sqlite3.IntegrityError as exc:
                if "UNIQUE" not in str(exc):  # a value the table cannot hold (the engine stores none such)
                    raise StoreError(f"evaluation {record.eval_id} of config {record.config_key} cannot be stored in "
                                     f"{self.path!r}: {exc}; every column of a row must hold a value") from exc
                raise StoreError(f"evaluation {record.eval_id} of config {record.config_key} is already "
                                 f"stored in {self.path!r}: {exc}") from exc
            except sqlite3.Error as exc:
                raise self._write_failed(exc, f"evaluation {record.eval_id}") from exc
            self._records.append(record)
            self._index([record])

    def _index(self, records: list[EvalRecord]) -> None:
        """Find these rows by their config's key (``lookup``)."""
        for r in records:
            self._by_key[r.config_key] = r
            if ".0" in r.config_key:
                self._by_whole.setdefault(whole_key(r.config_key), r)

    def refresh(self) -> int:
        """Read rows another connection committed since this store was opened; returns how many."""
        with self._lock:
            last = self._records[-1].eval_id if self._records else -1
            try:
                raw = self._conn.execute(f"{SELECT} WHERE eval_id > ? ORDER BY eval_id", (last,)).fetchall()
            except sqlite3.DatabaseError as exc:
                raise StoreError(self._damaged_message(f"new rows cannot be read ({exc})")) from exc
            new = []
            for r in raw:
                try:
                    new.append(EvalRecord.from_row(r))
                except ValueError as exc:
                    self._row_damage.append(f"eval {r[0]!r}: {exc}"[:200])
            self._records.extend(new)
            self._index(new)
            return len(new)

    def records(self, start: int = 0) -> list[EvalRecord]:
        """Every evaluation from the ``start``-th on (all by default), in call order: a reader keeping up reads on."""
        with self._lock:
            return self._records[start:]

    def lookup(self, config_key: str) -> EvalRecord | None:
        """The stored evaluation of a config, if any: a row stored before a float range's whole ends were floats too
        (``0`` where the config now has ``0.0``) is found as well."""
        rec = self._by_key.get(config_key)
        if rec is None and ".0" in config_key:
            whole = whole_key(config_key)
            rec = self._by_key.get(whole) or self._by_whole.get(whole)
        return rec

    def __len__(self) -> int:
        return len(self._records)

    def acquire(self) -> None:
        """Become the only writer of this file (until ``release``, ``close`` or process exit); rows another writer
        committed since this store was opened are read first.

        Raises:
            StoreError: If another run (in this or another process) is writing the file.
        """
        if self.path == MEMORY or self._lock_fd is not None or not LOCKS:
            return
        try:
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(lock_path(self.path), os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise self._unwritable(exc) from exc
        holder = take_writer_lock(fd)
        if holder is not None:
            raise StoreError(f"run store {self.path!r} is being written by another run (process {holder}); "
                             "wait for it or stop it before continuing this run, or read it with "
                             "load_results()")
        self._lock_fd = fd
        if getattr(self, "_records", None) is not None:
            self._journal("WAL")  # written again: readers read beside the writer
            self.refresh()  # rows another writer committed while this store was open are part of the run

    def release(self) -> None:
        """Stop being the writer (the lock file stays; it is only a lock). The file leaves WAL mode where no reader
        has it open: it is in WAL mode only while a run writes it, so reading it later makes no -wal/-shm files
        beside it."""
        fd, self._lock_fd = self._lock_fd, None
        if fd is not None:
            self._journal("DELETE")
            os.close(fd)  # closing the descriptor releases the flock

    def _journal(self, mode: str) -> None:
        """Set the file's journal mode; left as it is where it cannot change (a reader has the file open: SQLite
        keeps it consistent either way)."""
        conn = getattr(self, "_conn", None)
        if conn is not None:
            try:
                conn.execute(f"PRAGMA journal_mode={mode}")
            except sqlite3.Error as exc:
                log.debug("run store %s stays in its journal mode (%s)", self.path, exc)

    def close(self) -> None:
        """Close the connection (the file stays)."""
        with self._lock:
            self.release()
            self._conn.close()

    def _require_writable(self) -> None:
        if self.readonly:
            raise StoreError(f"run store {self.path!r} is open read-only")
