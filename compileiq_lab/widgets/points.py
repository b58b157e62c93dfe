"""The live scatter's points, built incrementally: compact hover text, the exact front, the front of two axes."""

from __future__ import annotations

import html
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from compileiq_lab.kernels import Objective
from compileiq_lab.search.pareto import pareto_mask
from compileiq_lab.viz.data import failure_text, param_rows

if TYPE_CHECKING:
    from compileiq_lab.store.results import Results
    from compileiq_lab.store.sqlite import EvalRecord

__all__ = ["HOVER_CONTROLS", "PointCache", "compact_hover", "distinct_count", "front_2d"]

#: Controls listed in a point's hover (those that differ from the baseline); the rest is "+N more".
HOVER_CONTROLS = 4


def compact_hover(r: EvalRecord, objectives: list[Objective], baseline: Mapping[str, Any] | None) -> str:
    """A point's hover: its id, its objectives with units, and only the controls that differ from the baseline's
    (at most ``HOVER_CONTROLS``; the detail panel shows everything), so the box never covers the plot."""
    head = f"<b>eval {r.eval_id}</b> (gen {r.generation}){' baseline' if r.is_baseline else ''}"
    scores = "<br>".join(html.escape(f"{o.name} = {o.format(s)}", quote=False)
                         for o, s in zip(objectives, r.scores or []))
    mine, base = dict(param_rows(r.params)), dict(param_rows(baseline or {}))
    changed = [(k, v) for k, v in sorted(mine.items()) if base.get(k, _ABSENT) != v]
    changed += [(k, "(default)") for k in sorted(set(base) - set(mine))]
    if not changed:
        lines = "same controls as the baseline" if not r.is_baseline else "the compiler defaults"
    else:
        lines = "<br>".join(html.escape(f"{k}={v}", quote=False) for k, v in changed[:HOVER_CONTROLS])
        if len(changed) > HOVER_CONTROLS:
            lines += f"<br>+{len(changed) - HOVER_CONTROLS} more (click for all)"
    return f"{head}<br>{scores}<br><i>{lines}</i>"


_ABSENT = object()


def front_2d(xs: np.ndarray, ys: np.ndarray, sx: float, sy: float) -> np.ndarray:
    """Indices of the points no other point beats on both shown axes (``sx``, ``sy``: +1 minimise, -1 maximise),
    sorted along x: the staircase of the two axes shown, O(n log n). Of identical points the first is kept."""
    a, b = np.asarray(xs, dtype=float) * sx, np.asarray(ys, dtype=float) * sy
    finite = np.flatnonzero(np.isfinite(a) & np.isfinite(b))  # a point without both scores is never on a front
    if not len(finite):
        return np.zeros(0, dtype=int)
    a, b = a[finite], b[finite]
    order = np.lexsort((b, a))
    best = np.minimum.accumulate(b[order])
    keep = np.r_[True, b[order][1:] < best[:-1]]
    return finite[order[keep]]


class PointCache:
    """The run's points, built incrementally: records are append-only, so each update only reads the new
    ones (hover text included), and the front is kept as front(old front + new points), which is exact:
    a dominated point never returns to the front."""

    def __init__(self, objectives: list[Objective]) -> None:
        self.objectives = objectives
        self.reset()

    def reset(self) -> None:
        self.n, self.last_id = 0, -1
        self.ok_ids: list[int] = []
        self.ok_gen: list[int] = []
        self.ok_text: list[str] = []
        self.failed_ids: list[int] = []
        self.failed_text: list[str] = []
        self.baseline_index: int | None = None
        self.baseline_params: dict[str, Any] | None = None
        self.front: dict[int, np.ndarray] = {}
        self._rows: list[np.ndarray] = []
        self._scores = np.empty((0, len(self.objectives)))

    def scores(self) -> np.ndarray:
        if self._rows:
            self._scores = np.vstack([self._scores, *self._rows])
            self._rows = []
        return self._scores

    def add(self, results: Results) -> PointCache:
        recs = results.records
        if len(recs) < self.n or (self.n and recs[self.n - 1].eval_id != self.last_id):
            self.reset()  # another run, or a reopened one
        new = recs[self.n:]
        sign = np.array([o.sign for o in results.objectives])
        fresh: dict[int, np.ndarray] = {}
        for r in new:
            if r.is_baseline:
                self.baseline_params = dict(r.params)
            if r.status == "ok" and r.scores is not None:
                row = np.asarray(r.scores, dtype=float)
                if r.is_baseline:
                    self.baseline_index = len(self.ok_ids)
                self.ok_ids.append(r.eval_id)
                self.ok_gen.append(r.generation)
                self.ok_text.append(compact_hover(r, self.objectives, self.baseline_params))
                self._rows.append(row[None, :])
                fresh[r.eval_id] = row
            else:
                self.failed_ids.append(r.eval_id)
                self.failed_text.append(failure_text(r))
        if fresh:
            cand = {**self.front, **fresh}
            keys = list(cand)
            keep = pareto_mask(np.vstack([cand[k] for k in keys]) * sign)
            self.front = {k: cand[k] for k, m in zip(keys, keep) if m}
        if recs:
            self.n, self.last_id = len(recs), recs[-1].eval_id
        return self


def distinct_count(points: list[tuple[float, ...]]) -> str:
    """How many distinct score vectors ``points`` holds, with the points that repeat one ("3 (+5 with the same
    scores)"), as ``show`` counts a front."""
    n = len(set(points))
    return f"{n} (+{len(points) - n} with the same scores)" if len(points) > n else str(n)
