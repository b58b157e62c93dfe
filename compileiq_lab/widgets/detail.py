"""DetailPanel: one evaluation in full (controls vs the defaults, measurements, speedups, failure), and its export."""

from __future__ import annotations

import html
import json
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

import ipywidgets as w

from compileiq_lab.acf.export import point_acf
from compileiq_lab.exceptions import ConfigurationError
from compileiq_lab.viz.data import param_rows, speedup

if TYPE_CHECKING:
    from compileiq_lab.kernels import KernelRun
    from compileiq_lab.store.results import Results

__all__ = ["DetailPanel", "describe", "export_point"]


def _fmt(v: Any) -> str:
    return f"{v:.6g}" if isinstance(v, float) else html.escape(json.dumps(v) if not isinstance(v, str) else v)


def describe(results: Results, eval_id: int, kernel_run: KernelRun | None = None) -> str:
    """HTML for one evaluation: status, controls set (everything else is the compiler default),
    the argv for kernel runs, objectives with speedups over the baseline, metrics, and the error of a failure."""
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
        for k, (name, direction) in enumerate(zip(results.objective_names, results.directions)):
            s = speedup(rec.scores[k], base.scores[k] if base and base.scores else None, direction)
            ratio = "" if s is None or not math.isfinite(s) else f" &nbsp;({s:.4f}x the baseline)"
            cells.append(f"<tr><td>{html.escape(name)} ({direction})</td><td>{rec.scores[k]:.6g}{ratio}</td></tr>")
        parts.append(f"<table>{''.join(cells)}</table>")
    parts.append(_validation_html(results, eval_id))
    metrics = rec.detail.get("metrics") if isinstance(rec.detail, dict) else None
    if metrics:
        parts.append("<details><summary>all measurements</summary><table>" + "".join(
            f"<tr><td>{html.escape(k)}</td><td>{_fmt(v)}</td></tr>" for k, v in sorted(metrics.items()))
            + "</table></details>")
    if rec.status != "ok":
        parts.append(f"<pre style='white-space:pre-wrap;color:#b00'>{html.escape(rec.error[-2000:])}</pre>")
    return "".join(parts)


def _validation_html(results: Results, eval_id: int) -> str:
    """The point's re-measured speedup (and per workload), with a warning when it loses somewhere."""
    v = results.validation
    row = v.row(eval_id) if v is not None else None
    if v is None or row is None:
        return ""
    lines = [f"re-measured: {row['speedup']:.4f}x [{row['low']:.4f}, {row['high']:.4f}] "
             f"({'a win' if row['win'] else 'not a win'}, {v.rounds} interleaved rounds)"]
    for name, e in (row.get("workloads") or {}).items():
        lines.append(f"workload {html.escape(name)}: " + (html.escape(e["error"]) if "error" in e else
                     f"{e['speedup']:.4f}x [{e['low']:.4f}, {e['high']:.4f}]"))
    warn = ("<div style='color:#b00'><b>warning: wins on the tuning workload but loses on another</b></div>"
            if row.get("mixed") else "")
    return warn + "<div>" + "<br>".join(lines) + "</div>"


def export_point(results: Results, eval_id: int, kernel_run: KernelRun | None = None,
                 path: str | Path | None = None) -> Path:
    """Write one successful evaluation: an ACF for kernel runs, else the point as JSON. Returns the path.

    Raises:
        ConfigurationError: The evaluation does not exist or failed.
    """
    rec = results.record(eval_id)
    if rec is None or rec.status != "ok":
        raise ConfigurationError(f"export needs a successful evaluation, but eval {eval_id} is "
                                 f"{rec.status if rec else 'not in this run'}; click a point that succeeded")
    if kernel_run is not None:
        out = Path(path or f"{kernel_run.kernel.name}-eval{eval_id}.acf")
        meta = results.header.kernel or kernel_run.metadata()
        point_acf(results, rec, kernel_run.kernel, kernel_run.catalog, meta).write(out)
        return out
    out = Path(path or f"point-eval{eval_id}.json")
    out.write_text(json.dumps({"eval_id": eval_id, "params": rec.params, "status": rec.status,
                               "objectives": dict(zip(results.objective_names, rec.scores or [])),
                               "store": results.store_path}, indent=2, sort_keys=True) + "\n")
    return out


class DetailPanel:
    """The clicked point and its Export button."""

    def __init__(self) -> None:
        self.html = w.HTML("<i>click a point to see its controls and measurements</i>")
        self.html.add_class("compileiq-detail")
        self.path = w.Text(placeholder="file name (default: <kernel>-eval<N>.acf)", layout={"width": "320px"})
        self.export_button = w.Button(description="Export ACF", icon="download", disabled=True)
        self.message = w.HTML()
        self.eval_id: int | None = None
        self.box = w.VBox([self.html, w.HBox([self.export_button, self.path]), self.message],
                          layout={"border": "1px solid #ddd", "padding": "6px"})

    def show(self, results: Results, eval_id: int, kernel_run: KernelRun | None) -> None:
        self.eval_id = eval_id
        self.html.value = describe(results, eval_id, kernel_run)
        rec = results.record(eval_id)
        self.export_button.disabled = rec is None or rec.status != "ok"
        self.export_button.description = "Export ACF" if kernel_run is not None else "Export JSON"
        self.message.value = ""
