"""EvalRecord: one stored evaluation, its columns and table, and the checks a row read back from a file must pass."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from compileiq_lab.store.damage import check_row

__all__ = ["COLUMNS", "MEMORY_SCHEMA", "SCHEMA", "SELECT", "EvalRecord", "whole_key"]

COLUMNS = ("eval_id", "generation", "config_key", "params", "status", "error", "scores",
           "elapsed_s", "started_at", "is_baseline", "detail")
SELECT = f"SELECT {', '.join(COLUMNS)} FROM evals"

#: The tables of a run store file: its header's keys and values, and one row per evaluation (the columns above).
SCHEMA = """
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
#: A store in memory has one connection, and ``append`` is its only writer of rows, which refuses a config stored
#: before from its own index of keys: SQLite's UNIQUE index on the (long) keys would cost a run more per row the
#: longer it gets (0.005 ms at 1,000 rows, 0.028 ms at 100,000).
MEMORY_SCHEMA = SCHEMA.replace("config_key  TEXT NOT NULL UNIQUE,", "config_key  TEXT NOT NULL,")


#: A line that says why something failed: it names an error, a fatal one, or an exception.
_SAYS_ERROR = re.compile(r"(?i)\b(fatal|error|exception)\b|[A-Za-z]+Error\b")
#: A line labelled as something else (``warning #177-D: variable "error" ...``, ``ptxas info    : ...``).
_NOT_ERROR = re.compile(r"(?i)\b(warning|info|note|remark)\s*(#[\w-]+)?\s*:")
#: An error line that only sums up those before it ("Ptx assembly aborted due to errors", "2 errors detected").
_SUMMARY = re.compile(r"(?i)aborted due to errors|\berrors? detected\b|compilation terminated")


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

    @property
    def error_line(self) -> str:
        """The line of ``error`` that says why: the first that names an error or a fatal one and does not only sum up
        the others (a compiler's info and warning lines before it skipped: "ptxas info : Overriding maximum register
        limit ..." precedes the fatal "Insufficient registers", and "Ptx assembly aborted due to errors" follows
        it), else its first line, else ""."""
        lines = [line.strip() for line in self.error.splitlines() if line.strip()]
        errors = [line for line in lines if _SAYS_ERROR.search(line) and not _NOT_ERROR.search(line)]
        return next((line for line in errors if not _SUMMARY.search(line)), errors[0] if errors else
                    lines[0] if lines else "")

    def to_row(self) -> tuple[Any, ...]:
        return (self.eval_id, self.generation, self.config_key, json.dumps(self.params, sort_keys=True),
                self.status, self.error, None if self.scores is None else json.dumps(list(self.scores)),
                self.elapsed_s, self.started_at, int(self.is_baseline), json.dumps(self.detail, default=str))

    @classmethod
    def from_row(cls, row: Iterable[Any]) -> EvalRecord:
        """A stored row as a record.

        Raises:
            ValueError: A field does not decode or has the wrong type (a damaged row).
        """
        d = dict(zip(COLUMNS, row))
        for key in ("params", "scores", "detail"):
            if d[key] is not None:
                try:
                    d[key] = json.loads(d[key])
                except (TypeError, ValueError) as exc:
                    raise ValueError(f"{key} is not JSON ({exc})") from None
        if d["params"] is None or d["detail"] is None:
            raise ValueError("params or detail is missing")
        wrong = check_row(d)
        if wrong is not None:
            raise ValueError(wrong)
        d["is_baseline"] = bool(d["is_baseline"])
        return cls(**d)


def whole_key(config_key: str) -> str:
    """A config's key with its whole-number floats written as ints (``{"x":3.0}`` -> ``{"x":3}``)."""
    def whole(v: Any) -> Any:
        if isinstance(v, float) and v.is_integer():
            return int(v)
        if isinstance(v, dict):
            return {k: whole(x) for k, x in v.items()}
        return [whole(x) for x in v] if isinstance(v, list) else v
    return json.dumps(whole(json.loads(config_key)), sort_keys=True, separators=(",", ":"))
