"""Drive the notebook dashboard in a real browser: JupyterLab in a subprocess, headless Chromium through Playwright.

Shared by ``tests/widgets/test_lab_browser.py`` (the end-to-end check) and ``bench/bench_lab.py`` (latencies).
Not a test module itself. The flow (``run_lab_flow``): open a notebook whose last cell shows a
``Dashboard()``, run all cells, click Start, wait for the Pareto scatter's points and the "finished"
status, click a point, wait for the detail panel, click Export, check the written file. Nothing is
fetched from the network: JupyterLab's news, update check and extension manager are off, and the
browser aborts (and reports) every request that does not go to the local server.
"""

from __future__ import annotations

import contextlib
import copy
import importlib.util
import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Self

REPO = Path(__file__).resolve().parents[2]
QUICKSTART = REPO / "notebooks" / "01_quickstart.ipynb"
KERNELS = REPO / "kernels"
#: The cell the fallback notebook runs (the quickstart notebook's last cell).
DASHBOARD_CELL = "from compileiq_lab.widgets import Dashboard\n\ndash = Dashboard()\ndash"
#: Modules the flow needs (in this interpreter: it also runs the notebook's kernel).
REQUIRED_MODULES = ("playwright", "jupyterlab", "ipykernel", "ipywidgets", "anywidget", "plotly")
CHROMIUM_ARGS = ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-quic",
                 "--no-proxy-server"]
#: Run states the dashboard status can end in (compileiq_lab.run.thread.RUN_STATES minus the live ones).
FINAL_STATES = ("finished", "exhausted", "baseline_failed", "stopped", "interrupted", "failed")
VIEWPORT = {"width": 1400, "height": 1600}

# JupyterLab user settings: every cell in the DOM (the dashboard cell must be findable), no news,
# no update check, no extension manager, no autosave into the copied notebook.
_LAB_SETTINGS = {
    "@jupyterlab/notebook-extension/tracker.jupyterlab-settings": {"windowingMode": "none"},
    "@jupyterlab/apputils-extension/notification.jupyterlab-settings": {"checkForUpdates": False,
                                                                         "fetchNews": "false"},
    "@jupyterlab/extensionmanager-extension/plugin.jupyterlab-settings": {"enabled": False},
    "@jupyterlab/docmanager-extension/plugin.jupyterlab-settings": {"autosave": False},
}

# -- element lookup (in the page) ------------------------------------------------------------------
# The dashboard is the output of the last cell that shows an ipywidgets "Start" button. Inside it:
# - the Pareto scatter: the plotly graph div (.js-plotly-plot, a FigureWidget) with a trace named
#   "selected" (the live scatter's ring; else "Pareto front": the history figure has neither); its points
#   are ``path.point`` in ``.scatterlayer``, the evaluations trace is the one whose d3 data says
#   trace.index == 0 (live.EVALS);
# - the status: the widget HTML reading "<state>: generation i/n, ..." (Dashboard._show_progress);
# - the detail panel: the widget HTML reading "eval N (generation ...)" (detail.describe).
# A class ``compileiq-pareto`` / ``compileiq-status`` / ``compileiq-detail`` is used first where present.
_JS_HELPERS = r"""
const ciq = {
  status(root) {
    const marked = root.querySelector('.compileiq-status .widget-html-content, .compileiq-status');
    if (marked) return marked.innerText.trim();
    for (const el of root.querySelectorAll('.widget-html-content')) {
      const t = el.innerText.trim();
      if (/^[a-z]+: generation \d+\/\d+/.test(t)) return t;
    }
    return null;
  },
  detail(root) {
    for (const el of root.querySelectorAll('.compileiq-detail .widget-html-content, .widget-html-content')) {
      const t = el.innerText.trim();
      if (/^eval \d+/.test(t)) return t;
    }
    return null;
  },
  pareto(root) {
    const marked = root.querySelector('.compileiq-pareto.js-plotly-plot, .compileiq-pareto .js-plotly-plot');
    if (marked) return marked;
    const plots = [...root.querySelectorAll('.js-plotly-plot')];
    const named = (name) => plots.find(gd => (gd.data || []).some(t => t.name === name));
    return named('selected') || named('Pareto front') || null;  // the live scatter has a "selected" ring
  },
  evalPoints(root) {  // path.point of the evaluations trace (trace index 0), falling back to every point
    const gd = ciq.pareto(root);
    if (!gd) return [];
    const traces = [...gd.querySelectorAll('.scatterlayer g.trace')];
    const evals = traces.find(g => g.__data__ && g.__data__[0] && g.__data__[0].trace
                                   && g.__data__[0].trace.index === 0);
    return [...(evals || gd).querySelectorAll('path.point')];
  },
  allPoints(root) {
    const gd = ciq.pareto(root);
    return gd ? gd.querySelectorAll('.scatterlayer path.point').length : 0;
  },
  title(root) {
    const gd = ciq.pareto(root);
    const t = gd && gd.querySelector('.gtitle');
    return t ? t.textContent : null;
  },
  // [model name, messages pending, attributes awaiting the kernel's echo] of each widget model (of that name, when
  // given) with a change the kernel has not yet taken; null without a manager (see _JS_FIND_MANAGER). Plotly's
  // figures are left out by naming a model: their _js2py_* attributes are never echoed.
  unsynced(name) {
    const m = window.__ciqManager;
    if (!m) return null;
    return [...m._modelsSync.values()].filter(x => (!name || x.get('_model_name') === name)
      && (x._pending_msgs > 0 || (x._expectedEchoMsgIds && x._expectedEchoMsgIds.size > 0)))
      .map(x => [x.get('_model_name'), x._pending_msgs, [...(x._expectedEchoMsgIds || new Map()).keys()]]);
  },
};
"""
# The current notebook's widget manager, kept as window.__ciqManager for ciq.unsynced(); true when found. The manager
# is reached through the renderer of a widget output (its ``_manager`` promise). ipykernel 7 routes each comm's
# messages to the kernel thread that last wrote to it, so two clicks on two widgets can reach the kernel in the
# reverse order; a step whose effect stays in the page (a tab opened) waits until the kernel has taken it.
_JS_FIND_MANAGER = r"""async () => {
  const seen = new Set(), stack = [window.jupyterapp.shell.currentWidget.content];
  while (stack.length) {
    const w = stack.pop();
    if (!w || seen.has(w)) continue;
    seen.add(w);
    if (w._manager && w._manager.promise) { window.__ciqManager = await w._manager.promise; return true; }
    stack.push(...(w.widgets || []), w.outputArea);
  }
  return false;
}"""
# Error outputs of the current notebook's cells: ["cell 3: NameError: ...", ...].
_JS_CELL_ERRORS = r"""() => {
  const cells = window.jupyterapp.shell.currentWidget.content.model.cells, errors = [];
  for (let i = 0; i < cells.length; i++) {
    const c = cells.get(i);
    if (c.type !== 'code') continue;
    for (let j = 0; j < c.outputs.length; j++) {
      const o = c.outputs.get(j).toJSON();
      if (o.output_type === 'error') errors.push(`cell ${i + 1}: ${o.ename}: ${o.evalue}`.slice(0, 500));
    }
  }
  return errors;
}"""
# Timing in the page, started by a capture listener on the Start button: performance.now() at the
# click, at the first animation frame with Pareto points in the DOM, and at the first with a final status.
_JS_ARM = "(root, args) => {" + _JS_HELPERS + r"""
  const btn = args.button;
  const st = window.__ciqLab = {t0: null, status_changed: null, plot: null, points: null, finished: null,
                                state: null, status: null};
  const final = new RegExp('^(' + args.finalStates.join('|') + '):');
  const before = ciq.status(root);
  function frame() {
    const now = performance.now();
    if (st.status_changed === null && ciq.status(root) !== before) st.status_changed = now;
    if (st.plot === null && ciq.pareto(root)) st.plot = now;
    if (st.points === null && ciq.allPoints(root) > 0) st.points = now;
    const s = ciq.status(root);
    if (st.finished === null && s && final.test(s)) {
      st.finished = now; st.state = s.split(':')[0]; st.status = s;
    }
    if (st.points === null || st.finished === null) requestAnimationFrame(frame);
  }
  btn.addEventListener('click', () => { st.t0 = performance.now(); requestAnimationFrame(frame); },
                       {capture: true, once: true});
}
"""


def chromium_path() -> str | None:
    """The Chromium to drive (``chromium`` or ``chromium-browser`` on PATH), or None."""
    return shutil.which("chromium") or shutil.which("chromium-browser")


def missing_requirements() -> str | None:
    """Why the browser flow cannot run here (for a skip reason), or None."""
    if chromium_path() is None:
        return "no Chromium on PATH (chromium or chromium-browser; e.g. apt-get install chromium)"
    missing = [m for m in REQUIRED_MODULES if importlib.util.find_spec(m) is None]
    if missing:
        return f"not importable: {', '.join(missing)} (pip install -e '.[lab]' playwright anywidget ipykernel)"
    return None


def _cell(source: str) -> dict[str, Any]:
    return {"cell_type": "code", "execution_count": None, "id": secrets.token_hex(4), "metadata": {},
            "outputs": [], "source": source.splitlines(keepends=True)}


def dashboard_notebook(path: Path) -> Path:
    """Write a one-cell notebook that shows the dashboard (the fallback when there is no quickstart)."""
    nb = {"cells": [_cell(DASHBOARD_CELL)], "nbformat": 4, "nbformat_minor": 5,
          "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3 (ipykernel)",
                                      "language": "python"},
                       "language_info": {"name": "python"}}}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(nb, indent=1) + "\n")
    return path


def _last_code_cell(nb: dict[str, Any]) -> str:
    code = [c for c in nb.get("cells", []) if c.get("cell_type") == "code"]
    src = code[-1].get("source", "") if code else ""
    return "".join(src) if isinstance(src, list) else src


def pick_notebook(tmp: Path) -> Path:
    """The quickstart notebook when it exists and ends with a Dashboard, else a generated one in ``tmp``."""
    with contextlib.suppress(OSError, ValueError):
        if "Dashboard(" in _last_code_cell(json.loads(QUICKSTART.read_text())):
            return QUICKSTART
    return dashboard_notebook(tmp / "dashboard_only.ipynb")


def _copy_notebook(notebook: Path, workdir: Path) -> tuple[Path, str]:
    """Copy without outputs or saved widget state (a stale saved Start button must not be found); returns
    the copy and the notebook's kernel name."""
    nb = json.loads(notebook.read_text())
    nb = copy.deepcopy(nb)
    for c in nb.get("cells", []):
        if c.get("cell_type") == "code":
            c["outputs"], c["execution_count"] = [], None
    nb.get("metadata", {}).pop("widgets", None)
    kernel = (nb.get("metadata", {}).get("kernelspec") or {}).get("name") or "python3"
    if not re.fullmatch(r"[A-Za-z0-9._-]+", kernel):
        kernel = "python3"
    nb.setdefault("metadata", {})["kernelspec"] = {
        **(nb["metadata"].get("kernelspec") or {}), "name": kernel,
        "display_name": (nb["metadata"].get("kernelspec") or {}).get("display_name", "Python 3 (ipykernel)"),
        "language": "python"}
    out = workdir / notebook.name
    out.write_text(json.dumps(nb, indent=1) + "\n")
    return out, kernel


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _descendants(pid: int) -> list[int]:
    """PIDs of every live descendant of ``pid`` (Linux /proc; [] elsewhere)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").glob("[0-9]*"):
        with contextlib.suppress(OSError, ValueError, IndexError):
            stat = (entry / "stat").read_text()
            ppid = int(stat[stat.rindex(")") + 2:].split()[1])
            children.setdefault(ppid, []).append(int(entry.name))
    out, todo = [], [pid]
    while todo:
        for c in children.get(todo.pop(), []):
            out.append(c)
            todo.append(c)
    return out


#: Names a folder holding another compileiq_lab package for the lab's kernel to import instead of this checkout's.
PACKAGE_ROOT_VAR = "COMPILEIQ_LAB_PACKAGE_ROOT"


class JupyterLab:
    """JupyterLab serving ``root`` on a free local port, with its own config/data/runtime folders
    (a python kernelspec for this interpreter, quiet lab settings). Use as a context manager."""

    def __init__(self, root: Path, kernel_name: str = "python3", timeout: float = 120.0) -> None:
        self.root, self.kernel_name, self.timeout = root, kernel_name, timeout
        self.port, self.token = _free_port(), secrets.token_hex(16)
        self.home = Path(tempfile.mkdtemp(prefix="compileiq-lab-"))
        self.log_path = self.home / "jupyterlab.log"
        self.proc: subprocess.Popen[bytes] | None = None
        self._opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # localhost: no proxy

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _prepare(self) -> dict[str, str]:
        config, data, runtime = (self.home / d for d in ("config", "data", "runtime"))
        names = {self.kernel_name, "python3"}
        for name in names:  # the user data dir comes first on the kernelspec path: this interpreter wins
            spec = data / "kernels" / name
            spec.mkdir(parents=True, exist_ok=True)
            (spec / "kernel.json").write_text(json.dumps({
                "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
                "display_name": "Python 3 (ipykernel)", "language": "python",
                "metadata": {"debugger": False}}, indent=1))
        settings = config / "lab" / "user-settings"
        for rel, value in _LAB_SETTINGS.items():
            f = settings / rel
            f.parent.mkdir(parents=True, exist_ok=True)
            f.write_text(json.dumps(value, indent=1))
        runtime.mkdir(parents=True, exist_ok=True)
        (self.home / "tmp").mkdir(exist_ok=True)  # the notebook's temporary folders go away with the server
        env = dict(os.environ)
        # the package the kernel imports: this checkout, or (a benchmark against an older revision) another tree
        package = env.pop(PACKAGE_ROOT_VAR, "") or str(REPO)
        env.update({"COMPILEIQ_KERNELS": str(KERNELS), "JUPYTER_CONFIG_DIR": str(config),
                    "JUPYTER_DATA_DIR": str(data), "JUPYTER_PATH": str(data), "JUPYTER_RUNTIME_DIR": str(runtime),
                    "IPYTHONDIR": str(self.home / "ipython"), "PYDEVD_DISABLE_FILE_VALIDATION": "1",
                    "JUPYTER_PLATFORM_DIRS": "0", "TMPDIR": str(self.home / "tmp"),
                    "PYTHONPATH": os.pathsep.join(p for p in (package, env.get("PYTHONPATH", "")) if p)})
        env.pop("JUPYTER_PREFER_ENV_PATH", None)
        return env

    def command(self) -> list[str]:
        settings = self.home / "config" / "lab"
        return [sys.executable, "-m", "jupyterlab", "--no-browser", "--ServerApp.ip=127.0.0.1",
                f"--ServerApp.port={self.port}", "--ServerApp.port_retries=0",
                f"--IdentityProvider.token={self.token}", "--allow-root", f"--ServerApp.root_dir={self.root}",
                "--LabApp.expose_app_in_browser=True", "--ServerApp.open_browser=False",
                # nothing from the network: no news feed, no PyPI update check, no PyPI extension manager
                "--LabApp.news_url=None",
                "--LabApp.check_for_updates_class=jupyterlab.handlers.announcements.NeverCheckForUpdate",
                "--LabApp.extension_manager=readonly",
                f"--LabApp.user_settings_dir={settings / 'user-settings'}",
                f"--LabApp.workspaces_dir={settings / 'workspaces'}",
                "--ServerApp.terminals_enabled=False"]

    def api(self, path: str, method: str = "GET", timeout: float = 5.0) -> Any:
        """Call the REST API; returns the decoded JSON (None for an empty answer)."""
        sep = "&" if "?" in path else "?"
        req = urllib.request.Request(f"{self.url}{path}{sep}token={self.token}", method=method,
                                     data=b"" if method != "GET" else None)
        with self._opener.open(req, timeout=timeout) as r:
            body = r.read()
        return json.loads(body) if body else None

    def log_tail(self, n: int = 4000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-n:]
        except OSError:
            return ""

    def start(self) -> Self:
        env = self._prepare()
        log = open(self.log_path, "wb")
        try:
            self.proc = subprocess.Popen(self.command(), cwd=self.root, env=env, stdout=log,
                                         stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                         start_new_session=True)
        finally:
            log.close()
        deadline = time.monotonic() + self.timeout
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"JupyterLab exited with {self.proc.returncode}:\n{self.log_tail()}")
            with contextlib.suppress(OSError, ValueError):
                self.api("/api/status", timeout=2)
                return self
            if time.monotonic() > deadline:
                raise TimeoutError(f"JupyterLab did not answer /api/status in {self.timeout:.0f} s:\n"
                                   f"{self.log_tail()}")
            time.sleep(0.2)

    def stop(self) -> None:
        """Shut down kernels and server (REST shutdown, then SIGTERM, then SIGKILL to its process group),
        then kill whatever it started that is still alive (kernels live in their own sessions)."""
        proc, self.proc = self.proc, None
        if proc is not None:
            spawned = _descendants(proc.pid)
            if proc.poll() is None:
                with contextlib.suppress(OSError, ValueError):
                    self.api("/api/shutdown", method="POST", timeout=5)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(15)
            for sig, wait in ((signal.SIGTERM, 10), (signal.SIGKILL, 5)):
                if proc.poll() is not None:
                    break
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(proc.pid, sig)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(wait)
            for pid in spawned:  # only processes this server started, by PID
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
        shutil.rmtree(self.home, ignore_errors=True)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


@contextlib.contextmanager
def _browser(base_url: str) -> Iterator[tuple[Any, dict[str, list[str]]]]:
    """A Chromium page that only reaches ``base_url``; yields (page, log of blocked requests and errors)."""
    from playwright.sync_api import sync_playwright

    log: dict[str, list[str]] = {"blocked": [], "page_errors": [], "console_errors": [], "kernel_errors": [],
                                 "control_comms": [], "step": []}
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_ARGS)
        try:
            context = browser.new_context(viewport=VIEWPORT, device_scale_factor=1)

            def block(route: Any) -> None:
                log["blocked"].append(route.request.url)
                route.abort()
            # a regex (matched by the Playwright driver, no round trip to Python for the local requests)
            context.route(re.compile("^(?!" + re.escape(base_url) + "/|data:|blob:)"), block)
            page = context.new_page()

            def watch(ws: Any) -> None:
                ws.on("framereceived", lambda frame: _kernel_error(frame, log))
                ws.on("framesent", lambda frame: _control_comm(frame, log))
            page.on("websocket", watch)
            page.on("pageerror", lambda e: log["page_errors"].append(str(e)[:500]))
            page.on("console", lambda m: log["console_errors"].append(m.text[:500]) if m.type == "error" else None)
            yield page, log
        finally:
            browser.close()


def _ws_message(frame: Any) -> dict[str, Any] | None:
    """A kernel websocket message as a dict (JSON text, or the binary v1 protocol: offsets, then channel,
    header, parent_header, metadata, content), or None for anything else."""
    with contextlib.suppress(ValueError, TypeError, IndexError, UnicodeDecodeError):
        if isinstance(frame, str):
            msg = json.loads(frame)
            return msg if isinstance(msg, dict) else None
        data = bytes(frame)
        n = int.from_bytes(data[:8], "little")
        offsets = [int.from_bytes(data[8 + 8 * i:16 + 8 * i], "little") for i in range(n)]
        parts = [data[offsets[i]:offsets[i + 1]].decode() for i in range(min(n - 1, 5))]
        channel, header, parent, _meta, content = parts[0], *map(json.loads, parts[1:5])
        return {"channel": channel, "header": header, "parent_header": parent, "content": content}
    return None


def _control_comm(frame: Any, log: dict[str, list[str]]) -> None:
    """Record the id of each comm the page opens on the widget manager's control target
    (``jupyter.widget.control``): JupyterLab opens one whenever it connects to a kernel, and a kernel that has
    not imported ipywidgets yet answers its first request with "No such comm: <that id>", which is not ours."""
    msg = _ws_message(frame)
    if not msg or (msg.get("header") or {}).get("msg_type") != "comm_open":
        return
    content = msg.get("content") or {}
    if content.get("target_name") == "jupyter.widget.control" and content.get("comm_id"):
        log["control_comms"].append(str(content["comm_id"]))


def benign_kernel_errors(log: dict[str, list[str]]) -> list[str]:
    """The kernel errors in ``log`` that are JupyterLab's, not the dashboard's: "No such comm" for a control
    comm the page opened before the kernel had imported ipywidgets (at any step: on a slow machine the
    widget manager connects while the first cells already run)."""
    controls = set(log.get("control_comms", []))
    return [e for e in log.get("kernel_errors", [])
            if (m := re.search(r"\] No such comm: (\S+)", e)) and m.group(1) in controls]


def _kernel_error(frame: Any, log: dict[str, list[str]]) -> None:
    """Record stderr and error output the kernel sends in answer to a widget message (not to a cell): what
    JupyterLab shows only in its log console."""
    msg = _ws_message(frame)
    if not msg or msg.get("channel") != "iopub":
        return
    kind = (msg.get("header") or {}).get("msg_type")
    parent = (msg.get("parent_header") or {}).get("msg_type")
    content = msg.get("content") or {}
    if parent == "comm_msg" and (kind == "error" or (kind == "stream" and content.get("name") == "stderr")):
        text = content.get("text") or f"{content.get('ename')}: {content.get('evalue')}"
        log["kernel_errors"].append(f"[during: {log['step'][-1] if log.get('step') else '?'}] {str(text)[:800]}")


def _js(page_or_locator: Any, body: str, arg: Any = None) -> Any:
    """Evaluate ``(root, arg) => ...`` with the helpers in scope."""
    return page_or_locator.evaluate(f"(root, arg) => {{ {_JS_HELPERS} return ({body}); }}", arg)


def run_lab_flow(notebook: Path, workdir: Path, screenshot: Path | None = None,
                 timeout: float = 120.0, broken_kernel: str | None = None) -> dict[str, Any]:
    """Open ``notebook`` (a copy in ``workdir``) in JupyterLab in headless Chromium, run it, and drive its
    dashboard: Start, wait for points and the end of the run, click a point, export it; with ``broken_kernel``
    (CUDA source), then start a second run of that kernel from the form under a ptxas-only space.

    Returns latencies in seconds (``*_s``; ``browser_*`` measured in the page from the click event to the
    first animation frame with the change in the DOM, the others by this process around Playwright calls)
    and facts (notebook, final status, selected eval, exported file, blocked requests, page errors).

    Raises:
        RuntimeError: A step did not happen within ``timeout`` seconds (or failed); the message names the
            step and carries what the page showed and the JupyterLab log tail, and a screenshot of the
            page is left in ``workdir/lab-failure.png``.
    """
    workdir = Path(workdir).resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    nb_path, kernel = _copy_notebook(Path(notebook), workdir)
    rel = Path(notebook).resolve()
    rel_text = str(rel.relative_to(REPO)) if rel.is_relative_to(REPO) else rel.name  # no machine paths in results
    out: dict[str, Any] = {"notebook": rel_text, "notebook_is_quickstart": Path(notebook) == QUICKSTART}
    lab = JupyterLab(workdir, kernel, timeout)
    flow = _Flow(out, timeout)
    flow.broken_kernel = broken_kernel
    t_all = time.perf_counter()
    try:
        lab.start()
        out["server_start_s"] = time.perf_counter() - t_all
        with _browser(lab.url) as (page, browser_log):
            out["browser_log"] = browser_log
            try:
                flow.drive(page, lab, nb_path, workdir, screenshot)
            except Exception as exc:
                raise RuntimeError(f"lab flow failed at step {flow.step!r}: {exc}\n"
                                   f"--- the page ---\n{_diagnose(page, workdir)}") from exc
        out["total_s"] = time.perf_counter() - t_all
        return out
    except Exception as exc:
        raise RuntimeError(f"{exc}\n--- JupyterLab log tail ---\n{lab.log_tail()}") from exc
    finally:
        lab.stop()


def open_notebook(page: Any, lab: JupyterLab, nb_path: Path, ms: float, then: Any = None) -> None:
    """Open ``nb_path`` in the lab and wait until its kernel is idle (``then()`` is called once the notebook panel
    is there, before the kernel is waited for)."""
    page.goto(f"{lab.url}/lab/tree/{nb_path.name}?token={lab.token}", timeout=ms)
    page.wait_for_selector(".jp-NotebookPanel .jp-Notebook .jp-Cell", timeout=ms)
    page.wait_for_function("() => window.jupyterapp && window.jupyterapp.shell.currentWidget"
                           " && window.jupyterapp.shell.currentWidget.sessionContext", timeout=ms)
    if then is not None:
        then()
    page.evaluate("""async () => { const w = window.jupyterapp.shell.currentWidget;
                                   await w.context.ready; await w.sessionContext.ready; }""")
    page.wait_for_function("() => { const k = window.jupyterapp.shell.currentWidget.sessionContext"
                           ".session?.kernel; return k && k.status === 'idle'; }", timeout=ms)


# What a failure message reports of the page: (label, JS evaluated in it, how its value is written).
_DIAGNOSTICS: tuple[tuple[str, str, Callable[[Any], str]], ...] = (
    ("timing", "() => window.__ciqLab || null", json.dumps),
    ("kernel", "() => window.jupyterapp.shell.currentWidget.sessionContext.session?.kernel?.status", str),
    ("widget html", "() => [...document.querySelectorAll('.widget-html-content')].map(e => e.innerText.slice(0, 200))"
                    ".filter(t => t)", json.dumps),
    ("plots (traces, points)", "() => [...document.querySelectorAll('.js-plotly-plot')].map(gd => [(gd.data || [])"
                               ".map(t => t.name), gd.querySelectorAll('.scatterlayer path.point').length])",
     json.dumps),
    ("current tab of each widget tab bar", "() => [...document.querySelectorAll('.widget-tab-bar')].map(b => "
                                           "((b.querySelector('.lm-mod-current') || {}).innerText || '').trim())",
     json.dumps),
    ("widget models the kernel has not taken yet", f"() => {{ {_JS_HELPERS} return ciq.unsynced(); }}", json.dumps),
    ("errors in cells", _JS_CELL_ERRORS, json.dumps),
)


def _diagnose(page: Any, workdir: Path) -> str:
    """What the page shows (for a failure message), and a screenshot in ``workdir/lab-failure.png``."""
    lines = []
    with contextlib.suppress(Exception):
        page.screenshot(path=str(workdir / "lab-failure.png"))
        lines.append(f"screenshot: {workdir / 'lab-failure.png'}")
    for label, js, write in _DIAGNOSTICS:
        with contextlib.suppress(Exception):
            lines.append(f"{label}: {write(page.evaluate(js))}")
    return "\n".join(lines)


class _Flow:
    """The steps in the page; ``step`` says which one is running (for error messages)."""

    def __init__(self, out: dict[str, Any], timeout: float) -> None:
        self.out, self.ms = out, timeout * 1000
        self._steps: list[str] = []
        self.step = "start JupyterLab"

    @property
    def step(self) -> str:
        """The step running now (kept in the browser log too, so that an error names its step)."""
        return self._steps[-1]

    @step.setter
    def step(self, name: str) -> None:
        self._steps.append(name)
        log = self.out.get("browser_log")
        if log is not None:
            log["step"] = self._steps

    def drive(self, page: Any, lab: JupyterLab, nb_path: Path, workdir: Path, screenshot: Path | None) -> None:
        out, ms = self.out, self.ms
        self.step = "open the notebook"
        t = time.perf_counter()
        open_notebook(page, lab, nb_path, ms, then=lambda: out.update(lab_load_s=time.perf_counter() - t))
        out["chromium"] = page.context.browser.version if page.context.browser else None
        out["kernel_ready_s"] = time.perf_counter() - t
        if page.locator(".jp-Dialog").count():
            raise RuntimeError(f"a dialog is open: {page.locator('.jp-Dialog').first.inner_text()[:500]}")
        with contextlib.suppress(Exception):  # more room for the dashboard
            page.evaluate("() => { const s = window.jupyterapp.shell; if (!s.leftCollapsed) "
                          "return window.jupyterapp.commands.execute('application:toggle-left-area'); }")

        self.step = "run all cells and wait for the dashboard's Start button"
        t = time.perf_counter()
        page.evaluate("() => window.jupyterapp.commands.execute('notebook:run-all-cells')")
        start_re = re.compile(r"^\s*Start\s*$")
        root = page.locator(".jp-NotebookPanel .jp-Cell").filter(
            has=page.locator("button.widget-button", has_text=start_re)).last
        start = root.locator("button.widget-button", has_text=start_re).first
        # the Start button, or an error in a cell before it (Run All stops there): fail at once, saying which
        page.wait_for_function(f"() => ({_JS_CELL_ERRORS})().length > 0 || [...document.querySelectorAll("
                               "'.jp-NotebookPanel button.widget-button')].some(b => b.innerText.trim() === 'Start'"
                               " && b.offsetParent !== null)", timeout=ms)
        errors = page.evaluate(_JS_CELL_ERRORS)
        if errors and not start.is_visible():
            raise RuntimeError("a cell raised before the dashboard was shown: " + "; ".join(errors))
        start.wait_for(state="visible", timeout=ms)
        out["run_all_to_start_button_s"] = time.perf_counter() - t
        self.step = "wait for the notebook to finish running"
        page.wait_for_function("() => { const w = window.jupyterapp.shell.currentWidget; "
                               "const k = w.sessionContext.session?.kernel; return k && k.status === 'idle' && "
                               "![...w.content.node.querySelectorAll('.jp-InputPrompt')]"
                               ".some(e => e.textContent.includes('*')); }", timeout=ms)
        out["run_all_s"] = time.perf_counter() - t
        output = root.locator(".jp-OutputArea").first

        self.step = "click Start and wait for Pareto points"
        output.evaluate(_JS_ARM, {"button": start.element_handle(), "finalStates": list(FINAL_STATES)})
        start.scroll_into_view_if_needed()
        t0 = time.perf_counter()
        start.click(timeout=ms)
        page.wait_for_function("() => window.__ciqLab.points !== null", timeout=ms, polling="raf")
        out["click_to_points_s"] = time.perf_counter() - t0
        self.step = "wait for the run to finish"
        page.wait_for_function("() => window.__ciqLab.finished !== null", timeout=ms, polling="raf")
        out["click_to_finished_s"] = time.perf_counter() - t0
        st = page.evaluate("() => window.__ciqLab")
        for key in ("status_changed", "plot", "points", "finished"):  # None: never seen (e.g. no status match)
            out[f"browser_click_to_{key}_s"] = None if st[key] is None else (st[key] - st["t0"]) / 1000
        out["final_state"], out["status"] = st["state"], st["status"]
        page.wait_for_timeout(500)  # a last flush after "finished" may still redraw
        out["pareto_title"] = _js(output, "ciq.title(root)")
        out["points"] = _js(output, "ciq.allPoints(root)")
        out["evaluation_points"] = n_eval = _js(output, "ciq.evalPoints(root).length")

        self.step = "click a point and wait for the detail panel"
        export = root.locator("button.widget-button", has_text=re.compile(r"^\s*Export (JSON|ACF)\s*$")).first
        detail = None
        for i in range(min(n_eval, 5)):  # the first point that shows an exportable evaluation
            point = output.evaluate_handle(f"(root) => {{ {_JS_HELPERS} return ciq.evalPoints(root)[{i}]; }}")
            point = point.as_element()
            assert point is not None
            point.scroll_into_view_if_needed()
            box = point.bounding_box()
            assert box is not None
            x, y = box["x"] + box["width"] / 2, box["y"] + box["height"] / 2
            before = _js(output, "ciq.detail(root)")
            page.mouse.move(x - 15, y - 15)
            page.mouse.move(x, y, steps=5)  # plotly picks the point under the mouse on hover
            with contextlib.suppress(Exception):
                page.locator(".hoverlayer .hovertext").first.wait_for(state="visible", timeout=3000)
            t = time.perf_counter()
            page.mouse.click(x, y)
            page.wait_for_function(
                f"([root, prev]) => {{ {_JS_HELPERS} const d = ciq.detail(root); return d !== null && d !== prev; }}",
                arg=[output.element_handle(), before], timeout=ms, polling="raf")
            out["point_click_to_detail_s"] = time.perf_counter() - t
            detail = _js(output, "ciq.detail(root)")
            if export.is_enabled():
                break
        if detail is None:
            raise RuntimeError("no point to click in the Pareto scatter")
        out["detail"] = detail.splitlines()[0][:300]
        out["eval_id"] = int(re.match(r"eval (\d+)", detail).group(1))  # type: ignore[union-attr]
        out["export_button"] = export.inner_text().strip()
        if screenshot is not None:
            self._deselect(page, output, point)

        self.step = "export the point"
        t = time.perf_counter()
        export.click(timeout=ms)
        code = root.locator("code.compileiq-export")
        code.wait_for(state="visible", timeout=ms)
        out["export_click_to_wrote_s"] = time.perf_counter() - t
        out["export_message"] = code.locator("xpath=..").inner_text().strip()
        name = code.inner_text().strip()
        folder = root.locator("code.compileiq-export-folder").inner_text().strip()
        exported = (Path(folder) if Path(folder).is_absolute() else workdir / folder) / name  # relative: notebook
        out["export_file"], out["export_exists"] = str(exported), exported.is_file()
        out["x_axis_title"] = _js(output, "(ciq.pareto(root).querySelector('.xtitle') || {}).textContent || ''")
        out["y_axis_title"] = _js(output, "(ciq.pareto(root).querySelector('.ytitle') || {}).textContent || ''")
        out["detail_text"] = _js(output, "ciq.detail(root)")
        out["error_line"] = _js(output, "(root.querySelector('.compileiq-error') || {}).innerText || ''")
        out["notes"] = _js(output, "(root.querySelector('.compileiq-notes') || {}).innerText || ''")

        if screenshot is not None:
            self.step = "take the screenshot"
            screenshot = Path(screenshot)
            screenshot.parent.mkdir(parents=True, exist_ok=True)
            output.evaluate("el => el.scrollIntoView({block: 'start'})")
            page.wait_for_timeout(300)
            self._hover(page, point)
            page.screenshot(path=str(screenshot), full_page=True)
            out["screenshot"] = str(screenshot)
        if self.broken_kernel is not None:
            self._broken_run(page, root, output, workdir)

    broken_kernel: str | None = None

    def _broken_run(self, page: Any, root: Any, output: Any, workdir: Path) -> None:
        """A second run from the same form: a kernel whose defaults do not compile, under a ptxas-only space.
        The last run's point must leave the detail panel, and a banner must show the compiler's message."""
        self.step = "start a run of a broken kernel"
        source = workdir / "broken.cu"
        source.write_text(self.broken_kernel or "")
        path_input = root.locator("input[placeholder^='or a kernel folder']").first
        if not path_input.is_visible():  # the setup folds away while a run goes: open it again
            root.locator(".compileiq-setup").get_by_text("setup", exact=True).first.click(timeout=self.ms)
            path_input.wait_for(state="visible", timeout=self.ms)
        path_input.fill(str(source))
        path_input.press("Enter")
        space = root.locator(".widget-dropdown", has=page.locator("label", has_text=re.compile(r"^space$")))
        page.wait_for_function("(sel) => [...sel.options].some(o => o.textContent === 'ptxas')",
                               arg=space.locator("select").element_handle(), timeout=self.ms)
        space.locator("select").select_option(label="ptxas")
        page.wait_for_timeout(300)
        status_before = _js(output, "ciq.status(root)")
        root.locator("button.widget-button", has_text=re.compile(r"^\s*Start\s*$")).first.click(timeout=self.ms)
        page.wait_for_function(
            f"([root, prev]) => {{ {_JS_HELPERS} const s = ciq.status(root); return s && s !== prev && "
            f"new RegExp('^({'|'.join(FINAL_STATES)}):').test(s); }}",
            arg=[output.element_handle(), status_before], timeout=self.ms, polling=200)
        page.wait_for_timeout(500)
        out = self.out
        out["broken_status"] = _js(output, "ciq.status(root)")
        out["broken_banner"] = _js(output, "(root.querySelector('.compileiq-banner') || {}).innerText || ''")
        out["broken_detail"] = _js(output, "(root.querySelector('.compileiq-detail') || {}).innerText || ''")
        export = root.locator("button.widget-button", has_text=re.compile(r"^\s*Export (JSON|ACF)\s*$")).first
        out["broken_export_enabled"] = export.is_enabled()

    @staticmethod
    def _deselect(page: Any, output: Any, point: Any) -> None:
        """Click the selected point again: plotly drops the selection (which dims every other point) and the
        dashboard shows the same evaluation again. Only for the screenshot."""
        box = point.bounding_box()
        if box is None:
            return
        x, y = box["x"] + box["width"] / 2, box["y"] + box["height"] / 2
        page.mouse.move(x, y, steps=3)
        page.mouse.click(x, y)
        with contextlib.suppress(Exception):
            page.wait_for_function("(gd) => gd.data.every(t => t.selectedpoints == null)", arg=output.evaluate_handle(
                "(root) => {" + _JS_HELPERS + "return ciq.pareto(root); }"), timeout=5000)
        page.wait_for_timeout(500)  # the kernel re-shows the point's detail before the export click

    @staticmethod
    def _hover(page: Any, point: Any) -> None:
        """Hover ``point`` so the screenshot shows its label."""
        with contextlib.suppress(Exception):
            box = point.bounding_box()
            if box:
                page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2, steps=5)
                page.locator(".hoverlayer .hovertext").first.wait_for(state="visible", timeout=3000)
