"""Reading what a damaged run store still holds: rows one by one, header keys one by one, and what was lost."""

from __future__ import annotations

import json
import math
import sqlite3
import struct
from collections.abc import Callable, Sequence
from typing import Any

from compileiq_lab.store.statuses import STATUSES

__all__ = ["MAX_SALVAGE_IDS", "check_header_values", "check_row", "read_header_values", "read_rows", "scan_pages"]

#: A salvage looks rows up by id up to this many ids past the last it can name (a store of a million evaluations
#: is far beyond any search's budget).
MAX_SALVAGE_IDS = 1_000_000

_Decode = Callable[[Sequence[Any]], Any]


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def check_row(d: dict[str, Any]) -> str | None:
    """What is wrong with a decoded row's fields (None when every field has its type)."""
    if not isinstance(d["eval_id"], int) or d["eval_id"] < 0:
        return f"eval_id {d['eval_id']!r} is not a non-negative integer"
    if not isinstance(d["generation"], int):
        return f"generation {d['generation']!r} is not an integer"
    for key in ("config_key", "status", "error"):
        if not isinstance(d[key], str):
            return f"{key} is {type(d[key]).__name__}, not text"
    if d["status"] not in STATUSES:
        return f"status {d['status'][:40]!r} is not one of {list(STATUSES)}"
    if not isinstance(d["params"], dict):
        return f"params is a JSON {type(d['params']).__name__}, not an object"
    if not isinstance(d["detail"], dict):
        return f"detail is a JSON {type(d['detail']).__name__}, not an object"
    scores = d["scores"]
    if scores is not None and not (isinstance(scores, list) and all(_number(s) for s in scores)):
        return f"scores {str(scores)[:40]!r} is not a list of numbers"
    for key in ("elapsed_s", "started_at"):
        if not _number(d[key]) or not math.isfinite(d[key]):
            return f"{key} {d[key]!r} is not a number"
    return None


def read_rows(conn: sqlite3.Connection, select: str, decode: _Decode,
              path: str | None = None) -> tuple[list[Any], list[str]]:
    """Every row ``decode`` accepts, in id order, and a note per row or range that could not be read.

    ``select`` is the row query without its WHERE/ORDER clauses. A whole scan is tried first; where the file's
    pages are damaged, rows are looked up one id at a time, and (given the file's ``path``) read from the pages
    themselves, so every intact row is still read.
    """
    try:
        raw = conn.execute(f"{select} ORDER BY eval_id").fetchall()
        notes: list[str] = []
    except sqlite3.OperationalError as exc:
        if "no such table" in str(exc):
            return [], ["the evaluations table is missing"]
        raw, notes = _salvage_rows(conn, select, exc, path)
    except sqlite3.DatabaseError as exc:
        raw, notes = _salvage_rows(conn, select, exc, path)
    rows = []
    for row in raw:
        try:
            rows.append(decode(row))
        except (ValueError, TypeError, KeyError) as exc:
            notes.append(f"eval {row[0]!r}: {exc}"[:200])
    return rows, notes


def _salvage_rows(conn: sqlite3.Connection, select: str, first: Exception,
                  path: str | None) -> tuple[list[Any], list[str]]:
    found: dict[int, Any] = {}
    last = _last_id(conn)
    for eval_id in range(last + 1 if last is not None else 0):
        try:
            row = conn.execute(f"{select} WHERE eval_id = ?", (eval_id,)).fetchone()
        except sqlite3.DatabaseError:
            continue
        if row is not None:
            found[eval_id] = row
    from_pages = 0
    if path is not None:
        try:
            wide, _ = scan_pages(path)
        except OSError:
            wide = {}
        for rowid, values in wide.items():
            if rowid not in found and 0 <= rowid <= MAX_SALVAGE_IDS:
                found[rowid] = (rowid, *values[1:])
                from_pages += 1
    notes = [f"the file is damaged ({first})"]
    if from_pages:
        notes.append(f"{from_pages} rows read from its pages directly")
    top = max(found, default=-1) if last is None else last
    lost = [i for i in range(top + 1) if i not in found]
    if lost:
        notes.append(f"{len(lost)} evaluations unreadable ({_ranges(lost)})")
    return [found[i] for i in sorted(found)], notes


def _last_id(conn: sqlite3.Connection) -> int | None:
    """The highest stored id, where the file still says."""
    try:
        value = conn.execute("SELECT max(eval_id) FROM evals").fetchone()[0]
    except sqlite3.DatabaseError:
        return None
    return min(value, MAX_SALVAGE_IDS) if isinstance(value, int) else None


def _ranges(ids: list[int]) -> str:
    spans: list[str] = []
    start = prev = ids[0]
    for i in [*ids[1:], None]:
        if i is not None and i == prev + 1:
            prev = i
            continue
        spans.append(f"eval {start}" if start == prev else f"evals {start}-{prev}")
        if i is not None:
            start = prev = i
    return ", ".join(spans[:5]) + (" ..." if len(spans) > 5 else "")


def read_header_values(conn: sqlite3.Connection, keys: Sequence[str],
                       path: str | None = None) -> tuple[dict[str, Any], list[str]]:
    """The header's key/values that decode, and a note per key (or for the table) that does not; from a damaged
    file, key by key and then (given its ``path``) from its pages."""
    notes: list[str] = []
    try:
        pairs = conn.execute("SELECT key, value FROM meta").fetchall()
    except sqlite3.OperationalError as exc:
        if "no such table" in str(exc):
            return {}, ["the header table is missing"]
        pairs, notes = _header_by_key(conn, keys, exc, path)
    except sqlite3.DatabaseError as exc:
        pairs, notes = _header_by_key(conn, keys, exc, path)
    values: dict[str, Any] = {}
    for key, text in pairs:
        try:
            values[str(key)] = json.loads(text)
        except (TypeError, ValueError) as exc:
            notes.append(f"header key {key!r} is not JSON ({exc})")
    return values, notes


def _header_by_key(conn: sqlite3.Connection, keys: Sequence[str], first: Exception,
                   path: str | None) -> tuple[list[Any], list[str]]:
    pairs: dict[str, Any] = {}
    for key in keys:
        try:
            row = conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        except sqlite3.DatabaseError:
            continue
        if row is not None:
            pairs[key] = row[0]
    if path is not None and len(pairs) < len(keys):
        try:
            _, narrow = scan_pages(path)
        except OSError:
            narrow = []
        for _, (key, value) in sorted(narrow, key=lambda item: item[0]):  # the latest write of a key wins
            if key in keys and key not in pairs and isinstance(value, str):
                pairs.setdefault(key, value)
    lost = [k for k in keys if k not in pairs]
    return list(pairs.items()), [f"the header is damaged ({first})" + (f"; lost: {', '.join(lost)}" if lost else "")]


_TYPES: dict[str, tuple[type, ...]] = {
    "schema_version": (int,), "created_at": (int, float), "space": (dict,), "config": (dict,), "objective": (str,),
    "package_version": (str,), "status": (str,), "resolved": (dict,), "metadata": (dict,),
    "validation": (dict, type(None)), "updated_at": (int, float, type(None)), "stop_reason": (str,),
    "run_time_s": (int, float),
}
_CONFIG_TYPES: dict[str, tuple[type, ...]] = {
    "generations": (int,), "pool_size": (int, type(None)), "seed": (int,), "num_objectives": (int,),
    "problem_type": (str, list), "objective_names": (list, type(None)), "warm_start": (list, type(None)),
    "timeout_s": (int, float, type(None)), "max_evaluations": (int, type(None)),
    "time_budget_s": (int, float, type(None)),
}
_METADATA_TYPES: dict[str, tuple[type, ...]] = {
    "kernel": (str,), "catalog": (str,), "objectives": (list,), "language": (str, type(None)),
    "source_sha256": (str, type(None)), "arch": (str, type(None)), "toolchain": (dict, type(None)),
    "gpu": (dict, type(None)),
}


def _wrong(table: dict[str, tuple[type, ...]], values: dict[str, Any], where: str) -> dict[str, str]:
    """The keys of ``values`` whose type is not the one ``table`` names, each with its note."""
    out = {}
    for key, types in table.items():
        if key in values and (not isinstance(values[key], types) or isinstance(values[key], bool)):
            wanted = " or ".join(t.__name__ for t in types if t is not type(None))
            out[key] = f"{where}{key} is a {type(values[key]).__name__}, not {wanted}"
    return out


def check_header_values(values: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """The header values with every field of the wrong type left out, and a note for each one left out."""
    wrong = _wrong(_TYPES, values, "header key ")
    kept = {k: v for k, v in values.items() if k not in wrong}
    notes = list(wrong.values())
    for key, table in (("config", _CONFIG_TYPES), ("metadata", _METADATA_TYPES)):
        inner = _wrong(table, kept.get(key) or {}, f"header {key}.")
        if inner:
            notes.extend(inner.values())
            kept.pop(key)
    return kept, notes


# -- reading the pages themselves (when SQLite's own b-tree cannot be walked) -------------------------------------
class _Bad(Exception):
    """A cell that does not decode."""


def _varint(buf: bytes, i: int) -> tuple[int, int]:
    value = 0
    for n in range(9):
        if i + n >= len(buf):
            raise _Bad("varint past the end")
        b = buf[i + n]
        if n == 8:
            return (value << 8) | b, i + 9
        value = (value << 7) | (b & 0x7F)
        if b < 0x80:
            return value, i + n + 1
    raise _Bad("varint")  # pragma: no cover


def _value(serial: int, buf: bytes, i: int) -> tuple[Any, int]:
    sizes = {0: 0, 1: 1, 2: 2, 3: 3, 4: 4, 5: 6, 6: 8, 7: 8, 8: 0, 9: 0}
    if serial in (10, 11):
        raise _Bad("reserved serial type")
    n = sizes[serial] if serial < 12 else (serial - 12) // 2
    if i + n > len(buf):
        raise _Bad("value past the end")
    raw = buf[i:i + n]
    if serial == 0:
        return None, i
    if serial in (8, 9):
        return serial - 8, i
    if serial == 7:
        return struct.unpack(">d", raw)[0], i + n
    if serial < 12:
        return int.from_bytes(raw, "big", signed=True), i + n
    if serial % 2:
        return raw.decode("utf-8"), i + n
    return bytes(raw), i + n


def _record(payload: bytes) -> list[Any]:
    size, i = _varint(payload, 0)
    if size > len(payload):
        raise _Bad("record header past the end")
    serials = []
    while i < size:
        serial, i = _varint(payload, i)
        serials.append(serial)
    values, j = [], size
    for serial in serials:
        value, j = _value(serial, payload, j)
        values.append(value)
    return values


def scan_pages(path: str, max_bytes: int = 1 << 30) -> tuple[dict[int, list[Any]], list[tuple[int, list[Any]]]]:
    """Every table-leaf cell of a SQLite file that decodes, read page by page without SQLite (as its ``.recover``
    does): ``(rowid -> values)`` of the 11-column rows and ``(rowid, values)`` of the 2-column ones.

    Rows that only the write-ahead log holds are not seen; a file over ``max_bytes`` is read up to it.
    """
    with open(path, "rb") as f:
        data = f.read(max_bytes)
    page_size = int.from_bytes(data[16:18], "big") if data[:16] == b"SQLite format 3\x00" else 4096
    page_size = 65536 if page_size == 1 else page_size
    if page_size < 512 or page_size & (page_size - 1):
        page_size = 4096
    usable = page_size - (data[20] if len(data) > 20 and data[:16] == b"SQLite format 3\x00" else 0)
    wide: dict[int, list[Any]] = {}
    narrow: list[tuple[int, list[Any]]] = []
    for start in range(0, len(data) - page_size + 1, page_size):
        page = data[start:start + page_size]
        head = 100 if start == 0 else 0
        if page[head] != 0x0D:
            continue
        cells = int.from_bytes(page[head + 3:head + 5], "big")
        for c in range(min(cells, page_size // 4)):
            try:
                at = int.from_bytes(page[head + 8 + 2 * c:head + 10 + 2 * c], "big")
                values, rowid = _cell(data, page, at, usable, page_size)
            except (_Bad, UnicodeDecodeError, IndexError, KeyError, ValueError):
                continue
            if len(values) == 11:
                wide[rowid] = values
            elif len(values) == 2:
                narrow.append((rowid, values))
    return wide, narrow


def _cell(data: bytes, page: bytes, at: int, usable: int, page_size: int) -> tuple[list[Any], int]:
    size, i = _varint(page, at)
    rowid, i = _varint(page, i)
    x = usable - 35
    if size <= x:
        local = size
    else:
        m = ((usable - 12) * 32 // 255) - 23
        k = m + (size - m) % (usable - 4)
        local = k if k <= x else m
    payload = bytearray(page[i:i + local])
    if len(payload) != local:
        raise _Bad("payload past the page")
    nxt = int.from_bytes(page[i + local:i + local + 4], "big") if local < size else 0
    hops = 0
    while len(payload) < size:
        if nxt < 1 or (nxt - 1) * page_size >= len(data) or hops > len(data) // page_size:
            raise _Bad("overflow chain broken")
        over = data[(nxt - 1) * page_size:nxt * page_size]
        nxt = int.from_bytes(over[:4], "big")
        payload += over[4:usable][:size - len(payload)]
        hops += 1
    return _record(bytes(payload)), rowid
