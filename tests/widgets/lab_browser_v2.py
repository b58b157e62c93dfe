"""The second browser flow: the dashboard's controls, tabs and runs in JupyterLab, driven through the UI only.

Shared by ``tests/widgets/test_lab_browser_v2.py``; not a test module itself. Reuses ``lab_browser`` (the
JupyterLab server, the Chromium page that reaches only that server, the page helpers and the kernel-error log).
The generated notebook has three cells: (1) two short static runs of the bundled CUDA ``reduction`` kernel
(sm_80, sm_90) into ``compileiq_runs/``; (2) a dashboard over a not yet started run of a slow two-objective Python
objective (some configs raise); (3) a dashboard with the form. The flow (``run_lab_v2_flow``): Start, Pause,
Resume, Stop the live run; change the y axis; pick a table row and see its point, click a point and see its row;
read the failures tab; overlay the two kernel runs' fronts and open one; on its point: machine code vs the
baseline, Export ACF, Copy flags; then replay ``sm_90.db`` from the form. Each step records facts and
``steps_s`` its seconds; the test asserts on them.

Run it alone (the screenshots land in ``docs/``)::

    .venv/bin/python tests/widgets/lab_browser_v2.py --shots docs
"""

from __future__ import annotations

import argparse
import contextlib
import json
import re
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import lab_browser as lb  # tests/widgets is not a package

__all__ = ["ARCHS", "NOTEBOOK_NAME", "SHOTS", "run_lab_v2_flow", "v2_notebook"]

ARCHS = ("sm_80", "sm_90")
NOTEBOOK_NAME = "lab_v2.ipynb"
#: The screenshots the flow takes (in the ``shots`` folder).
SHOTS = ("lab-table.png", "lab-failures.png", "lab-overlay.png", "lab-point.png", "lab-replay.png")
#: The page's size: the live dashboard with a point's machine-code table is about 1,800 px tall.
VIEWPORT = {"width": 1400, "height": 2300}
#: Seconds the paused run must add no point for.
PAUSE_QUIET_S = 1.0

KERNEL_CELL = """\
from pathlib import Path
from compileiq_lab import KernelRun, Run, Search, SearchConfiguration
import compileiq_lab.space as ss
from compileiq_lab.widgets import Dashboard

Path("compileiq_runs").mkdir(exist_ok=True)
for a in {archs!r}:  # two short static runs: nothing measured, ptxas only
    kernel_run = KernelRun("reduction", "ptxas", ["sass_instructions", "registers"], arch=a)
    Search.of(kernel_run, store=f"compileiq_runs/{{a}}.db", generations=2, pool_size=8, seed=0).start(workers=2)
    kernel_run.close()
"""
LIVE_CELL = """\
import time

def objective(config):
    time.sleep(0.15)  # slow enough to pause
    x, y = config["x"], config["y"]
    if y == 4 and x > 10:
        raise ValueError(f"x={x} with y=4 does not build")
    return float(x * x / 10 + y), float((40 - x) * y)

space = {"x": ss.range(0, 40, step=0.5, default=0), "y": ss.choice([1, 2, 3, 4], default=1)}
config = SearchConfiguration(generations=8, pool_size=8, seed=0, num_objectives=2, objective_names=["cost", "size"])
live = Dashboard(Run(Search(objective, space, config, store="compileiq_runs/live.db")))
live
"""
FORM_CELL = "form = Dashboard()\nform"

# navigator.clipboard.writeText, recorded on its way through (the page's own call still happens): what the
# Copy button asked for, whether or not headless Chromium lets the page read the clipboard back
_RECORD_COPIES = """
(() => {
  const c = navigator.clipboard;
  if (!c || !c.writeText) return;
  const write = c.writeText.bind(c);
  c.writeText = (text) => { (window.__ciqCopied = window.__ciqCopied || []).push(String(text)); return write(text); };
})();
"""
_STATE = r"(() => { const s = ciq.status(root); return s ? s.split(':')[0] : null; })()"
_EVALS = r"(() => { const m = /(\d+) evaluations/.exec(ciq.status(root) || ''); return m ? +m[1] : -1; })()"
_TAB = "((root.querySelector('.compileiq-side .lm-TabBar-tab.lm-mod-current') || {}).innerText || '').trim()"
_DETAIL_ID = r"(() => { const m = /^eval (\d+)/.exec(ciq.detail(root) || ''); return m ? +m[1] : null; })()"
# the scatter's traces are found by their fixed index (live.py: EVALS, FRONT, BASELINE, FAILED, SELECTED), not by
# name: the browser's copy of a trace's initial name is lost (see the facts' ``live_trace_names``)
_IDS_OF = "(i => { const gd = ciq.pareto(root); const t = gd && gd.data[i]; " \
          "return t && t.customdata ? [...t.customdata].map(Number) : null; })"
_ROWS = "[...(root.querySelector('.compileiq-table-rows select') || {options: []}).options].map(o => o.textContent)"
_TABLE_PICK = r"""(() => { const s = root.querySelector('.compileiq-table-rows select');
  if (!s || s.selectedIndex < 0) return null; const m = /^\s*(\d+)/.exec(s.options[s.selectedIndex].textContent);
  return m ? +m[1] : null; })()"""
#: The overlay's plotly div (the widget's class is on that div itself).
_OVERLAY = ".compileiq-overlay.js-plotly-plot, .compileiq-overlay .js-plotly-plot"
_ERROR_LINE = "((root.querySelector('.compileiq-error') || {}).innerText || '').trim()"


def v2_notebook(path: Path) -> Path:
    """Write the flow's three-cell notebook (kernel runs, live dashboard, form dashboard) at ``path``."""
    nb = {"cells": [lb._cell(KERNEL_CELL.format(archs=ARCHS)), lb._cell(LIVE_CELL), lb._cell(FORM_CELL)],
          "nbformat": 4, "nbformat_minor": 5,
          "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"},
                       "language_info": {"name": "python"}}}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(nb, indent=1) + "\n")
    return path


def run_lab_v2_flow(workdir: Path, shots: Path | None = None, timeout: float = 120.0) -> dict[str, Any]:
    """Generate the notebook in ``workdir``, open it in JupyterLab in headless Chromium, and drive both dashboards
    through the UI (see the module docstring). Screenshots go to ``shots`` (``SHOTS``; none when None).

    Returns facts per step (``pause_*``, ``axis_*``, ``row_*``, ``point_*``, ``failures``, ``overlay_*``,
    ``open_*``, ``kernel_*``, ``export_*``, ``copy_*``, ``replay_*``), ``steps_s`` (seconds per step), ``total_s``,
    the dashboards' error lines, the cells' error outputs, and ``browser_log`` (blocked requests, page errors,
    kernel errors).

    Raises:
        RuntimeError: A step did not happen within ``timeout`` seconds (or failed); the message names the step and
            carries what the page showed and the JupyterLab log tail (a screenshot in ``workdir/lab-failure.png``).
    """
    workdir = Path(workdir).resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    nb_path = v2_notebook(workdir / NOTEBOOK_NAME)
    out: dict[str, Any] = {"notebook": NOTEBOOK_NAME, "steps_s": {}}
    lab = lb.JupyterLab(workdir, "python3", timeout)
    flow = _V2Flow(out, timeout)
    t_all = time.perf_counter()
    try:
        lab.start()
        out["server_start_s"] = time.perf_counter() - t_all
        with lb._browser(lab.url) as (page, browser_log):
            out["browser_log"] = browser_log
            try:
                flow.drive(page, lab, nb_path, workdir, Path(shots).resolve() if shots is not None else None)
            except Exception as exc:
                raise RuntimeError(f"lab v2 flow failed at step {flow.step!r}: {exc}\n"
                                   f"--- facts so far ---\n{_facts(out)}\n"
                                   f"--- the page ---\n{lb._diagnose(page, workdir)}") from exc
        out["total_s"] = time.perf_counter() - t_all
        return out
    except Exception as exc:
        raise RuntimeError(f"{exc}\n--- JupyterLab log tail ---\n{lab.log_tail()}") from exc
    finally:
        lab.stop()


def _facts(out: dict[str, Any]) -> str:
    return json.dumps({k: v for k, v in out.items() if k != "browser_log"}, indent=1, default=str)[:6000]


class _V2Flow(lb._Flow):
    """The steps in the page (``step`` names the one running, for error messages and kernel-error attribution)."""

    def drive(self, page: Any, lab: lb.JupyterLab, nb_path: Path, workdir: Path,  # type: ignore[override]
              shots: Path | None) -> None:
        from compileiq_lab.widgets.live import SELECTED

        self.page, self.shots, self.workdir = page, shots, workdir
        self._selected = f"{_IDS_OF}({SELECTED})"
        self._t = time.perf_counter()
        if shots is not None:
            shots.mkdir(parents=True, exist_ok=True)
        self._open(lab, nb_path)
        live, form = self._cells()
        self._pause_resume_stop(live)
        self._axis(live)
        self._row_and_point(live)
        self._failures(live)
        self._overlay_and_open(live)
        self._kernel_point(live)
        self._replay(form)
        self.next_step("final checks")
        self.out["cell_errors"] = page.evaluate(lb._JS_CELL_ERRORS)
        self.out["error_lines"] = [self._js(live, _ERROR_LINE), self._js(form, _ERROR_LINE)]
        self.out["steps_s"][self.step] = round(time.perf_counter() - self._t, 2)

    # -- small helpers ---------------------------------------------------------------------------
    def next_step(self, name: str) -> None:
        """Start step ``name``; the last one's seconds go to ``steps_s``."""
        now = time.perf_counter()
        if self._steps[1:]:  # the first is lab_browser's "start JupyterLab", timed as server_start_s
            self.out["steps_s"][self.step] = round(now - self._t, 2)
        self._t = now
        self.step = name

    @staticmethod
    def _js(root: Any, body: str, arg: Any = None) -> Any:
        return lb._js(root, body, arg)

    def _wait(self, root: Any, cond: str, arg: Any = None, timeout_ms: float | None = None) -> None:
        """Wait until ``cond`` (JS, with ``root``, ``arg`` and the ciq helpers) is truthy."""
        self.page.wait_for_function(f"([root, arg]) => {{ {lb._JS_HELPERS} return ({cond}); }}",
                                    arg=[root.element_handle(), arg], timeout=timeout_ms or self.ms, polling=100)

    def _button(self, root: Any, label: str) -> Any:
        return root.locator("button.widget-button", has_text=re.compile(rf"^\s*{re.escape(label)}\s*$")).first

    def _click(self, root: Any, label: str) -> None:
        button = self._button(root, label)
        button.scroll_into_view_if_needed()
        button.click(timeout=self.ms)

    def _tab(self, root: Any, title: str) -> None:
        """Open the side panel's tab ``title`` and wait until it is the current one and the kernel has taken the
        change (as a user's next click comes after it: see ``lab_browser._JS_FIND_MANAGER``)."""
        tab = root.locator(".compileiq-side .lm-TabBar-tab", has_text=re.compile(rf"^\s*{re.escape(title)}\s*$"))
        tab.first.click(timeout=self.ms)
        self._wait(root, f"{_TAB} === arg", title)
        if not self.page.evaluate("() => !!window.__ciqManager") and not self.page.evaluate(lb._JS_FIND_MANAGER):
            raise RuntimeError("no widget manager found in the notebook's outputs (ciq.unsynced needs one)")
        self._wait(root, "ciq.unsynced('TabModel').length === 0")

    def _shot(self, root: Any, name: str) -> None:
        if self.shots is None:
            return
        self.page.wait_for_timeout(400)  # plotly's transitions
        root.screenshot(path=str(self.shots / name))
        self.out.setdefault("screenshots", []).append(name)

    def _point_ids(self, root: Any) -> list[int]:
        """The eval ids of the drawn points of the scatter's evaluations trace, in the DOM's order."""
        return self._js(root, "ciq.evalPoints(root).map(p => +ciq.pareto(root).data[0].customdata[p.__data__.i])")

    def _click_point(self, root: Any, eval_id: int) -> int | None:
        """Click the drawn point of ``eval_id`` (hover first: plotly picks the point under the mouse); returns the
        eval id the detail panel then shows."""
        before = self._js(root, "ciq.detail(root)")
        handle = root.evaluate_handle(
            f"(root, id) => {{ {lb._JS_HELPERS} const gd = ciq.pareto(root); "
            "return ciq.evalPoints(root).find(p => +gd.data[0].customdata[p.__data__.i] === id); }", eval_id)
        point = handle.as_element()
        if point is None:
            raise RuntimeError(f"no drawn point for eval {eval_id}")
        point.scroll_into_view_if_needed()
        box = point.bounding_box()
        assert box is not None
        x, y = box["x"] + box["width"] / 2, box["y"] + box["height"] / 2
        self.page.mouse.move(x - 15, y - 15)
        self.page.mouse.move(x, y, steps=5)
        with contextlib.suppress(Exception):
            self.page.locator(".hoverlayer .hovertext").first.wait_for(state="visible", timeout=3000)
        self.page.mouse.click(x, y)
        self._wait(root, "ciq.detail(root) !== null && ciq.detail(root) !== arg", before)
        return self._js(root, _DETAIL_ID)

    # -- the steps -------------------------------------------------------------------------------
    def _open(self, lab: lb.JupyterLab, nb_path: Path) -> None:
        page, ms = self.page, self.ms
        self.next_step("open the notebook and start its kernel")
        context = page.context
        try:
            context.grant_permissions(["clipboard-read", "clipboard-write"], origin=lab.url)
            self.out["clipboard_permissions"] = True
        except Exception as exc:  # noqa: BLE001 - said in the facts; the recorded copy is checked then
            self.out["clipboard_permissions"] = f"{type(exc).__name__}: {exc}"[:300]
        context.add_init_script(script=_RECORD_COPIES)
        page.set_viewport_size(VIEWPORT)  # a dashboard with its machine-code table is taller than lab_browser's
        tracebacks: list[str] = self.out.setdefault("kernel_tracebacks", [])

        def record(frame: Any) -> None:  # the whole traceback of an error the kernel sends for a widget message
            msg = lb._ws_message(frame)
            if msg and (msg.get("header") or {}).get("msg_type") == "error" \
                    and (msg.get("parent_header") or {}).get("msg_type") == "comm_msg":
                text = "\n".join((msg.get("content") or {}).get("traceback") or [])
                tracebacks.append(f"[during: {self.step}] " + re.sub(r"\x1b\[[0-9;]*m", "", text)[-4000:])
        page.on("websocket", lambda ws: ws.on("framereceived", record))
        lb.open_notebook(page, lab, nb_path, ms)
        if page.locator(".jp-Dialog").count():
            raise RuntimeError(f"a dialog is open: {page.locator('.jp-Dialog').first.inner_text()[:500]}")
        with contextlib.suppress(Exception):  # more room for the dashboards
            page.evaluate("() => { const s = window.jupyterapp.shell; if (!s.leftCollapsed) "
                          "return window.jupyterapp.commands.execute('application:toggle-left-area'); }")

        self.next_step("run all cells (two kernel runs, two dashboards)")
        page.evaluate("() => window.jupyterapp.commands.execute('notebook:run-all-cells')")
        page.wait_for_function(f"() => ({lb._JS_CELL_ERRORS})().length > 0 || document.querySelectorAll("
                               "'.jp-NotebookPanel .compileiq-dashboard').length >= 2", timeout=ms * 2)
        errors = page.evaluate(lb._JS_CELL_ERRORS)
        if errors:
            raise RuntimeError("a cell raised: " + "; ".join(errors))
        page.wait_for_function("() => { const w = window.jupyterapp.shell.currentWidget; "
                               "const k = w.sessionContext.session?.kernel; return k && k.status === 'idle' && "
                               "![...w.content.node.querySelectorAll('.jp-InputPrompt')]"
                               ".some(e => e.textContent.includes('*')); }", timeout=ms)
        self.out["kernel_run_stores"] = sorted(p.name for p in (self.workdir / "compileiq_runs").glob("sm_*.db"))

    def _cells(self) -> tuple[Any, Any]:
        cells = self.page.locator(".jp-NotebookPanel .jp-Cell")
        live = cells.nth(1).locator(".compileiq-dashboard").first
        form = cells.nth(2).locator(".compileiq-dashboard").first
        live.wait_for(state="visible", timeout=self.ms)
        form.wait_for(state="visible", timeout=self.ms)
        self.out["form_in_live"] = live.locator(".compileiq-setup").count()  # the form-less constructor: 0
        self.out["form_in_form"] = form.locator(".compileiq-setup").count()
        return live, form

    def _pause_resume_stop(self, live: Any) -> None:
        out = self.out
        self.next_step("Start the live run and wait for points")
        out["live_status_before"] = self._js(live, "ciq.status(root)")
        self._click(live, "Start")
        self._wait(live, "ciq.allPoints(root) > 0")
        out["live_trace_names"] = self._js(live, "ciq.pareto(root).data.map(t => t.name ?? null)")
        out["live_legend"] = self._js(live, "[...ciq.pareto(root).querySelectorAll('.legendtext')]"
                                            ".map(e => e.textContent)")
        self.next_step("Pause")
        self._click(live, "Pause")
        self._wait(live, f"{_STATE} !== 'running' && (ciq.status(root) || '').length > 0")
        out["pause_state"] = self._js(live, _STATE)
        pause_button = self._button(live, "Resume")
        out["pause_button"] = pause_button.inner_text().strip() if pause_button.count() else None
        if out["pause_state"] == "paused":
            self.page.wait_for_timeout(500)  # the call in flight lands, the bridge flushes
            n0, p0 = self._js(live, _EVALS), self._js(live, "ciq.allPoints(root)")
            self.page.wait_for_timeout(int(PAUSE_QUIET_S * 1000))
            n1, p1 = self._js(live, _EVALS), self._js(live, "ciq.allPoints(root)")
            out["pause_evaluations"], out["pause_points"] = [n0, n1], [p0, p1]
            out["pause_still_paused"] = self._js(live, _STATE)
            self.next_step("Resume")
            self._click(live, "Resume")
            self._wait(live, f"{_STATE} !== 'paused'")
            out["resume_state"] = self._js(live, _STATE)
            out["resume_button"] = self._button(live, "Pause").inner_text().strip() \
                if self._button(live, "Pause").count() else None
            self._wait(live, f"{_EVALS} > arg || !['running', 'paused'].includes({_STATE})", n1)
            out["resume_evaluations"] = self._js(live, _EVALS)
            self.next_step("Stop")
            if self._js(live, _STATE) == "running":
                self._click(live, "Stop")
        final = "^(" + "|".join(lb.FINAL_STATES) + "):"
        self._wait(live, "new RegExp(arg).test(ciq.status(root) || '')", final)
        self.page.wait_for_timeout(400)  # the last flush
        out["live_status"] = self._js(live, "ciq.status(root)")
        out["live_state"] = self._js(live, _STATE)
        out["live_evaluations"] = self._js(live, _EVALS)
        out["live_buttons_disabled"] = {b: self._button(live, b).is_disabled() for b in ("Start", "Pause", "Stop")}

    def _axis(self, live: Any) -> None:
        out = self.out
        self.next_step("change the y axis")
        titles = "[(ciq.pareto(root).querySelector('.xtitle') || {}).textContent || '', " \
                 "(ciq.pareto(root).querySelector('.ytitle') || {}).textContent || '']"
        out["axis_before"] = self._js(live, titles)
        y = live.locator(".widget-dropdown", has=self.page.locator("label", has_text=re.compile(r"^y$"))).first
        select = y.locator("select")
        options = select.evaluate("s => [...s.options].map(o => o.textContent)")
        current = select.evaluate("s => s.options[s.selectedIndex].textContent")
        other = next(o for o in options if o != current)
        out["axis_y_from_to"] = [current, other]
        select.select_option(label=other)
        self._wait(live, f"{titles}[1] !== arg", out["axis_before"][1])
        self.page.wait_for_timeout(300)
        out["axis_after"] = self._js(live, titles)

    def _row_and_point(self, live: Any) -> None:
        out = self.out
        self.next_step("pick a row in the evaluations table")
        self._tab(live, "evaluations")
        rows = self._js(live, _ROWS)
        out["row_count"] = len(rows)
        ok = [i for i, r in enumerate(rows) if re.match(r"^\s*\d+\s+\d+\s+ok(?!\s*\*)\s", r.replace("\u00a0", " "))]
        if not ok:
            raise RuntimeError(f"no ok row (not the baseline) in the table: {rows[:5]}")
        index = ok[min(2, len(ok) - 1)]
        picked = int(rows[index].replace("\u00a0", " ").split()[0])
        out["row_picked"] = picked
        live.locator(".compileiq-table-rows select").select_option(index=index)
        self._wait(live, f"{_DETAIL_ID} === arg", picked)
        self._wait(live, f"{_TAB} === 'point'")
        self._wait(live, f"JSON.stringify({self._selected}) === JSON.stringify([arg])", picked)
        out["row_detail_id"] = self._js(live, _DETAIL_ID)
        out["row_tab"] = self._js(live, _TAB)
        out["row_selected_trace"] = self._js(live, self._selected)

        self.next_step("click a point and see its row")
        ids = [i for i in self._point_ids(live) if i != picked]
        target = ids[len(ids) // 2]
        out["point_clicked"] = target
        shown = self._click_point(live, target)
        out["point_detail_id"] = shown
        self._wait(live, f"{_TABLE_PICK} === arg", shown)
        out["point_table_pick"] = self._js(live, _TABLE_PICK)
        out["point_selected_trace"] = self._js(live, self._selected)
        self._tab(live, "evaluations")
        out["point_table_pick_shown"] = self._js(live, _TABLE_PICK)
        self._shot(live, "lab-table.png")

    def _failures(self, live: Any) -> None:
        self.next_step("the failures tab")
        self._tab(live, "failures")
        self._wait(live, "!!root.querySelector('.compileiq-failures table')")
        self.out["failures"] = self._js(
            live, "[...root.querySelectorAll('.compileiq-failures tbody tr')].map(tr => "
                  "[...tr.querySelectorAll('td')].slice(0, 3).map(td => td.innerText.trim()))")
        self.out["failures_head"] = self._js(
            live, "[...root.querySelectorAll('.compileiq-failures thead th')].map(th => th.innerText.trim())")
        self.out["failure_pick_options"] = self._js(
            live, "[...(root.querySelector('.compileiq-failure-pick select') || {options: []}).options].length")
        self._shot(live, "lab-failures.png")

    def _runs_select(self, live: Any, names: list[str]) -> list[str]:
        """Pick the runs whose line ends with ``(<name>)`` in the runs list; returns the picked lines."""
        select = live.locator(".compileiq-runs select[multiple]").first
        lines: list[str] = select.evaluate("s => [...s.options].map(o => o.textContent)")
        index = [i for i, line in enumerate(lines) if any(line.rstrip().endswith(f"({n})") for n in names)]
        select.select_option(index=index)
        self.page.wait_for_timeout(300)  # the value reaches the kernel
        return [lines[i] for i in index]

    def _overlay_and_open(self, live: Any) -> None:
        out = self.out
        self.next_step("the runs tab: refresh, overlay the kernel runs' fronts")
        self._tab(live, "runs")
        self._click(live, "Refresh")
        names = [f"{a}.db" for a in ARCHS]
        self._wait(live, "arg.every(n => [...(root.querySelector('.compileiq-runs select[multiple]') || "
                         "{options: []}).options].some(o => o.textContent.trim().endsWith('(' + n + ')')))", names)
        out["runs_listed"] = self._js(live, "[...root.querySelector('.compileiq-runs select[multiple]').options]"
                                            ".map(o => o.textContent.trim())")
        out["overlay_picked"] = self._runs_select(live, names)
        self._click(live, "Overlay fronts")
        self._wait(live, f"(() => {{ const gd = root.querySelector({_OVERLAY!r}); "
                         "return gd && gd.data && gd.data.length > 0; })()")
        self.page.wait_for_timeout(300)
        out["overlay_traces"] = self._js(
            live, f"[...root.querySelector({_OVERLAY!r}).data].map(t => "
                  "({name: t.name, role: (t.meta || {}).role || null, points: (t.x || []).length}))")
        out["overlay_message"] = self._js(live, "(root.querySelector('.compileiq-runs-message') || {}).innerText")
        self._shot(live, "lab-overlay.png")

        self.next_step("open the sm_90 run")
        out["open_picked"] = self._runs_select(live, ["sm_90.db"])
        self._click(live, "Open")
        self._wait(live, "(ciq.status(root) || '').includes('sm_90.db') && ciq.allPoints(root) > 0")
        self.page.wait_for_timeout(400)
        out["open_status"] = self._js(live, "ciq.status(root)")
        out["open_title"] = self._js(live, "ciq.title(root)")
        out["open_points"] = self._js(live, "ciq.allPoints(root)")
        out["open_traces"] = self._js(live, "ciq.pareto(root).data.map(t => t.name)")
        out["open_runs_message"] = self._js(live, "(root.querySelector('.compileiq-runs-message') || {}).innerText")

    def _kernel_point(self, live: Any) -> None:
        out = self.out
        self.next_step("click a kernel point, machine code vs baseline")
        from compileiq_lab.widgets.live import BASELINE, FRONT

        base = (self._js(live, f"{_IDS_OF}({BASELINE})") or [None])[0]
        front = self._js(live, f"{_IDS_OF}({FRONT})") or []
        ids = self._point_ids(live)
        order = [i for i in front if i != base and i in ids] + [i for i in ids if i != base and i not in front]
        out["kernel_tried"] = []
        for eval_id in order[:4]:  # the first point whose machine code differs from the baseline's
            shown = self._click_point(live, eval_id)
            sass = live.locator("button.compileiq-sass-button, .compileiq-sass-button button").first
            self._wait(live, "!(root.querySelector('.compileiq-sass-button button, button.compileiq-sass-button')"
                             " || {disabled: true}).disabled")
            sass.click(timeout=self.ms)
            self._wait(live, "((root.querySelector('.compileiq-sass') || {}).innerText || '').trim().length > 0")
            text = self._js(live, "root.querySelector('.compileiq-sass').innerText")
            has_table = self._js(live, "!!root.querySelector('.compileiq-sass table')")
            out["kernel_tried"].append(shown)
            out["kernel_detail_id"], out["kernel_sass_text"] = shown, text[:1500]
            out["kernel_sass_table"] = has_table
            out["kernel_sass_metrics"] = self._js(
                live, "[...root.querySelectorAll('.compileiq-sass tr[data-metric]')].map(r => r.dataset.metric)")
            if has_table and "registers" in text:
                break
        out["kernel_detail"] = (self._js(live, "ciq.detail(root)") or "").splitlines()[0][:300]
        self._shot(live, "lab-point.png")

        self.next_step("Export ACF")
        export = self._button(live, "Export ACF")
        out["export_button"] = export.inner_text().strip() if export.count() else None
        export.click(timeout=self.ms)
        code = live.locator("code.compileiq-export")
        code.wait_for(state="visible", timeout=self.ms * 2)  # minimising the controls compiles a few times
        out["export_message"] = code.locator("xpath=..").inner_text().strip()
        link = live.locator("a.compileiq-download")
        out["export_link"] = link.count()
        out["export_href"] = (link.first.get_attribute("href") or "")[:40] if link.count() else ""
        out["export_download_name"] = link.first.get_attribute("download") if link.count() else None
        folder = live.locator("code.compileiq-export-folder").inner_text().strip()
        exported = (Path(folder) if Path(folder).is_absolute() else self.workdir / folder) / code.inner_text().strip()
        out["export_file"], out["export_exists"] = str(exported), exported.is_file()

        self.next_step("Copy flags")
        flags = self._js(live, "(root.querySelector('.compileiq-flags textarea') || {}).value || ''")
        out["copy_flags_text"] = flags
        copy = live.locator("button.compileiq-copy").first
        out["copy_label"] = copy.inner_text().strip()
        copy.scroll_into_view_if_needed()
        copy.click(timeout=self.ms)
        with contextlib.suppress(Exception):
            self.page.wait_for_function("(b) => b.textContent !== 'Copy flags'", arg=copy.element_handle(),
                                        timeout=5000)
        out["copy_label_after"] = copy.inner_text().strip()
        out["copy_recorded"] = self.page.evaluate("() => window.__ciqCopied || []")
        try:
            out["copy_clipboard"] = self.page.evaluate("() => navigator.clipboard.readText()")
        except Exception as exc:  # noqa: BLE001 - headless Chromium may refuse: the recorded text is checked then
            out["copy_clipboard"], out["copy_clipboard_error"] = None, f"{type(exc).__name__}: {exc}"[:300]

    def _replay(self, form: Any) -> None:
        out, page = self.out, self.page
        self.next_step("replay sm_90.db from the form")
        form.scroll_into_view_if_needed()
        path_input = form.locator("input[placeholder^='or a kernel folder']").first
        if not path_input.is_visible():
            form.locator(".compileiq-setup").get_by_text("setup", exact=True).first.click(timeout=self.ms)
            path_input.wait_for(state="visible", timeout=self.ms)
        target = form.locator(".widget-dropdown", has=page.locator("label", has_text=re.compile(r"^target$")))
        out["replay_target_before"] = target.locator("select").evaluate("s => s.options[s.selectedIndex].textContent")
        path_input.fill("compileiq_runs/sm_90.db")
        path_input.press("Enter")
        page.wait_for_function("(s) => s.selectedIndex >= 0 && s.options[s.selectedIndex].textContent === 'replay'",
                               arg=target.locator("select").element_handle(), timeout=self.ms)
        out["replay_target"] = target.locator("select").evaluate("s => s.options[s.selectedIndex].textContent")
        out["replay_note"] = self._js(form, "[...root.querySelectorAll('.widget-html-content')].map(e => e.innerText)"
                                            ".find(t => t.startsWith('replays the run')) || ''")
        speed = form.locator(".widget-slider", has=page.locator("label", has_text=re.compile(r"^speed")))
        out["replay_speed_visible"] = speed.first.is_visible() if speed.count() else False
        self._click(form, "Start")
        self._wait(form, "ciq.allPoints(root) > 0")
        out["replay_first_status"] = self._js(form, "ciq.status(root)")
        final = "^(" + "|".join(lb.FINAL_STATES) + "):"
        self._wait(form, "new RegExp(arg).test(ciq.status(root) || '')", final)
        page.wait_for_timeout(400)
        out["replay_status"] = self._js(form, "ciq.status(root)")
        out["replay_state"] = self._js(form, _STATE)
        out["replay_evaluations"] = self._js(form, _EVALS)
        out["replay_points"] = self._js(form, "ciq.evalPoints(root).length")
        out["replay_title"] = self._js(form, "ciq.title(root)")
        self._shot(form, "lab-replay.png")


def main(argv: list[str] | None = None) -> int:
    """Run the flow once; write its facts as JSON to stdout (the screenshots to ``--shots``)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shots", type=Path, default=None, help="folder for the screenshots (e.g. docs)")
    parser.add_argument("--workdir", type=Path, default=None, help="the notebook's folder (default: a temporary one)")
    args = parser.parse_args(argv)
    missing = lb.missing_requirements()
    if missing:
        sys.stderr.write(f"cannot run: {missing}\n")
        return 2
    with tempfile.TemporaryDirectory(prefix="compileiq-lab-v2-") as tmp:
        facts = run_lab_v2_flow(args.workdir or Path(tmp), args.shots)
    sys.stdout.write(json.dumps(facts, indent=1, default=str) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
