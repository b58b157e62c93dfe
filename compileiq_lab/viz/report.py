"""A run as one self-contained HTML report (plotly embedded, viewable offline)."""

from __future__ import annotations

import datetime as _dt
import html
import json
import logging
import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from compileiq_lab.space.space import flatten_params
from compileiq_lab.viz.data import failure_summary, front_table, single_runtimes

if TYPE_CHECKING:
    from compileiq_lab.kernels import KernelRun
    from compileiq_lab.store.results import Results

log = logging.getLogger(__name__)

__all__ = ["report_html", "write_report"]

_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:2rem auto;max-width:1200px;
color:#222;padding:0 1rem}
h1{font-size:1.6rem}h2{font-size:1.25rem;border-bottom:1px solid #ddd;padding-bottom:.2rem;margin-top:2rem}
table{border-collapse:collapse;margin:.5rem 0;font-size:.9rem}
th,td{border:1px solid #ddd;padding:.25rem .5rem;text-align:left;vertical-align:top}
th{background:#f5f5f5}td.num{text-align:right;font-variant-numeric:tabular-nums}
code,pre{font-family:ui-monospace,Menlo,Consolas,monospace;font-size:.85rem}
.muted{color:#666}.figure{margin:1rem 0}
"""


def _e(value: Any) -> str:
    return html.escape(value if isinstance(value, str) else str(value))


def _num(value: float | None, fmt: str = ".6g") -> str:
    return "&ndash;" if value is None else _e(format(value, fmt))


def _kv_table(rows: list[tuple[str, Any]]) -> str:
    body = "".join(f"<tr><th>{_e(k)}</th><td>{_e(v)}</td></tr>" for k, v in rows)
    return f"<table>{body}</table>"


def _meta(results: Results) -> dict[str, Any]:
    return dict(results.header.metadata)


def _title(results: Results) -> str:
    meta = _meta(results)
    parts = [f"{k} {meta[k]}" for k in ("kernel", "catalog", "arch") if meta.get(k)]
    return "compileiq-lab run" + (": " + ", ".join(parts) if parts else "")


def _when(ts: Any) -> str:
    if not isinstance(ts, (int, float)):
        return "unknown"
    return _dt.datetime.fromtimestamp(ts, tz=_dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _summary(results: Results) -> str:
    cfg, resolved = results.header.config, results.header.resolved
    gens = {r.generation for r in results.records}
    statuses = ", ".join(f"{s}: {n}" for s, n in sorted(results.status_counts().items()))
    objectives = ", ".join(o.label for o in results.objectives)
    rows: list[tuple[str, Any]] = [
        ("evaluations", len(results)), ("statuses", statuses or "none"),
        ("objectives", objectives), ("run status", results.status),
        ("generations", f"{max(gens) if gens else 0} run of {cfg.get('generations', '?')} configured"),
        ("pool size", resolved.get("pool_size", cfg.get("pool_size", "?"))),
        ("strategy", resolved.get("strategy", cfg.get("strategy", "?"))),
        ("seed", cfg.get("seed", "?")), ("store", results.store_path),
        ("objective function", results.header.objective or "?"),
        ("created", _when(results.header.created_at or None)),
        ("compileiq-lab version", results.header.package_version or "?")]
    return "<h2>Run summary</h2>" + _kv_table(rows)


def _figures(results: Results) -> str:
    from compileiq_lab.viz.figures import history_figure, parallel_figure, pareto_figure

    items = [("<h2>Pareto scatter</h2>" if j == 1 else "", pareto_figure(results, 0, j))
             for j in range(1, max(2, results.n_objectives))]
    items += [("<h2>Convergence per generation</h2>", history_figure(results)),
              ("<h2>Controls vs objectives</h2>", parallel_figure(results))]
    items += _influence_figures(results)
    out: list[str] = []
    for i, (heading, fig) in enumerate(items):
        div = fig.to_html(full_html=False, include_plotlyjs=(i == 0), config={"displaylogo": False})
        out.append(f'{heading}<div class="figure">{div}</div>')
    return "\n".join(out)


def _influence_figures(results: Results) -> list[tuple[str, Any]]:
    """Per-objective influence bars, where scikit-learn is installed and the run has enough evaluations."""
    from compileiq_lab.analysis.influence import control_influence
    from compileiq_lab.exceptions import ConfigurationError, OptionalDependencyError
    from compileiq_lab.viz.figures import influence_figure

    out = []
    for k in range(results.n_objectives):
        try:
            df = control_influence(results, k, rounds=5, n_trees=60)
        except (ConfigurationError, OptionalDependencyError) as exc:
            log.info("no influence chart: %s", exc)
            return []
        out.append(("<h2>Which controls matter</h2>" if k == 0 else "", influence_figure(df)))
    return out


def _change_cell(value: str | None) -> str:
    return "&ndash;" if value is None else _e(value)


def _params_cell(params: Mapping[str, Any]) -> str:
    flat = flatten_params(params)
    if not flat:
        return '<span class="muted">(compiler defaults)</span>'
    items = (f"{k}={v if isinstance(v, str) else json.dumps(v, default=str)}" for k, v in sorted(flat.items()))
    return "<code>" + "<br>".join(_e(s) for s in items) + "</code>"


def _front(results: Results) -> str:
    rows = front_table(results)
    objectives = results.objectives
    head = ("<tr><th>eval</th><th>generation</th>" + "".join(f"<th>{_e(o.label)}</th>" for o in objectives)
            + "".join(f"<th>{_e(o.name)} vs baseline</th>" for o in objectives) + "<th>controls</th></tr>")
    body = []
    for r in rows:
        same = f' <span class="muted">(+{r["same"]} with the same scores)</span>' if r["same"] else ""
        cells = [f'<td class="num">{r["eval_id"]}{" (baseline)" if r["is_baseline"] else ""}{same}</td>',
                 f'<td class="num">{r["generation"]}</td>']
        cells += [f'<td class="num">{_e(o.format(r["objectives"][o.name]))}</td>' for o in objectives]
        cells += [f'<td class="num">{_change_cell(r["changes"][o.name])}</td>' for o in objectives]
        cells.append(f"<td>{_params_cell(r['params'])}</td>")
        body.append('<tr class="front-row">' + "".join(cells) + "</tr>")
    note = ('<p class="muted">Change vs the baseline (compiler defaults), with its sense for each objective; '
            '&ndash; where the baseline did not succeed. Points with identical scores are shown once: the one '
            'with the fewest controls set (then the earliest), the one <code>tune</code> and '
            '<code>export</code> pick.</p>')
    if not rows:
        return "<h2>Pareto front</h2><p>No evaluation succeeded.</p>"
    return f"<h2>Pareto front ({len(rows)} points)</h2>{note}<table>{head}{''.join(body)}</table>"


def _validation(results: Results) -> str:
    """The run's re-measurement (``validate``), as ``validate`` prints it: each point's speedup with its interval,
    whether it is a win and certified, and its verdict on every other workload; "" for a run never re-measured."""
    v = results.validation
    if v is None:
        return ("<h2>Re-measured</h2><p class=\"muted\">Not re-measured: the scores above are the search's single "
                "measurements (<code>compileiq-lab validate RUN.db</code> re-measures the front).</p>"
                if single_runtimes(results) else "")
    body = []
    for r in v.rows:
        verdicts = [f"{_e(name)}: " + (_e(e["error"]) if "error" in e else
                                       f"{e['speedup']:.4f} [{e['low']:.4f}, {e['high']:.4f}]"
                                       f"{' win' if e['win'] else ' LOSS' if e['loss'] else ''}")
                    for name, e in (r.get("workloads") or {}).items()]
        if r.get("wrong_output_on"):
            verdicts.append("<b>wrong output on " + _e(", ".join(r["wrong_output_on"])) + ": not a win</b>")
        if r.get("same_code_as") is not None:
            verdicts.append(f"the same machine code as eval {r['same_code_as']}")
        body.append(f'<tr><td class="num">{r["eval_id"]}</td><td class="num">{r["speedup"]:.4f}</td>'
                    f'<td class="num">[{r["low"]:.4f}, {r["high"]:.4f}]</td><td>{"yes" if r["win"] else "no"}</td>'
                    f'<td>{"yes" if r.get("certified") else _e(r.get("why_not") or "no")}</td>'
                    f'<td>{"<br>".join(verdicts)}</td></tr>')
    return (f"<h2>Re-measured ({v.rounds} interleaved rounds, {v.confidence * 100:g} % CI)</h2>"
            f'<p class="muted">Speedup over the baseline; a win is an interval above 1 + the A/A noise floor '
            f"({v.noise_floor * 100:.2f} %).</p><table><tr><th>eval</th><th>speedup</th><th>interval</th><th>win</th>"
            "<th>certified</th><th>other workloads</th></tr>" + "".join(body) + "</table>")


def _failures(results: Results) -> str:
    rows = failure_summary(results)
    if not rows:
        return "<h2>Failures</h2><p>No evaluation failed.</p>"
    body = []
    for r in rows:
        ex = "<br>".join(f"eval {x['eval_id']}: <code>{_e(x['error'])}</code>" for x in r["examples"])
        body.append(f'<tr><td>{_e(r["status"])}</td><td class="num">{r["count"]}</td><td>{ex}</td></tr>')
    return ("<h2>Failures by status</h2><table><tr><th>status</th><th>count</th><th>examples</th></tr>"
            + "".join(body) + "</table>")


def _machine_code(results: Results, kernel_run: KernelRun | None) -> str:
    """The point the run's export picks beside the baseline: ptxas -v resources and the SASS mix (CUDA kernels)."""
    if kernel_run is None or kernel_run.kernel.language == "c":  # host objects: no cubin to read
        return ""
    from compileiq_lab.analysis.machine_code import code_diff
    from compileiq_lab.store.pick import default_pick, pick_point

    base = results.baseline_record
    if base is None or base.status != "ok":  # nothing to compare with
        return ""
    try:
        rec, why = pick_point(results, default_pick(kernel_run.target == "static"))
        if rec is None or rec.status != "ok":
            return ""
        diff = code_diff(kernel_run, rec.params, base.params)
    except Exception as exc:  # noqa: BLE001 - no compiler here, a damaged cubin...: said, never the report's end
        return f'<h2>Machine code</h2><p class="muted">{_e(str(exc)[:300])}</p>'
    rows = "".join(
        f'<tr><td>{_e(name)}</td><td class="num">{row.baseline:g}</td><td class="num">{row.point:g}</td>'
        f'<td class="num">{row.change:+g}</td></tr>' for name, row in diff.iterrows())
    same = " It is the same machine code as the baseline." if diff.attrs["same_code"] else ""
    note = f' <span class="muted">{_e(diff.attrs["mix_note"])}</span>' if diff.attrs["mix_note"] else ""
    return (f"<h2>Machine code: eval {rec.eval_id} vs the baseline</h2><p>{_e(why)}: what its controls changed "
            f"in the machine code (ptxas -v resources, then instructions per opcode class).{same}{note}</p>"
            "<table><tr><th></th><th>baseline</th><th>point</th><th>change</th></tr>" + rows + "</table>")


def _flat_meta(value: Any, prefix: str = "") -> list[tuple[str, Any]]:
    if isinstance(value, Mapping) and value:
        out: list[tuple[str, Any]] = []
        for k, v in value.items():
            out += _flat_meta(v, f"{prefix}.{k}" if prefix else str(k))
        return out
    return [(prefix, value if isinstance(value, str) else json.dumps(value, default=str))]


def _environment(results: Results) -> str:
    meta = _meta(results)
    if not meta:
        return ("<h2>Toolchain and host</h2><p class=\"muted\">This run stored no toolchain or host "
                "metadata (runs from <code>compileiq-lab tune</code> do).</p>")
    return "<h2>Toolchain and host</h2>" + _kv_table(_flat_meta(meta))


def report_html(results: Results, kernel_run: KernelRun | None = None) -> str:
    """The report as one HTML document (plotly's JavaScript embedded once).

    Args:
        results: The run (e.g. from ``compileiq_lab.load_results``).
        kernel_run: The run's kernel run (``KernelRun.from_header``, build-only): adds what the picked point
            changed in the machine code.

    Returns:
        The HTML text.

    Raises:
        OptionalDependencyError: plotly is not installed.
    """
    from compileiq_lab.viz.figures import require_plotly

    require_plotly()
    title = _e(_title(results))
    parts = [_summary(results), _figures(results), _front(results), _validation(results),
             _machine_code(results, kernel_run), _failures(results), _environment(results)]
    return ("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
            f"<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>{title}</title>\n"
            f"<style>{_CSS}</style>\n</head>\n<body>\n<h1>{title}</h1>\n" + "\n".join(parts)
            + "\n<p class=\"muted\">Generated by compileiq-lab.</p>\n</body>\n</html>\n")


def write_report(results: Results, path: str | os.PathLike[str], kernel_run: KernelRun | None = None) -> Path:
    """Write the run's self-contained HTML report (no network needed to view it).

    Args:
        results: The run.
        path: The .html file to write (parent folders are created).
        kernel_run: See ``report_html``.

    Returns:
        The written path.

    Raises:
        OptionalDependencyError: plotly is not installed.
    """
    out = Path(path)
    text = report_html(results, kernel_run)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text, encoding="utf-8")
    return out
