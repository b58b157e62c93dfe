"""DetailPanel: one evaluation in full (controls, measurements vs the baseline, failure), and its export."""

from __future__ import annotations

import html
import json
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

import ipywidgets as w

from compileiq_lab.acf.export import effective_params, point_acf
from compileiq_lab.exceptions import ConfigurationError
from compileiq_lab.kernels import minimal_controls
from compileiq_lab.viz.data import param_rows, quantity_text

if TYPE_CHECKING:
    from compileiq_lab.kernels import KernelRun
    from compileiq_lab.store.results import Results

__all__ = ["DetailPanel", "describe", "export_point"]

log = logging.getLogger(__name__)


def _fmt(v: Any) -> str:
    return f"{v:.6g}" if isinstance(v, float) else html.escape(json.dumps(v) if not isinstance(v, str) else v)


def describe(results: Results, eval_id: int, kernel_run: KernelRun | None = None) -> str:
    """HTML for one evaluation: status, controls set (everything else is the compiler default),
    the argv for kernel runs, objectives (with units) and their change vs the baseline, the points it stands for,
    every measurement with its unit, and the error of a failure."""
    rec = results.record(eval_id)
    if rec is None:
        return f"<i>no evaluation {eval_id} in this run</i>"
    base = results.baseline_record
    base = base if base is not None and base.status == "ok" else None
    parts = [f"<b>eval {rec.eval_id}</b> (generation {rec.generation}{', baseline' if rec.is_baseline else ''}): "
             f"<b>{html.escape(rec.status)}</b>"]
    rows = "".join(f"<tr><td><code>{html.escape(k)}</code></td><td>{_fmt(v)}</td></tr>"
                   for k, v in param_rows(rec.params))
    parts.append("<div>controls changed from the defaults:</div>" + (f"<table>{rows}</table>" if rows
                                                                     else "<div><i>none (compiler defaults)</i></div>"))
    if kernel_run is not None:
        argv = kernel_run.argv(rec.params)
        parts.append("<div>arguments: " + " ".join(f"<code>{html.escape(a)}</code>" for v in argv.values() for a in v)
                     + "</div>")
    if rec.scores is not None:
        cells = []
        for k, objective in enumerate(results.objectives):
            change = objective.change(rec.scores[k], base.scores[k] if base and base.scores else None)
            note = f" &nbsp;({html.escape(change)})" if change and not rec.is_baseline else ""
            cells.append(f"<tr><td>{html.escape(objective.label)}</td>"
                         f"<td>{html.escape(objective.format(rec.scores[k]))}{note}</td></tr>")
        parts.append(f"<table>{''.join(cells)}</table>")
        same = results.identical_to(rec)
        if same:
            ids = ", ".join(str(r.eval_id) for r in same[:8]) + (" ..." if len(same) > 8 else "")
            parts.append(f"<div>{len(same)} other config(s) scored exactly the same (eval {ids}); this one "
                         "stands for them (fewest controls set, then the earliest)</div>")
    parts.append(_validation_html(results, eval_id))
    metrics = rec.detail.get("metrics") if isinstance(rec.detail, dict) else None
    if metrics:
        parts.append("<details><summary>all measurements</summary><table>" + "".join(
            f"<tr><td>{html.escape(k)}</td><td>{html.escape(quantity_text(k, v))}</td></tr>"
            for k, v in sorted(metrics.items()))
            + "</table></details>")
    if rec.status != "ok":
        parts.append(f"<pre style='white-space:pre-wrap;color:#b00'>{html.escape(rec.error[-2000:])}</pre>")
    return "".join(parts)


def _runtime_change(speedup: float) -> str:
    """A runtime speedup (baseline / point) as a change with its sense."""
    pct = 100.0 * (1.0 / speedup - 1.0)
    return f"{pct:+.1f} % vs baseline, {'better' if pct < 0 else 'worse' if pct > 0 else 'the same'}"


def _validation_html(results: Results, eval_id: int) -> str:
    """The point's re-measured speedup (and per workload), with a warning when it loses somewhere."""
    v = results.validation
    row = v.row(eval_id) if v is not None else None
    if v is None or row is None:
        return ""
    lines = [f"re-measured: runtime {_runtime_change(row['speedup'])} (speedup {row['speedup']:.4f}x, 95 % CI "
             f"[{row['low']:.4f}, {row['high']:.4f}]; {'a win' if row['win'] else 'not a win'}, {v.rounds} "
             "interleaved rounds)"]
    for name, e in (row.get("workloads") or {}).items():
        lines.append(f"workload {html.escape(name)}: " + (html.escape(e["error"]) if "error" in e else
                     f"{e['speedup']:.4f}x [{e['low']:.4f}, {e['high']:.4f}]"))
    warn = ("<div style='color:#b00'><b>warning: wins on the tuning workload but loses on another</b></div>"
            if row.get("mixed") else "")
    return warn + "<div>" + "<br>".join(lines) + "</div>"


def export_point(results: Results, eval_id: int, kernel_run: KernelRun | None = None,
                 path: str | Path | None = None, folder: str | Path = ".", minimize: bool = True) -> Path:
    """Write one successful evaluation: an ACF for kernel runs, else the point as JSON. Returns its full path.

    Args:
        results: The run.
        eval_id: The evaluation.
        kernel_run: The run's KernelRun (an ACF), or None (JSON).
        path: The file; a relative one is taken inside ``folder`` (default: ``<kernel>-eval<N>.acf``).
        folder: Where files go (created if missing).
        minimize: Write the smallest control set that compiles to the same machine code (``minimal_controls``;
            the ACF's ``dropped`` says what was left out and why), as ``compileiq-lab export`` does; where it
            cannot be minimised (no compiler here) the point is written as it was, with a log warning.

    Raises:
        ConfigurationError: The evaluation does not exist or failed.
    """
    rec = results.record(eval_id)
    if rec is None or rec.status != "ok":
        raise ConfigurationError(f"export needs a successful evaluation, but eval {eval_id} is "
                                 f"{rec.status if rec else 'not in this run'}; click a point that succeeded")
    default = f"{kernel_run.kernel.name}-eval{eval_id}.acf" if kernel_run is not None else f"point-eval{eval_id}.json"
    out = (Path(folder) / Path(path or default)).resolve()
    out.parent.mkdir(parents=True, exist_ok=True)
    if kernel_run is not None:
        meta = results.header.kernel or kernel_run.metadata()
        controls, dropped = effective_params(rec), {}
        if minimize:
            try:
                minimal = minimal_controls(kernel_run, controls, rec.detail.get("ignored_controls") or {})
                controls, dropped = minimal.controls, minimal.dropped
            except ConfigurationError as exc:
                log.warning("eval %d is exported as it was, not minimised: %s", eval_id, str(exc)[:300])
        point_acf(results, rec, kernel_run.kernel, kernel_run.catalog, meta, controls=controls, dropped=dropped,
                  acf_name=Path(out).name).write(out)
        return out
    out.write_text(json.dumps({"eval_id": eval_id, "params": rec.params, "status": rec.status,
                               "objectives": dict(zip(results.objective_names, rec.scores or [])),
                               "store": results.store_path}, indent=2, sort_keys=True) + "\n")
    return out


class DetailPanel:
    """The clicked point and its Export button."""

    _EMPTY = "<i>click a point to see its controls and measurements</i>"

    def __init__(self) -> None:
        self.html = w.HTML(self._EMPTY)
        self.html.add_class("compileiq-detail")
        self.path = w.Text(placeholder="file name (default: <kernel>-eval<N>.acf)", layout={"width": "320px"})
        self.export_button = w.Button(description="Export ACF", icon="download", disabled=True)
        self.message = w.HTML()
        self.eval_id: int | None = None
        self.box = w.VBox([self.html, w.HBox([self.export_button, self.path]), self.message],
                          layout={"border": "1px solid #ddd", "padding": "6px"})

    def clear(self) -> None:
        """Forget the shown point (a new run started): nothing to export until a point is clicked."""
        self.eval_id = None
        self.html.value = self._EMPTY
        self.export_button.disabled = True
        self.message.value = ""

    def show(self, results: Results, eval_id: int, kernel_run: KernelRun | None) -> None:
        self.eval_id = eval_id
        self.html.value = describe(results, eval_id, kernel_run)
        rec = results.record(eval_id)
        self.export_button.disabled = rec is None or rec.status != "ok"
        self.export_button.description = "Export ACF" if kernel_run is not None else "Export JSON"
        self.message.value = ""
