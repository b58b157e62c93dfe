"""Plot data from Results as plain lists and dicts: no plotly, testable without a browser."""

from __future__ import annotations

import html
import json
import math
import re
import statistics
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from compileiq_lab.analysis.table import control_columns, ok_records
from compileiq_lab.exceptions import ConfigurationError
from compileiq_lab.space.objectives import Objective, format_quantity, unit_of
from compileiq_lab.space.space import flatten_params

if TYPE_CHECKING:
    from compileiq_lab.store.results import Results
    from compileiq_lab.store.sqlite import EvalRecord

__all__ = [
    "failure_groups",
    "failure_message",
    "failure_summary",
    "failure_text",
    "front_table",
    "history_data",
    "hover_text",
    "parallel_data",
    "param_rows",
    "params_text",
    "pareto_data",
    "quantity_text",
    "single_runtimes",
]

_MAX_EXAMPLES = 3


# -- helpers ---------------------------------------------------------------------------------
def param_rows(params: Mapping[str, Any]) -> list[tuple[str, Any]]:
    """A config's controls as (dotted name, value) pairs, sorted by name (nested groups flattened)."""
    return sorted(flatten_params(params).items())


def params_text(params: Mapping[str, Any], sep: str = "<br>") -> str:
    """Params as HTML-escaped ``name=value`` lines (``(compiler defaults)`` for an empty config).

    Args:
        params: A config dict, possibly nested.
        sep: Line separator (``<br>`` for plotly hover text).
    """
    flat = flatten_params(params)
    if not flat:
        return "(compiler defaults)"
    return sep.join(html.escape(f"{k}={_fmt(v)}") for k, v in sorted(flat.items()))


def single_runtimes(results: Results) -> bool:
    """Whether the run's runtimes are the search's single measurements, never re-measured (``validate`` re-measures a
    kernel run's front)."""
    return results.validation is None and "runtime" in results.objective_names and results.header.kernel is not None


def quantity_text(name: str, value: Any) -> str:
    """A measurement by name with its unit (a standard metric's, else by the name's suffix: ``_s``, ``_ms``,
    ``_bytes``, ...), times in the fitting one of s/ms/µs/ns."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return str(value)
    return format_quantity(value, unit_of(name))


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.6g}"
    return value if isinstance(value, str) else json.dumps(value, default=str)


def _front_ids(results: Results) -> set[int]:
    return {int(row["eval_id"]) for row in results.pareto_front()}


def _ok_baseline(results: Results) -> EvalRecord | None:
    for r in results.records:
        if r.is_baseline:
            return r if r.status == "ok" and r.scores is not None else None
    return None


def hover_text(r: EvalRecord, objectives: Sequence[Objective]) -> str:
    """Hover text of one evaluation: id, generation, scores with their units and params (HTML-escaped)."""
    head = f"eval {r.eval_id} (generation {r.generation}){' baseline' if r.is_baseline else ''}"
    scores = "<br>".join(html.escape(f"{o.name} = {o.format(s)}") for o, s in zip(objectives, r.scores or []))
    return f"{head}<br>{scores}<br>{params_text(r.params)}"


# -- Pareto ----------------------------------------------------------------------------------
def pareto_data(results: Results, x: int | str = 0, y: int | str = 1) -> dict[str, Any]:
    """Scatter data for objective ``x`` against objective ``y``.

    With one objective, ``y`` is ignored and the y axis is the evaluation id
    (``y_kind == "eval_id"``); otherwise ``y_kind == "objective"``.

    Args:
        results: The run.
        x: Objective index or name for the x axis.
        y: Objective index or name for the y axis (must differ from ``x``).

    Returns:
        A dict with ``x_name``, ``y_name``, ``x_label``, ``y_label`` (name, unit and direction in words),
        ``x_index``, ``y_index`` (None for one objective),
        ``y_kind``, ``points`` (lists x, y, eval_id, generation, on_front, is_baseline, text),
        ``front`` (x, y, eval_id sorted by x), ``failed`` (eval_id, generation, status, error,
        text) and ``baseline`` ({x, y, eval_id} or None when it did not succeed).
    """
    xi = results.objective_index(x)
    single = results.n_objectives == 1
    yi = None if single else results.objective_index(y)
    if yi == xi:
        raise ConfigurationError(f"x and y are the same objective ({results.objective_names[xi]!r})")
    names = results.objective_names
    front = _front_ids(results)

    def yval(r: EvalRecord) -> float:
        return float(r.eval_id) if yi is None else float(r.scores[yi])  # type: ignore[index]

    ok = ok_records(results)
    points: dict[str, list[Any]] = {
        "x": [float(r.scores[xi]) for r in ok], "y": [yval(r) for r in ok],  # type: ignore[index]
        "eval_id": [r.eval_id for r in ok], "generation": [r.generation for r in ok],
        "on_front": [r.eval_id in front for r in ok], "is_baseline": [r.is_baseline for r in ok],
        "text": [hover_text(r, results.objectives) for r in ok]}
    fr = sorted((p for p in zip(points["x"], points["y"], points["eval_id"], points["on_front"]) if p[3]),
                key=lambda p: (p[0], p[1]))
    base = _ok_baseline(results)
    return {
        "x_index": xi, "y_index": yi, "x_name": names[xi],
        "y_name": "evaluation" if yi is None else names[yi],
        "x_label": results.objectives[xi].label,
        "y_label": "evaluation id" if yi is None else results.objectives[yi].label,
        "y_kind": "eval_id" if yi is None else "objective",
        "x_direction": results.directions[xi],
        "y_direction": None if yi is None else results.directions[yi],
        "points": points,
        "front": {"x": [p[0] for p in fr], "y": [p[1] for p in fr], "eval_id": [p[2] for p in fr]},
        "failed": _failed_points(results),
        "baseline": None if base is None else {"x": float(base.scores[xi]), "y": yval(base),  # type: ignore[index]
                                               "eval_id": base.eval_id},
    }


def _failed_points(results: Results) -> dict[str, list[Any]]:
    bad = [r for r in results.records if not (r.status == "ok" and r.scores is not None)]
    return {
        "eval_id": [r.eval_id for r in bad], "generation": [r.generation for r in bad],
        "status": [r.status for r in bad], "error": [r.error_line for r in bad],
        "text": [failure_text(r) for r in bad]}


def failure_text(r: EvalRecord) -> str:
    """Hover text of a failed evaluation: id, generation, status, the error's first line and params (HTML-escaped)."""
    return (f"eval {r.eval_id} (generation {r.generation}): {html.escape(r.status)}<br>"
            f"{html.escape(r.error_line)}<br>{params_text(r.params)}")


# -- convergence -----------------------------------------------------------------------------
def history_data(results: Results) -> dict[str, Any]:
    """Per generation: best-so-far and median of the generation's ok scores, failures by status.

    Args:
        results: The run.

    Returns:
        A dict with ``generations`` (sorted), ``evaluations`` and ``ok`` (counts per generation),
        ``objectives`` (per objective: name, direction, label, ``best_so_far``, ``best`` and ``median``
        lists aligned with ``generations``; None where no value exists yet) and ``failures``
        (status -> counts per generation).
    """
    gens = sorted({r.generation for r in results.records})
    pos = {g: i for i, g in enumerate(gens)}
    n = len(gens)
    evaluations, ok_counts = [0] * n, [0] * n
    failures: dict[str, list[int]] = {}
    per_gen: list[list[list[float]]] = [[[] for _ in gens] for _ in range(results.n_objectives)]
    for r in results.records:
        i = pos[r.generation]
        evaluations[i] += 1
        if r.status == "ok" and r.scores is not None:
            ok_counts[i] += 1
            for k in range(results.n_objectives):
                per_gen[k][i].append(float(r.scores[k]))
        else:
            failures.setdefault(r.status, [0] * n)[i] += 1
    objectives = [_objective_history(results.objectives[k], per_gen[k]) for k in range(results.n_objectives)]
    return {"generations": gens, "evaluations": evaluations, "ok": ok_counts,
            "objectives": objectives, "failures": dict(sorted(failures.items()))}


def _objective_history(objective: Objective, per_gen: list[list[float]]) -> dict[str, Any]:
    pick = min if objective.direction == "min" else max
    best_so_far: list[float | None] = []
    running: float | None = None
    for values in per_gen:
        if values:
            running = pick(values) if running is None else pick(running, *values)
        best_so_far.append(running)
    return {"name": objective.name, "direction": objective.direction, "label": objective.label,
            "best_so_far": best_so_far,
            "best": [pick(v) if v else None for v in per_gen],
            "median": [float(statistics.median(v)) if v else None for v in per_gen]}


# -- parallel coordinates --------------------------------------------------------------------
def parallel_data(results: Results) -> dict[str, Any]:
    """One row per ok evaluation: every control (dotted names) and every objective.

    A control absent from a config (knocked out: the compiler default) reads ``"default"``.
    A control whose values are all numbers is ``"numeric"``; any other is ``"categorical"``,
    with integer ``values`` indexing its ``labels`` (``"default"`` first, then sorted).

    Args:
        results: The run.

    Returns:
        A dict with ``eval_id``, ``generation`` and ``on_front`` lists and ``columns``: a list of
        {name, kind ("control"/"objective"), type, values, labels (categorical only), raw}.
    """
    ok = ok_records(results)
    front = _front_ids(results)
    columns = control_columns(results)
    for k, obj in enumerate(results.objective_names):
        columns.append({"name": obj, "kind": "objective", "type": "numeric",
                        "direction": results.directions[k],
                        "values": [float(r.scores[k]) for r in ok], "raw": None})  # type: ignore[index]
    return {"eval_id": [r.eval_id for r in ok], "generation": [r.generation for r in ok],
            "on_front": [r.eval_id in front for r in ok], "columns": columns}


# -- tables ----------------------------------------------------------------------------------
def front_table(results: Results) -> list[dict[str, Any]]:
    """The Pareto front as rows, identical points folded (``Results.distinct_front``), best first on the
    first objective.

    Args:
        results: The run.

    Returns:
        Rows with eval_id (the representative of its identical points), generation, is_baseline,
        ``same`` (how many other evaluations share its scores), ``objectives`` (name -> value),
        ``changes`` (name -> e.g. "-19 % vs baseline, better"; None without an ok baseline) and ``params``.
    """
    base = _ok_baseline(results)
    names = results.objective_names
    base_scores = [float(v) for v in base.scores or []] if base is not None else None
    rows: list[dict[str, Any]] = []
    for rec, same in results.distinct_front():
        scores = [float(v) for v in rec.scores or []]
        rows.append({
            "eval_id": rec.eval_id, "generation": rec.generation, "is_baseline": rec.is_baseline, "same": same,
            "objectives": dict(zip(names, scores)),
            "changes": {o.name: o.change(s, None if base_scores is None else base_scores[k])
                        for k, (o, s) in enumerate(zip(results.objectives, scores))},
            "params": rec.params})
    sign = results.objectives[0].sign
    rows.sort(key=lambda r: (sign * r["objectives"][names[0]], r["eval_id"]))
    return rows


def failure_summary(results: Results) -> list[dict[str, Any]]:
    """Failed evaluations grouped by status, most frequent first.

    Args:
        results: The run.

    Returns:
        Rows with ``status``, ``count`` and ``examples`` (up to 3 {eval_id, error}, the
        error's first line, earliest first).
    """
    groups: dict[str, list[EvalRecord]] = {}
    for r in results.records:
        if r.status != "ok":
            groups.setdefault(r.status, []).append(r)
    rows: list[dict[str, Any]] = [{"status": status, "count": len(recs),
             "examples": [{"eval_id": r.eval_id, "error": r.error_line} for r in recs[:_MAX_EXAMPLES]]}
            for status, recs in groups.items()]
    rows.sort(key=lambda row: (-row["count"], row["status"]))
    return rows


# -- failures as a view ----------------------------------------------------------------------
#: How a knocked-out control (absent from a config: the compiler default) reads in ``failure_groups``.
_ABSENT = "(default)"
_PART = r"[^\s/\\:'\"()<>,;]+"
_PATH = re.compile(rf"(?<![\w/.<])(?:(?:[A-Za-z]:[\\/]|~/|\.{{1,2}}/)(?:{_PART}[/\\])*|/(?:{_PART}/)+)({_PART})")
_NOISE = ((re.compile(r"0x[0-9a-fA-F]+"), "0x…"),                                       # addresses, hex values
          (re.compile(r"\b(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{8,}\b"), "…"),       # digests in file names
          (re.compile(r"\btmp(?=\w*[\d_])\w{6,}"), "tmp…"), (re.compile(r"\s+"), " "))   # temp names, spacing
_SKIP = re.compile(r"^(?:[\W_]*|traceback \(most recent call last\):|in file included from .*)$", re.IGNORECASE)


def failure_message(error: str) -> str:
    """The first meaningful line of an error (a traceback's last), with file paths cut to their file name and
    hex numbers, addresses, digests and temp names blanked, so one compiler error reads the same for every
    candidate; ``(no message)`` for an empty error."""
    lines = [line.strip() for line in error.splitlines() if not _SKIP.match(line.strip())]
    if not lines:
        return "(no message)"
    line = _PATH.sub(lambda m: m.group(1), lines[-1] if error.lstrip().startswith("Traceback") else lines[0])
    for pattern, replacement in _NOISE:
        line = pattern.sub(replacement, line)
    return line.strip()


def failure_groups(results: Results, top: int = 3) -> list[dict[str, Any]]:
    """Failed evaluations grouped by status, most frequent first (then by status), with what they have in common.

    Controls are dotted names; a control absent from a config (knocked out) has the value ``"(default)"``.
    ``shared`` and ``suspects`` read the group's searched failures (a failed baseline counts in ``count`` and
    ``eval_ids`` and sets ``baseline``, but its all-default config would hide every shared control).

    Args:
        results: The run.
        top: How many messages and suspects to keep per group.

    Returns:
        One dict per failing status: ``status``, ``count``, ``eval_ids`` (sorted), ``baseline`` (the baseline is
        among them), ``messages`` ([(``failure_message`` line, count)], the ``top`` most frequent), ``shared``
        ({control: value} set identically in every failed config; ``"(default)"`` only for a control absent from
        all of them and set in some successful config) and ``suspects`` ([(control, value, failed_with, ok_with)]:
        values in at least 2 of the group's failures whose share there most exceeds their share among the
        successful evaluations; ``top`` of them, the most over-represented first).
    """
    ok = [flatten_params(r.params) for r in ok_records(results)]
    groups: dict[str, list[EvalRecord]] = {}
    for r in results.records:
        if r.status != "ok":
            groups.setdefault(r.status, []).append(r)
    ok_names = {name for flat in ok for name in flat}
    names = sorted(ok_names | {name for r in results.records if r.status != "ok" for name in flatten_params(r.params)})
    ok_counts = _value_counts(ok, names)
    out: list[dict[str, Any]] = []
    for status, recs in groups.items():
        searched = [flatten_params(r.params) for r in recs if not r.is_baseline]
        messages = Counter(failure_message(r.error) for r in recs)
        out.append({"status": status, "count": len(recs), "eval_ids": sorted(r.eval_id for r in recs),
                    "baseline": any(r.is_baseline for r in recs),
                    "messages": sorted(messages.items(), key=lambda kv: (-kv[1], kv[0]))[:top],
                    "shared": _shared(searched, names, ok_names),
                    "suspects": _suspects(searched, names, ok_counts, len(ok), top)})
    out.sort(key=lambda g: (-g["count"], g["status"]))
    return out


def _value_key(flat: Mapping[str, Any], name: str) -> str | None:
    return json.dumps(flat[name], sort_keys=True, default=str) if name in flat else None


def _value_counts(flats: list[dict[str, Any]], names: list[str]) -> Counter[tuple[str, str | None]]:
    return Counter((name, _value_key(flat, name)) for flat in flats for name in names)


def _shared(searched: list[dict[str, Any]], names: list[str], ok_names: set[str]) -> dict[str, Any]:
    shared: dict[str, Any] = {}
    for name in names if searched else []:
        keys = {_value_key(flat, name) for flat in searched}
        if keys == {None}:
            if name in ok_names:
                shared[name] = _ABSENT
        elif len(keys) == 1:
            shared[name] = searched[0][name]
    return shared


def _suspects(searched: list[dict[str, Any]], names: list[str], ok_counts: Counter[tuple[str, str | None]],
              n_ok: int, top: int) -> list[tuple[str, Any, int, int]]:
    values = {(name, _value_key(flat, name)): value for flat in searched for name, value in flat.items()}
    rows: list[tuple[float, str, str, int, int]] = []
    for (name, key), failed_with in _value_counts(searched, names).items():
        ok_with = ok_counts.get((name, key), 0)
        ratio = (failed_with / len(searched)) / (ok_with / n_ok) if ok_with else math.inf
        if failed_with >= 2 and ratio > 1:
            rows.append((ratio, name, key or "", failed_with, ok_with))
    rows.sort(key=lambda row: (-row[0], -row[3], row[1], row[2]))
    return [(name, values[(name, key)] if key else _ABSENT, failed_with, ok_with)
            for _, name, key, failed_with, ok_with in rows[:top]]
