"""DetailPanel: one evaluation in full (controls, measurements vs the baseline, failure), and its export."""

from __future__ import annotations

import base64
import contextlib
import html
import json
import logging
import shlex
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import ipywidgets as w

from compileiq_lab.analysis.machine_code import code_diff
from compileiq_lab.analysis.occupancy import occupancy
from compileiq_lab.exceptions import ConfigurationError
from compileiq_lab.kernels import eval_expr, one_line, shown_argv
from compileiq_lab.store import MEMORY
from compileiq_lab.viz.data import param_rows, quantity_text, single_runtimes
from compileiq_lab.widgets.notes import notes_html

if TYPE_CHECKING:
    import pandas as pd

    from compileiq_lab.kernels import KernelRun
    from compileiq_lab.store.results import Results
    from compileiq_lab.store.sqlite import EvalRecord

__all__ = ["DOWNLOAD_LIMIT", "DetailPanel", "copy_button_html", "describe", "flag_lines",
           "machine_code_html"]

log = logging.getLogger(__name__)

#: The largest exported file the message offers as a download link (the link carries the whole file, base64).
DOWNLOAD_LIMIT = 2 << 20


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
    head = ("controls it sets (a value may be the compiler's own default; the export drops what has no effect)"
            if kernel_run is not None else "parameters it sets")
    parts.append(f"<div>{head}:</div>" + (f"<table>{rows}</table>" if rows
                                                                     else "<div><i>none (compiler defaults)</i></div>"))
    if kernel_run is not None:
        shown = shown_argv(kernel_run.catalog_name, kernel_run.argv(rec.params))
        parts.append("<div>arguments: " + " ".join(f"<code>{html.escape(a)}</code>" for a in shown) + "</div>")
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
    rec = results.record(eval_id)
    if single_runtimes(results) and results.store_path != MEMORY and rec is not None and rec.status == "ok" \
            and not rec.is_baseline:
        return ("<div style='color:#8a6d00'>not re-measured: its runtime is the search's single measurement, so a "
                "small change can be noise; <code>compileiq-lab validate "
                f"{html.escape(shlex.quote(results.store_path))}</code> re-measures the front and the baseline "
                "interleaved</div>")
    if v is None or row is None:
        return ""
    lines = [f"re-measured: runtime {_runtime_change(row['speedup'])} (speedup {row['speedup']:.4f}x, "
             f"{v.confidence * 100:g} % CI [{row['low']:.4f}, {row['high']:.4f}]; "
             f"{'a win' if row['win'] else 'not a win'}, {v.rounds} interleaved rounds)"]
    if row.get("same_code_as") is not None:
        lines.append(f"the same machine code as eval {row['same_code_as']}: one measurement for both")
    for name, e in (row.get("workloads") or {}).items():
        lines.append(f"workload {html.escape(name)}: " + (html.escape(e["error"]) if "error" in e else
                     f"{e['speedup']:.4f}x [{e['low']:.4f}, {e['high']:.4f}]"))
    warn = ("<div style='color:#b00'><b>warning: wins on the tuning workload but loses on another</b></div>"
            if row.get("mixed") else "")
    return warn + "<div>" + "<br>".join(lines) + "</div>"


def flag_lines(kernel_run: KernelRun, params: Mapping[str, Any]) -> tuple[str, str]:
    """A point's compiler arguments as text, one shell-quoted line per stage (``frontend: -DTILE=16``), then the
    one-line form, and that line alone: what ``compileiq-lab flags`` prints for the point's ACF (nvcc: the target,
    the front end, each ptxas token as ``-Xptxas TOKEN``; nvrtc: ``-Xptxas=TOKEN``; C: the ``-std=c11`` dialect)."""
    argv = kernel_run.argv(params)
    lines = [f"{stage}: {shlex.join(args)}".rstrip() for stage, args in argv.items()]
    tool, one = one_line(kernel_run.catalog_name, argv, kernel_run.arch)
    line = shlex.join(one)
    return "\n".join([*lines, f"{tool} line: {line}"]), line


def copy_button_html(text: str, label: str = "Copy flags") -> str:
    """An HTML button that puts ``text`` on the clipboard in the browser (no kernel round trip); the text is a
    JSON string literal, HTML-escaped into the onclick attribute."""
    literal, caption = html.escape(json.dumps(text)), html.escape(json.dumps(label))
    js = (f"navigator.clipboard.writeText({literal}).then(() => {{this.textContent = &quot;copied&quot;; "
          f"setTimeout(() => {{this.textContent = {caption}}}, 1500)}}, () => {{this.textContent = "
          "&quot;copy failed: select the text&quot;})")
    return (f"<button class='compileiq-copy' type='button' title='{html.escape(text)}' onclick=\"{js}\">"
            f"{html.escape(label)}</button>")


def _num(v: float) -> str:
    return f"{int(v)}" if float(v).is_integer() else f"{v:.4g}"


def _change(v: float) -> str:
    colour = "#080" if v < 0 else "#b00" if v > 0 else "#888"
    return f"<td style='color:{colour};text-align:right'>{'+' if v > 0 else ''}{_num(v)}</td>"


def machine_code_html(diff: pd.DataFrame, extra: str = "") -> str:
    """A ``code_diff`` as a compact table (change: fewer green, more red), the point's ``ptxas -v`` lines folded,
    the note when the instruction mix is left out, and ``extra`` (occupancy) below."""
    parts = []
    if diff.attrs.get("same_code"):
        parts.append("<div><b>same machine code as the baseline</b> (the controls changed nothing it runs)</div>")
    else:
        rows = []
        for kind, title in (("resource", "resources (ptxas -v; bytes)"), ("instructions", "instructions by class")):
            part = diff[diff["kind"] == kind]
            if len(part):
                rows.append(f"<tr><th colspan='4' style='text-align:left'>{title}</th></tr>")
            rows += [f"<tr data-metric='{html.escape(str(m))}'><td>{html.escape(str(m))}</td>"
                     f"<td style='text-align:right'>{_num(r['baseline'])}</td>"
                     f"<td style='text-align:right'>{_num(r['point'])}</td>{_change(r['change'])}</tr>"
                     for m, r in part.iterrows()]
        parts.append("<table><tr><th></th><th>baseline</th><th>point</th><th>change</th></tr>"
                     + "".join(rows) + "</table>")
    if diff.attrs.get("mix_note"):
        parts.append(f"<div style='color:#8a6d00'>instruction mix left out: {html.escape(diff.attrs['mix_note'])}"
                     "</div>")
    point = diff.attrs.get("point")
    if point is not None and point.ptxas_lines:
        parts.append("<details><summary>ptxas -v of the point</summary><pre>"
                     + html.escape("\n".join(point.ptxas_lines)) + "</pre></details>")
    return "".join(parts) + extra


def _launch(kernel_run: KernelRun, params: Mapping[str, Any]) -> tuple[int, int] | None:
    """(threads per block, dynamic shared bytes) of the kernel's stated launch for a config, or None."""
    k = kernel_run.kernel
    if not k.block:
        return None
    names = {**k.int_params, **{n: v for n, v in k.define_values(params.get("defines")).items() if type(v) is int}}
    threads = 1
    for dim in k.block:
        threads *= eval_expr(dim, names)
    return threads, eval_expr(k.shared_bytes, names)


def _occupancy_html(kernel_run: KernelRun, diff: pd.DataFrame, base: Mapping[str, Any],
                    point: Mapping[str, Any]) -> str:
    """Theoretical occupancy of the baseline and the point at the kernel's launch block, or why it is left out."""
    try:
        said = []
        for who, params, report in (("baseline", base, diff.attrs["baseline"]), ("point", point, diff.attrs["point"])):
            launch = _launch(kernel_run, params)
            if launch is None:
                return ("<div style='color:#888'>occupancy left out: the run knows no launch block ([launch] "
                        "block in kernel.toml, or the launch block field for a bare file; __launch_bounds__ "
                        "states only a maximum)</div>")
            res = report.resources
            o = occupancy(int(res["registers"]), launch[0], int(res["smem_bytes"]) + launch[1],
                          kernel_run.arch or "sm_90")
            said.append(f"{who}: {o.blocks_per_sm} blocks of {launch[0]} threads per SM, {o.warps_per_sm} of "
                        f"{o.max_warps} warps ({100 * o.occupancy:.0f} %), limited by {html.escape(o.limited_by)}")
    except ConfigurationError as exc:
        return f"<div style='color:#888'>occupancy left out: {html.escape(str(exc))}</div>"
    return f"<div class='compileiq-occupancy'>theoretical occupancy on {html.escape(str(o.arch))}: " \
           + "; ".join(said) + "</div>"


class DetailPanel:
    """The clicked point: its description, its machine code beside the baseline (cubin kernels), its compiler
    flags to copy, and its Export button (with a download link once written)."""

    _EMPTY = "<i>click a point to see its controls and measurements</i>"

    def __init__(self) -> None:
        self.html = w.HTML(self._EMPTY)
        self.html.add_class("compileiq-detail")
        self.path = w.Text(placeholder="file name (default: <kernel>-eval<N>.acf)", layout={"width": "320px"})
        self.export_button = w.Button(description="Export ACF", icon="download", disabled=True)
        self.message = w.HTML()
        self.sass_button = w.Button(description="Machine code vs baseline", icon="microchip", disabled=True,
                                    layout={"width": "220px"}, tooltip="click a point first")
        self.sass_button.add_class("compileiq-sass-button")
        self.sass = w.HTML()
        self.sass.add_class("compileiq-sass")
        self.flags = w.Textarea(rows=3, layout={"width": "100%", "display": "none"})
        self.flags.add_class("compileiq-flags")
        self.copy = w.HTML()
        self.flags_line = ""
        self._flags_text = ""
        self.flags.observe(self._keep_flags, "value")
        self.eval_id: int | None = None
        self._shown: tuple[Results, EvalRecord, KernelRun] | None = None
        self._diffs: dict[tuple[int, str, str], pd.DataFrame] = {}
        self.sass_button.on_click(lambda _: self.show_machine_code())
        self.box = w.VBox([self.html, self.flags, self.copy, self.sass_button, self.sass,
                           w.HBox([self.export_button, self.path]), self.message],
                          layout={"border": "1px solid #ddd", "padding": "6px"})

    def _keep_flags(self, change: dict[str, Any]) -> None:
        """The flags box is read-only: an edit in the browser is put back (the text stays selectable)."""
        if change["new"] != self._flags_text:
            self.flags.value = self._flags_text

    def _set_flags(self, text: str, line: str) -> None:
        self._flags_text, self.flags_line = text, line
        self.flags.value = text
        self.flags.rows = max(2, sum(1 + len(line) // 70 for line in text.splitlines()))  # wrapped lines too
        self.flags.layout.display = None if text else "none"
        self.copy.value = copy_button_html(line) if text else ""

    def clear(self) -> None:
        """Forget the shown point (a new run started): nothing to export until a point is clicked."""
        self.eval_id, self._shown = None, None
        self.html.value = self._EMPTY
        self.export_button.disabled = True
        self.message.value = self.sass.value = self.path.value = ""  # (a name typed for the last run's point too)
        self.sass_button.disabled, self.sass_button.tooltip = True, "click a point first"
        self._set_flags("", "")
        self._diffs.clear()  # keyed by the kernel run's id(), which a new run's may reuse

    def show(self, results: Results, eval_id: int, kernel_run: KernelRun | None) -> None:
        """Show one evaluation: its description, its flags (kernel runs), and whether its machine code can be read."""
        self.eval_id = eval_id
        self.html.value = describe(results, eval_id, kernel_run)
        rec = results.record(eval_id)
        self.export_button.disabled = rec is None or rec.status != "ok"
        self.export_button.description = "Export ACF" if kernel_run is not None else "Export JSON"
        self.message.value = self.sass.value = ""
        self._shown = (results, rec, kernel_run) if rec is not None and kernel_run is not None else None
        self._set_flags(*flag_lines(kernel_run, rec.params) if rec is not None and kernel_run is not None
                        else ("", ""))
        why = self._no_machine_code(rec, kernel_run)
        self.sass_button.disabled = why is not None
        self.sass_button.tooltip = why or "compile the point and the baseline and compare their machine code"

    @staticmethod
    def _no_machine_code(rec: EvalRecord | None, kernel_run: KernelRun | None) -> str | None:
        """Why this point has no machine code to compare, or None."""
        if rec is None:
            return "no such evaluation in this run"
        if kernel_run is None:
            return "a Python objective has no machine code"
        try:
            kind = kernel_run.backend.binary_kind
        except Exception as exc:  # noqa: BLE001 - a missing compiler, a full disk...: said on the button
            return f"the compile path cannot be made here: {exc}"
        if kind != "cubin":
            return (f"{kernel_run.kernel.name!r} is a {kernel_run.kernel.language} kernel compiled to a {kind} "
                    "object; the machine-code diff reads the cubins of CUDA and PTX kernels")
        if rec.status != "ok":
            return f"eval {rec.eval_id} {rec.status}: only a point that compiled has machine code to compare"
        return None

    def show_machine_code(self) -> pd.DataFrame | None:
        """Compile the shown point and the baseline (cached) and show their machine-code diff, with occupancy where
        the kernel states its launch block. Returns the diff (None when there is none; the area says why)."""
        shown = self._shown
        why = self._no_machine_code(shown[1], shown[2]) if shown is not None else "click a point first"
        if shown is None or why is not None:
            self.sass.value = f"<i>{html.escape(why or '')}</i>"
            return None
        results, rec, kernel_run = shown
        base_rec = results.baseline_record
        base = dict(base_rec.params) if base_rec is not None else {}
        key = (id(kernel_run), json.dumps(rec.params, sort_keys=True, default=str),
               json.dumps(base, sort_keys=True, default=str))
        try:
            diff = self._diffs.get(key)
            if diff is None:
                diff = code_diff(kernel_run, rec.params, base)
                if len(self._diffs) >= 32:
                    self._diffs.pop(next(iter(self._diffs)))
                self._diffs[key] = diff
            self.sass.value = machine_code_html(diff, _occupancy_html(kernel_run, diff, base, rec.params))
        except Exception as exc:  # a callback: the failure is shown, never raised
            log.debug("machine code of eval %d failed", rec.eval_id, exc_info=True)
            self.sass.value = f"<span style='color:#b00'>no machine-code diff: {html.escape(str(exc)[:600])}</span>"
            return None
        return diff

    def exported(self, path: Path, notes: Sequence[str] = ()) -> None:
        """Say where an export was written (its folder relative to the working folder when inside it), with its
        ``notes`` (see ``export_notes``), and offer the file as a download link (files up to ``DOWNLOAD_LIMIT``
        bytes)."""
        out = Path(path).resolve()
        folder = out.parent
        with contextlib.suppress(ValueError):  # inside the notebook's folder: said relative to it
            folder = folder.relative_to(Path.cwd().resolve())
        name = html.escape(out.name)
        told = notes_html(notes)
        said = (f"wrote <code class='compileiq-export'>{name}</code> in "
                f"<code class='compileiq-export-folder' title='{html.escape(str(out.parent))}'>"
                f"{html.escape(str(folder))}</code>")
        try:
            size = out.stat().st_size
            data = out.read_bytes() if 4 * -(-size // 3) <= DOWNLOAD_LIMIT else None  # the link's base64 length
        except OSError as exc:
            self.message.value = f"{said} <i>(no download link: {html.escape(str(exc))})</i>{told}"
            return
        if data is None:
            self.message.value = (f"{said} <i>(no download link: the file is {size / 2**20:.1f} MiB, over the "
                                  f"{DOWNLOAD_LIMIT >> 20} MiB a link carries; take it from the folder)</i>{told}")
            return
        href = "data:application/json;base64," + base64.b64encode(data).decode("ascii")
        self.message.value = (f"{said} &nbsp;<a class='compileiq-download' download='{name}' href='{href}'>download</a>"
                              f"{told}")
