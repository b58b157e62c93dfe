"""Exhaustive real-compiler tables replayed as objectives: a failed compile raises, as the real compiler's does."""

from __future__ import annotations

import csv
import gzip
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from compileiq_lab import space as ss
from compileiq_lab.exceptions import CompileIQLabError, SpaceDefinitionError
from compileiq_lab.search.pareto import pareto_mask
from compileiq_lab.space import Param, param_from_spec
from compileiq_lab.space.catalogs import get_catalog
from compileiq_lab.space.params import matching_values

__all__ = ["DERIVED", "METRIC_COLUMNS", "OBJECTIVES", "TEXT_COLUMNS", "UNSET_VALUE", "Table", "TableCompileError",
           "TableObjective", "add_derived", "front_of", "read_rows", "table_best"]

#: The metrics the project's own tables hold, each minimised (a table may hold other numeric columns too).
METRIC_COLUMNS = ("sass_instructions", "registers", "spill_bytes", "stack_bytes", "text_bytes", "instructions")


#: Objectives computed from a row's metrics. ``occupancy_first`` is lexicographic: fewest registers (occupancy),
#: then fewest spill bytes, then fewest instructions, as one number (each term stays below 10^4).
def _occupancy_first(r: Mapping[str, Any]) -> float:
    return float(r["registers"] * 1e8 + r["spill_bytes"] * 1e4 + r["sass_instructions"])


DERIVED: dict[str, Callable[[Mapping[str, Any]], float]] = {"occupancy_first": _occupancy_first}
#: Every objective the project's own tables can be searched for.
OBJECTIVES = (*METRIC_COLUMNS, *DERIVED)
#: The value that means "leave the compiler's default" in a plain (user-written) space of a table.
UNSET_VALUE = "unset"


class TableCompileError(CompileIQLabError, RuntimeError):
    """The recorded compiler rejected this config (the message is the compiler's)."""


def add_derived(row: dict[str, Any]) -> dict[str, Any]:
    """Add the derived objectives an ok row has the metrics for (in place; returned for chaining)."""
    if row.get("status") == "ok":
        for name, f in DERIVED.items():
            try:
                row[name] = float(f(row))
            except KeyError:
                pass
    return row


#: Columns of a table's CSV that are text whatever they hold (besides the controls).
TEXT_COLUMNS = ("status", "message", "code_hash")


def _number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def read_rows(path: str | Path, controls: Sequence[str] | None = None) -> list[dict[str, Any]]:
    """The rows of a table's CSV as written (control columns as JSON text, "" for unset), with its metrics as numbers
    and the derived objectives added.

    The metrics are ``METRIC_COLUMNS``; given the table's ``controls``, every other column besides
    ``TEXT_COLUMNS`` is a metric too where its values are numbers (a table made elsewhere may record a runtime or a
    compile time). A metric's empty cell (a failed compile has no metrics) is left out of the row.
    """
    path = Path(path)
    with (gzip.open(path, "rt", newline="") if path.suffix == ".gz" else path.open(newline="")) as fh:
        rows: list[dict[str, Any]] = list(csv.DictReader(fh))
    skip = set(TEXT_COLUMNS) | set(controls or ())
    metrics = [c for c in (rows[0] if rows else ()) if c not in skip] if controls is not None else list(METRIC_COLUMNS)
    for r in rows:
        for m in metrics:
            value = _number(r[m]) if r.get(m) else None
            if value is not None:
                r[m] = value
            elif not r.get(m) or m in METRIC_COLUMNS:
                r.pop(m, None)
        add_derived(r)
    return rows


def front_of(F: np.ndarray) -> np.ndarray:
    """The distinct vectors of the exact Pareto front of ``F`` (rows; every column minimised), sorted."""
    F = np.asarray(F, dtype=float).reshape(len(F), -1)
    return np.unique(F[pareto_mask(F)], axis=0) if len(F) else F


def table_best(rows: Sequence[Mapping[str, Any]], objectives: Sequence[str]) -> dict[str, Any]:
    """Best known values of a table's ok rows: the optimum (or true front), how many configs hold it, and a
    hypervolume reference point (10 % beyond the worst feasible value of each objective, at least 1)."""
    F = np.array([[float(r[o]) for o in objectives] for r in rows if r["status"] == "ok"], dtype=float)
    if not len(F):
        return {"best": None, "front": [], "holders": 0, "hv_reference": None}
    front = front_of(F)
    holders = int(sum(bool((np.abs(front - f).sum(axis=1) == 0).any()) for f in F))
    worst, low = F.max(axis=0), F.min(axis=0)
    ref = worst + np.maximum(1.0, 0.1 * (worst - low))
    return {"best": front[0].tolist() if len(objectives) == 1 else None, "front": front.tolist(),
            "holders": holders, "hv_reference": ref.tolist()}


class _Cells:
    """A control column's cells in the form a row key has them (``json.dumps`` of the value, "" for unset): a cell
    written another way (``fast`` for ``"fast"``, ``32.0`` for ``32``) is read as the value it names."""

    def __init__(self, table: str, name: str, prm: Param) -> None:
        self.table, self.name, self.prm = table, name, prm
        self.known = {json.dumps(v): json.dumps(v) for v in prm.values}
        if prm.can_knockout:
            self.known[""] = ""

    def __call__(self, cell: str | None) -> str:
        text = "" if cell is None else cell.strip()
        if text in self.known:
            return self.known[text]
        try:
            value = json.loads(text)
        except ValueError:
            value = text
        try:
            same = matching_values(self.prm.values, value, "Table.load")
        except SpaceDefinitionError:  # a cell that is no value at all (an object, NaN)
            same = []
        if not same:
            raise ValueError(f"table {self.table!r}: every cell of control column {self.name!r} must be one of its "
                             f"values {list(self.prm.values)} as JSON"
                             f"{', or empty for unset' if self.prm.can_knockout else ''}, but got {cell!r}; fix the "
                             "CSV or add the value to the control in the manifest")
        self.known[text] = json.dumps(same[0])
        return self.known[text]


@dataclass
class Table:
    """One exhaustive table: every config of a control set with the compiler's verdict and metrics.

    Attributes:
        name: The table's name (its file stem).
        catalog: The catalog its controls come from ("ptxas", "nvcc", "gcc"), whose known conflicts are the catalog
            space's constraint; None (no ``catalog`` in the manifest) for controls no catalog has.
        controls: Each control as a catalog parameter (values restricted to the enumerated ones).
        objectives: The metrics of the table's problem, each minimised.
        manifest: The table's JSON manifest (toolchain, counts, best known values).
        rows: Row by config key (one JSON value or "" per control).
    """

    name: str
    catalog: str | None
    controls: dict[str, Param]
    objectives: list[str]
    manifest: dict[str, Any]
    rows: dict[tuple[str, ...], dict[str, Any]] = field(repr=False)

    @classmethod
    def load(cls, path: str | Path) -> Table:
        """Read ``<name>.json`` and ``<name>.csv.gz`` (or an uncompressed ``<name>.csv``; either path, or the stem,
        may be given)."""
        p = Path(path)
        stem = p.name.removesuffix(".gz").removesuffix(".csv").removesuffix(".json")
        folder = p.parent
        mpath = folder / f"{stem}.json"
        cpath = next((c for c in (folder / f"{stem}.csv.gz", folder / f"{stem}.csv") if c.exists()),
                     folder / f"{stem}.csv.gz")
        if not mpath.exists() or not cpath.exists():
            raise FileNotFoundError(f"a table needs {mpath.name} and {stem}.csv.gz (or {stem}.csv) in {folder}; "
                                    "make them with bench/make_tables.py")
        manifest = json.loads(mpath.read_text())
        controls = {n: param_from_spec(s) for n, s in manifest["controls"].items()}
        names = list(controls)
        cells = {n: _Cells(stem, n, prm) for n, prm in controls.items()}
        records = read_rows(cpath, names)
        missing = [c for c in (*names, "status") if records and c not in records[0]]
        if missing:
            raise ValueError(f"table {stem!r}: {cpath.name} must have a column per control and a status column "
                             f"(ok, or the failure: compile_error, ...), but lacks {missing}; its columns: "
                             f"{list(records[0])}")
        rows = {tuple(cells[n](rec.get(n)) for n in names):
                {k: v for k, v in rec.items() if k not in names and k != "code_hash"}
                for rec in records}
        table = cls(stem, manifest.get("catalog"), controls, list(manifest["objectives"]), manifest, rows)
        table.check_objectives(table.objectives)
        return table

    @property
    def metrics(self) -> list[str]:
        """The objectives this table can be searched for: its numeric columns and the derived objectives its rows
        have the metrics for, in column order."""
        ok = [r for r in self.rows.values() if r.get("status") == "ok"]
        if not ok:
            return []
        every = set.intersection(*({k for k, v in r.items() if isinstance(v, float)} for r in ok))
        return [k for k in ok[0] if k in every]

    def check_objectives(self, objectives: Sequence[str]) -> None:
        """Raise ValueError, naming the table's metrics, for objectives that are not among them."""
        have = self.metrics
        bad = [o for o in objectives if o not in have]
        if bad or not objectives or len(set(objectives)) < len(objectives):
            raise ValueError(f"table {self.name!r}: objectives must be metrics of the table (numeric columns of every "
                             f"ok row), one or more, each once, but got {list(objectives)!r}; its metrics: {have}")

    @property
    def size(self) -> int:
        """Configs in the table."""
        return len(self.rows)

    def key(self, config: Mapping[str, Any]) -> tuple[str, ...]:
        """The row key of a config of either space (absent or "unset": the compiler's default).

        Raises:
            KeyError: For names that are not controls of this table.
        """
        unknown = set(config) - set(self.controls)
        if unknown:
            raise KeyError(f"table {self.name!r} has no controls {sorted(unknown)}; "
                           f"its controls: {list(self.controls)}")
        return tuple("" if n not in config or config[n] == UNSET_VALUE else json.dumps(config[n])
                     for n in self.controls)

    def catalog_space(self) -> dict[str, Param]:
        """The controls as the catalog defines them (knock-out genes, ordinal or categorical values)."""
        return dict(self.controls)

    def plain_space(self) -> dict[str, Param]:
        """The space a CompileIQ user would write: one ``ss.choice`` per control, "unset" among its values."""
        out: dict[str, Param] = {}
        for n, p in self.controls.items():
            values = list(p.values) + ([UNSET_VALUE] if p.can_knockout else [])
            out[n] = ss.choice(values) if len(values) > 1 else ss.literal(values[0])
        return out

    def constraint(self, config: Mapping[str, Any]) -> str | None:
        """The catalog's known conflict a config hits (the reason), or None: the search's constraint (none for a
        table without a catalog)."""
        if self.catalog is None:
            return None
        flat = {n: v for n, v in config.items() if v != UNSET_VALUE}
        return get_catalog(self.catalog).select(list(self.controls)).conflict(flat)

    def scores(self, objectives: Sequence[str] | None = None) -> np.ndarray:
        """The objective vectors of every ok row."""
        objs = list(objectives or self.objectives)
        return np.array([[r[o] for o in objs] for r in self.rows.values() if r["status"] == "ok"], dtype=float)

    def best(self, objectives: Sequence[str] | None = None) -> dict[str, Any]:
        """Best known values (see ``table_best``) for these objectives (default: the table's own)."""
        objs = list(objectives or self.objectives)
        return table_best(list(self.rows.values()), objs)

    def objective(self, objectives: Sequence[str] | None = None) -> TableObjective:
        """An objective function over this table."""
        return TableObjective(self, objectives)


def _said(row: Mapping[str, Any]) -> str:
    """A recorded row's status and, where the table has one, the compiler's message."""
    return f"{row['status']}: {row['message']}" if row.get("message") else str(row["status"])


class TableObjective:
    """Replays a table: returns a config's recorded metrics, raises ``TableCompileError`` where it failed.

    Args:
        table: The table (or a path ``Table.load`` reads).
        objectives: Metrics to return (default: the table's own objectives); one gives a float, several a tuple.

    Attributes:
        calls: Number of calls so far.
        history: The key of each call, in order (repeated candidates show as repeated keys).
    """

    def __init__(self, table: Table | str | Path, objectives: Sequence[str] | None = None) -> None:
        self.table = table if isinstance(table, Table) else Table.load(table)
        if isinstance(objectives, str):  # a list of its letters otherwise
            raise ValueError(f"TableObjective: objectives is a list of the table's metrics, but got the str "
                             f"{objectives!r}; pass [{objectives!r}]")
        self.objectives = list(self.table.objectives if objectives is None else objectives)
        self.table.check_objectives(self.objectives)
        self.calls = 0
        self.history: list[tuple[str, ...]] = []

    def row(self, config: Mapping[str, Any]) -> dict[str, Any]:
        """The recorded row of a config.

        Raises:
            KeyError: The config is not in the table (a value outside the enumerated ones, or an unknown name).
        """
        return self._lookup(config)[1]

    def _lookup(self, config: Mapping[str, Any]) -> tuple[tuple[str, ...], dict[str, Any]]:
        """A config's row key and its recorded row (see ``row``)."""
        key = self.table.key(config)
        if key not in self.table.rows:
            raise KeyError(f"config {dict(config)!r} is not in table {self.table.name!r}: every control takes one of "
                           "its enumerated values (see Table.controls) or is left out")
        return key, self.table.rows[key]

    def message(self, config: Mapping[str, Any]) -> str:
        """What a config's recorded compile says: its status and, where the table has one, the compiler's message
        (what a failed config raises)."""
        return _said(self.row(config))

    def __call__(self, config: dict[str, Any]) -> float | tuple[float, ...]:
        key, row = self._lookup(config)
        self.calls += 1
        self.history.append(key)
        if row["status"] != "ok":
            raise TableCompileError(_said(row))
        vals = tuple(float(row[o]) for o in self.objectives)
        return vals[0] if len(vals) == 1 else vals
