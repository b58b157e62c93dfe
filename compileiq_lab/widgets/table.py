"""EvaluationsTable: a run's evaluations as a sortable, filterable, paged table, linked to the plots."""

from __future__ import annotations

import bisect
import html
import json
import math
import operator
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import ipywidgets as w
import numpy as np

from compileiq_lab.exceptions import ConfigurationError
from compileiq_lab.kernels import Objective
from compileiq_lab.search.pareto import pareto_mask
from compileiq_lab.viz.data import param_rows

if TYPE_CHECKING:
    from compileiq_lab.store.results import Results
    from compileiq_lab.store.sqlite import EvalRecord

__all__ = ["EvaluationsTable"]

_OPS: dict[str, Callable[[Any, Any], bool]] = {
    "<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge, "==": operator.eq, "=": operator.eq,
    "!=": operator.ne}
_TERM = re.compile(r"^\s*([^\s<>=!]+)\s*(<=|>=|==|!=|<|>|=)\s*(.*?)\s*$")
_IDS = {"eval_id": "eval_id", "id": "eval_id", "eval": "eval_id", "generation": "generation", "gen": "generation"}
_NBSP = "\u00a0"  # padding that the browser does not collapse inside an <option>
_CSS = ("<style>.compileiq-table-rows select, .compileiq-table-head pre {font-family: var(--jp-code-font-family, "
        "monospace); font-size: 12px;} .compileiq-table-head pre {margin: 0; padding: 0 0 0 5px; overflow: hidden}"
        "</style>")


def _value_text(v: Any) -> str:
    if isinstance(v, float):
        s = f"{v:.6g}"
        return s + ".0" if s.lstrip("-").isdigit() else s
    return v if isinstance(v, str) else json.dumps(v, default=str)


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _same_value(v: Any, text: str) -> bool:
    """A control's value against the text of a filter (numbers compared as numbers, words case-blind)."""
    if _is_number(v):
        try:
            return float(text) == float(v)
        except ValueError:
            return False
    return text.lower() in (_value_text(v).lower(), str(v).lower())


@dataclass
class _Row:
    rec: EvalRecord
    flat: dict[str, Any]
    scores: tuple[float, ...] | None  # None: failed (never ranked)
    cells: list[str] = field(default_factory=list)
    change: float | None = None  # relative change of the first objective against the baseline
    n_changed: int = 0


_Test = Callable[[_Row], bool]


def _rest_key(row: _Row) -> tuple[str, int]:
    return row.rec.status, row.rec.eval_id


def _parse_filter(text: str, objectives: Sequence[Objective], controls: set[str],
                  statuses: set[str]) -> tuple[list[tuple[str, _Test]], list[str]]:
    """The filter box's text as terms (all must hold) and the notes on terms it could not read (ignored).

    Terms are separated by commas: a status (``ok``; ``failed`` is every status but ok, unless a status has that
    name), ``name=value`` on a control (numbers compared as numbers), or ``name OP number`` with OP one of
    ``< <= > >= == !=`` on an objective (its raw value, in the objective's own unit), ``eval_id``/``generation``
    or a numeric control. Nothing is evaluated: a term is matched against this grammar only.
    """
    terms: list[tuple[str, _Test]] = []
    notes: list[str] = []
    for raw in (t.strip() for t in text.split(",")):
        if raw:
            test, note = _term(raw, [o.name for o in objectives], controls, statuses)
            terms += [(raw, test)] if test is not None else []
            notes += [note] if note else []
    return terms, notes


def _term(raw: str, names: list[str], controls: set[str], statuses: set[str]) -> tuple[_Test | None, str]:
    m = _TERM.match(raw)
    if m is None:
        word, known = raw.lower(), {s.lower() for s in statuses}
        if word == "failed" and word not in known:
            return (lambda r: r.rec.status != "ok"), ""
        note = "" if word in known else f"no row has status {raw!r} (statuses: {', '.join(sorted(statuses))})"
        return (lambda r: r.rec.status.lower() == word), note
    name, op, value = m.groups()
    get: Callable[[_Row], Any]
    if name in names:
        k = names.index(name)
        get = lambda r: None if r.scores is None else r.scores[k]  # noqa: E731
    elif name in _IDS:
        get = lambda r: getattr(r.rec, _IDS[name])  # noqa: E731
    elif name in controls:
        get = lambda r: r.flat.get(name)  # noqa: E731
        if op in ("=", "==", "!="):
            return (lambda r: name in r.flat and _same_value(r.flat[name], value) == (op != "!=")), ""
    else:
        return None, f"ignored {raw!r}: {name!r} is no objective ({', '.join(names)}), control or eval_id/generation"
    try:
        x, fn = float(value), _OPS[op]
    except ValueError:
        return None, f"ignored {raw!r}: `{name} {op} number` needs a number, got {value!r}; e.g. {name}<10"
    return (lambda r: _is_number(get(r)) and fn(get(r), x)), ""


class _RowCache:
    """The table's rows, built incrementally (records are append-only): each update formats only the new
    records, and keeps the front as front(old front + new points), which is exact."""

    def __init__(self, objectives: list[Objective]) -> None:
        self.objectives = objectives
        self.reset()

    def reset(self) -> None:
        self.n, self.last_id = 0, -1
        self.run: tuple[str, float] | None = None
        self.version = getattr(self, "version", 0) + 1  # bumped whenever rows already taken change
        self.rows: list[_Row] = []
        self.by_id: dict[int, _Row] = {}
        self.base: EvalRecord | None = None
        self.front: dict[int, np.ndarray] = {}
        self.controls: set[str] = set()
        self.statuses: set[str] = set()

    def add(self, results: Results) -> bool:
        """Take the new records of ``results``; True when anything changed."""
        recs = results.records
        run = (results.store_path, results.header.created_at)  # two runs can hold as many rows, numbered alike
        if run != self.run or len(recs) < self.n or (self.n and recs[self.n - 1].eval_id != self.last_id):
            self.reset()  # another run, or a reopened one
            self.run = run
        new = recs[self.n:]
        if not new:
            return False
        base = next((r for r in new if r.is_baseline), None)
        if base is not None and self.base is None:
            self.base = base
            for row in self.rows:  # the baseline came late (rare): the rows before it compare with it now
                self._format(row, results)
            self.version += 1
        sign = np.array([o.sign for o in self.objectives])
        fresh: dict[int, np.ndarray] = {}
        for r in new:
            ok = r.status == "ok" and r.scores is not None and len(r.scores) == len(self.objectives)
            row = _Row(r, dict(param_rows(r.params)), tuple(float(s) for s in r.scores or ()) if ok else None)
            self._format(row, results)
            self.rows.append(row)
            self.by_id[r.eval_id] = row
            self.controls.update(row.flat)
            self.statuses.add(r.status)
            if row.scores is not None:
                fresh[r.eval_id] = np.asarray(row.scores) * sign
        if fresh:
            cand = {**self.front, **fresh}
            keys = list(cand)
            keep = pareto_mask(np.vstack([cand[k] for k in keys]))
            self.front = {k: cand[k] for k, m in zip(keys, keep) if m}
        self.n, self.last_id = len(recs), recs[-1].eval_id
        return True

    def _format(self, row: _Row, results: Results) -> None:
        r, objs = row.rec, self.objectives
        base = self.base
        own = r.detail.get("baseline_scores") if isinstance(r.detail, dict) else None
        b_scores = (results.baseline_scores_of(r) if own is not None else
                    list(base.scores) if base is not None and base.status == "ok" and base.scores else None)
        first = row.scores[0] if row.scores is not None else None
        b0 = b_scores[0] if b_scores else None
        text = objs[0].change(first, b0) if objs else None
        row.change = None if text is None or first is None or not b0 else (first - b0) / abs(b0)
        bflat = dict(param_rows(base.params)) if base is not None else {}
        diff = [(k, v) for k, v in row.flat.items() if k not in bflat or bflat[k] != v]
        row.n_changed = len(diff)
        controls = ("(compiler defaults)" if r.is_baseline else
                    ", ".join(f"{k}={_value_text(v)}" for k, v in diff) or "(same as baseline)")
        scores = [o.format(s) for o, s in zip(objs, row.scores)] if row.scores is not None else ["-"] * len(objs)
        row.cells = [str(r.eval_id), str(r.generation), r.status + (" *" if r.is_baseline else ""), *scores,
                     (text or "-").replace(" vs baseline", "").replace("same as baseline", "same"), controls]


class EvaluationsTable:
    """A run's evaluations as a table: sortable (a column picker and a direction), filterable (a filter box
    and "front only"), paged (``page_size`` rows drawn at a time), linked to the plots.

    The rows are one ``w.Select`` (a single-selection list: a click is one ``value`` change, which JupyterLab
    delivers reliably), monospace, class ``compileiq-table-rows``. Picking a row calls ``on_select(eval_id)``;
    ``highlight(eval_id)`` selects a row from outside (the plots) without calling it. ``update(results)`` formats
    only the new records (records are append-only) and redraws the page only when its text changed.

    Args:
        objectives: The run's objectives (the columns after status; values shown with their unit).
        on_select: Called with the eval id of a picked row.
        page_size: Rows drawn per page.
        guard: Wraps each widget callback (the dashboard's: an exception becomes its error line).
    """

    def __init__(self, objectives: list[Objective], on_select: Callable[[int], None] | None = None,
                 page_size: int = 50, guard: Callable[[Callable[..., None]], Callable[..., None]] | None = None
                 ) -> None:
        if not objectives or page_size < 1:
            raise ConfigurationError(f"EvaluationsTable: `objectives non-empty and page_size >= 1` must hold, but "
                                     f"got {len(objectives)} objective(s) and page_size={page_size}. Pass the run's "
                                     "objectives and a positive page size.")
        guard = guard or (lambda fn: fn)
        self.objectives = list(objectives)
        self.on_select = on_select
        self.page_size = page_size
        self.selected: int | None = None
        self.page = 0
        self._cache = _RowCache(self.objectives)
        self._view: list[_Row] = []
        self._ranked: list[_Row] = []
        self._rest: list[_Row] = []
        self._taken = 0  # rows of the cache filtered and sorted so far
        self._made: tuple[int, list[str]] = (-1, [])  # (cache version, filter terms) the view was made with
        self._quiet = False
        self._page_ids: tuple[int, ...] = ()
        self._labels: tuple[str, ...] = ()
        #: What the filter box could not read (those terms are ignored), shown under the table.
        self.notes: list[str] = []
        first = self.objectives[0].name
        self.headers = ["eval", "gen", "status", *(o.name for o in self.objectives), f"{first} vs baseline",
                        "controls (vs baseline)"]
        keys = [("eval id", "eval_id"), ("generation", "generation"), ("status", "status"),
                *((o.name, f"objective:{i}") for i, o in enumerate(self.objectives)),
                (f"{first} vs baseline", "change"), ("controls changed", "controls")]
        self.sort_by = w.Dropdown(options=keys, value="eval_id", description="sort by", layout={"width": "240px"})
        self.descending = w.ToggleButton(value=False, description="ascending", icon="sort-amount-asc",
                                         tooltip="toggle ascending / descending", layout={"width": "130px"})
        self.filter = w.Text(placeholder=f"filter: ok, x=1.0, {first}<10 (commas: all must hold)",
                             description="filter", layout={"width": "360px"})
        self.front_only = w.Checkbox(value=False, description="front only", indent=False, layout={"width": "110px"})
        self.first_button, self.prev_button, self.next_button, self.last_button = (
            w.Button(icon=f"angle{icon}", tooltip=f"{name} page", layout={"width": "40px"}) for icon, name in
            (("-double-left", "first"), ("-left", "previous"), ("-right", "next"), ("-double-right", "last")))
        self.info = w.HTML()
        self.head = w.HTML()
        self.head.add_class("compileiq-table-head")
        self.rows = w.Select(options=[], rows=min(page_size, 20), layout={"width": "100%"})
        self.rows.add_class("compileiq-table-rows")
        for control in (self.sort_by, self.descending, self.front_only, self.filter):
            control.observe(guard(self._view_changed), names="value")
        for button, go in ((self.first_button, lambda: 0), (self.prev_button, lambda: self.page - 1),
                           (self.next_button, lambda: self.page + 1), (self.last_button, lambda: self.pages - 1)):
            button.on_click(guard(lambda _, go=go: self.show_page(go())))
        self.rows.observe(guard(self._picked), names="value")
        self.box = w.VBox([w.HTML(_CSS), w.HBox([self.sort_by, self.descending, self.filter, self.front_only]),
                           self.head, self.rows,
                           w.HBox([self.first_button, self.prev_button, self.next_button, self.last_button,
                                   self.info])])
        self.box.add_class("compileiq-table")
        self._render()

    # -- what is shown ---------------------------------------------------------------------------
    @property
    def pages(self) -> int:
        """How many pages the rows shown (after the filter) fill (at least 1)."""
        return max(1, math.ceil(len(self._view) / self.page_size))

    @property
    def shown_ids(self) -> list[int]:
        """The eval ids after filter and sort, in table order (all pages)."""
        return [r.rec.eval_id for r in self._view]

    @property
    def page_ids(self) -> list[int]:
        """The eval ids of the page drawn, top to bottom."""
        return list(self._page_ids)

    def update(self, results: Results) -> None:
        """Show ``results`` (a snapshot); cheap when only a few records are new. Keeps the page and the selection."""
        if self._cache.add(results):
            self._refilter(full=False)

    def highlight(self, eval_id: int | None) -> None:
        """Select the row of ``eval_id`` (its page drawn, the row marked); does not call ``on_select``. A row the
        filter hides stays selected but unmarked (the line under the table says so)."""
        self.selected = eval_id
        pos = next((i for i, r in enumerate(self._view) if r.rec.eval_id == eval_id), None)
        if pos is not None:
            self.page = pos // self.page_size
        self._render()

    def show_page(self, page: int) -> None:
        """Draw page ``page`` (0-based, clamped to the pages there are)."""
        self.page = page
        self._render()

    # -- internals -------------------------------------------------------------------------------
    def _view_changed(self, change: dict[str, Any]) -> None:
        self.descending.description = "descending" if self.descending.value else "ascending"
        self.descending.icon = "sort-amount-desc" if self.descending.value else "sort-amount-asc"
        self.page = 0
        self._refilter()

    def _refilter(self, full: bool = True) -> None:
        """Filter and sort the rows: all of them (``full``, or whenever the rows taken so far changed), else only the
        rows new since the last call, each put in its place by bisection (a few comparisons, no re-sort)."""
        c = self._cache
        terms, self.notes = _parse_filter(self.filter.value, self.objectives, c.controls, c.statuses)
        plan = [text for text, _ in terms]
        full = full or bool(self.front_only.value) or (c.version, plan) != self._made
        self._made = (c.version, plan)
        key, has_value = self._sort_key()
        rows: list[_Row] = c.rows[0 if full else self._taken:]
        self._taken = len(c.rows)
        if self.front_only.value:
            rows = [c.by_id[i] for i in sorted(c.front)]
        for _, test in terms:
            rows = [r for r in rows if test(r)]
        ranked = rows if has_value is None else [r for r in rows if has_value(r)]
        rest = [] if has_value is None else [r for r in rows if not has_value(r)]
        if full:
            self._ranked, self._rest = sorted(ranked, key=key), sorted(rest, key=_rest_key)
        else:  # keys end with the eval id: no ties, so this is the order a full sort gives
            for r in ranked:
                bisect.insort(self._ranked, r, key=key)
            for r in rest:
                bisect.insort(self._rest, r, key=_rest_key)
        self._view = (self._ranked[::-1] if self.descending.value else self._ranked) + self._rest
        self._render()

    def _sort_key(self) -> tuple[Callable[[_Row], Any], _Test | None]:
        """The sort key of the column picked and which rows have a value to rank (the others sort
        last; None: all)."""
        by = self.sort_by.value
        if by == "generation":
            return (lambda r: (r.rec.generation, r.rec.eval_id)), None
        if by == "status":
            return (lambda r: (r.rec.status != "ok", r.rec.status, r.rec.eval_id)), None
        if by == "controls":
            return (lambda r: (r.n_changed, r.cells[-1], r.rec.eval_id)), None
        if by == "change":
            return (lambda r: (r.change, r.rec.eval_id)), (lambda r: r.change is not None)
        if by.startswith("objective:"):
            k = int(by.split(":")[1])
            return (lambda r: (r.scores[k] if r.scores else 0.0, r.rec.eval_id)), (lambda r: r.scores is not None)
        return (lambda r: r.rec.eval_id), None

    def _render(self) -> None:
        self.page = min(max(0, self.page), self.pages - 1)
        start = self.page * self.page_size
        page = self._view[start:start + self.page_size]
        widths = [max([len(h), *(len(r.cells[i]) for r in page)]) for i, h in enumerate(self.headers[:-1])]
        labels = tuple(_NBSP.join(c.ljust(wd, _NBSP) for c, wd in zip(r.cells, [*widths, 0])) for r in page)
        ids = tuple(r.rec.eval_id for r in page)
        head = "<pre>" + html.escape(" ".join(h.ljust(wd) for h, wd in zip(self.headers, [*widths, 0]))) + "</pre>"
        if self.head.value != head:
            self.head.value = head
        index = ids.index(self.selected) if self.selected in ids else None
        self._quiet = True
        try:
            if labels != self._labels or ids != self._page_ids:
                self.rows.index = None  # new options select nothing (not their first row)
                self.rows.options = list(zip(labels, ids))
                self._labels, self._page_ids = labels, ids
            if self.rows.index != index:
                self.rows.index = index
        finally:
            self._quiet = False
        total = len(self._cache.rows)
        span = f"rows {start + 1}-{start + len(page)} of {len(self._view)}" if page else "no rows"
        hidden = (f"; eval {self.selected} is selected but not shown here"
                  if self.selected is not None and index is None else "")
        notes = "".join(f"<br><span style='color:#b00'>{html.escape(n)}</span>" for n in self.notes)
        info = (f"{span}{f' (filtered from {total})' if len(self._view) != total else ''}, page {self.page + 1}/"
                f"{self.pages}{html.escape(hidden)}{notes}")
        if self.info.value != info:
            self.info.value = info
        self.first_button.disabled = self.prev_button.disabled = self.page == 0
        self.next_button.disabled = self.last_button.disabled = self.page >= self.pages - 1

    def _picked(self, change: dict[str, Any]) -> None:
        if self._quiet or change["new"] is None:
            return
        self.selected = int(change["new"])
        if self.on_select is not None:
            self.on_select(self.selected)
