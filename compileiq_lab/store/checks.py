"""Checks made on opening a run store's file: a run store or a new one, intact enough to write, of this schema."""

from __future__ import annotations

import json
import sqlite3

from compileiq_lab.exceptions import StoreError
from compileiq_lab.store.header import SCHEMA_VERSION

__all__ = ["RUN_TABLES", "check_file", "check_readable", "check_schema", "foreign", "tables_of"]

#: The tables of a run store.
RUN_TABLES = frozenset({"meta", "evals"})


def tables_of(conn: sqlite3.Connection) -> set[str]:
    """The names of a database's tables."""
    return {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}


def foreign(path: str, tables: set[str], fix: str) -> StoreError:
    """The error for another program's SQLite database given as a run store (``tables``: what it holds)."""
    return StoreError(f"run store {path!r}: `the file is a run store (or new, or empty)` must hold, but it is an "
                      f"SQLite database of something else (its tables: {', '.join(sorted(tables))}); {fix}")


def check_file(conn: sqlite3.Connection, path: str, schema: str) -> None:
    """Refuse to write into an existing file whose pages or tables are damaged, or that is another program's
    database; an empty SQLite file gets the run store's tables (``schema``).

    Raises:
        StoreError: The file is damaged or is not a run store.
    """
    problems = [str(r[0]) for r in conn.execute("PRAGMA quick_check(5)")]
    damage = [] if problems == ["ok"] else [f"the file is damaged ({'; '.join(problems)[:300]})"]
    tables = tables_of(conn)
    if not tables:
        conn.executescript(schema)  # an empty SQLite file: no run has written it yet
        return
    missing = RUN_TABLES - tables
    if missing == RUN_TABLES and not damage:  # intact, and none of a run store's tables
        raise foreign(path, tables, "pass a new path for the run (no run was written into this one)")
    if missing or damage:
        why = damage + [f"the {t} table is missing" for t in sorted(missing)]
        raise StoreError(f"run store {path!r} is damaged ({'; '.join(why)}): it cannot be continued, since writing "
                         f"into it could lose more. `compileiq-lab show {path}` reads what is intact; continue in a "
                         f"new store (--store NEW.db --warm-start {path})")


def check_readable(conn: sqlite3.Connection, path: str) -> None:
    """Refuse to read a run store of another schema version, or another program's database (``check_schema``).

    Raises:
        StoreError: Either of them.
        sqlite3.DatabaseError: The file is no SQLite database, or SQLite cannot read it here.
    """
    check_schema(conn, path)
    tables = tables_of(conn)
    if tables and not tables & RUN_TABLES:
        raise foreign(path, tables, "pass the path of a run's .db file")


def check_schema(conn: sqlite3.Connection, path: str) -> None:
    """Refuse a run store of another schema version; a damaged one passes (its damage notes say what is lost).

    Raises:
        StoreError: The store's schema version is not this compileiq-lab's.
        sqlite3.DatabaseError: The file is no SQLite database (or an encrypted one).
    """
    try:
        row = conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
    except sqlite3.OperationalError as exc:
        if "no such table" in str(exc):
            return  # a damaged store: its header notes say so
        raise
    except sqlite3.DatabaseError as exc:
        if "not a database" in str(exc) or "encrypted" in str(exc):
            raise
        return  # damaged pages: what can be read is read row by row
    try:
        version = int(json.loads(row[0])) if row is not None else SCHEMA_VERSION
    except (TypeError, ValueError):
        return  # a damaged header value: its note says so
    if version != SCHEMA_VERSION:
        raise StoreError(f"run store {path!r} has schema version {row[0]}, this compileiq-lab reads version "
                         f"{SCHEMA_VERSION}; open it with the version that wrote it")
