"""Every notebook run top to bottom in JupyterLab (headless Chromium): no cell raises, nothing reaches only the log
console, no page error, no request leaves the local server."""

from __future__ import annotations

import time
from pathlib import Path

import lab_browser
import pytest

NOTEBOOKS = sorted((lab_browser.REPO / "notebooks").glob("*.ipynb"))

pytestmark = pytest.mark.skipif(lab_browser.missing_requirements() is not None,
                                reason=lab_browser.missing_requirements() or "")


def _run_all(notebook: Path, workdir: Path, timeout: float = 300.0) -> dict[str, object]:
    """Open a copy of ``notebook`` in JupyterLab, Run All, wait until the kernel is idle with no cell pending;
    returns the cells' errors, the browser log and the run time."""
    ms = timeout * 1000
    workdir.mkdir(parents=True, exist_ok=True)
    nb_path, kernel = lab_browser._copy_notebook(notebook, workdir)
    lab = lab_browser.JupyterLab(workdir, kernel, timeout)
    lab.start()
    try:
        with lab_browser._browser(lab.url) as (page, log):
            lab_browser.open_notebook(page, lab, nb_path, ms)
            t = time.perf_counter()
            page.evaluate("() => window.jupyterapp.commands.execute('notebook:run-all-cells')")
            page.wait_for_timeout(500)
            page.wait_for_function("() => { const w = window.jupyterapp.shell.currentWidget; "
                                   "const k = w.sessionContext.session?.kernel; return k && k.status === 'idle' && "
                                   "![...w.content.node.querySelectorAll('.jp-InputPrompt')]"
                                   ".some(e => e.textContent.includes('*')); }", timeout=ms, polling=500)
            seconds = time.perf_counter() - t
            page.wait_for_timeout(1000)  # late widget messages (a dashboard's first draw) land in the log too
            errors = page.evaluate(lab_browser._JS_CELL_ERRORS)
            unrun = page.evaluate("() => [...window.jupyterapp.shell.currentWidget.content.node"
                                  ".querySelectorAll('.jp-CodeCell .jp-InputPrompt')]"
                                  ".filter(e => /\\[\\s*\\]/.test(e.textContent)).length")
            return {"errors": errors, "log": dict(log), "seconds": seconds, "unrun": unrun}
    finally:
        lab.stop()


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_runs_clean_in_jupyterlab(notebook: Path, tmp_path: Path) -> None:
    r = _run_all(notebook, tmp_path / "lab")
    log = r["log"]
    assert isinstance(log, dict)
    assert r["errors"] == [], f"{notebook.name}: cells raised: {r['errors']}"
    assert r["unrun"] == 0, f"{notebook.name}: {r['unrun']} code cells did not run"
    hidden = [e for e in log["kernel_errors"] if e not in lab_browser.benign_kernel_errors(log)]
    assert hidden == [], f"{notebook.name}: errors only JupyterLab's log console would show: {hidden}"
    assert [e for e in log["page_errors"] if "ResizeObserver" not in e] == [], log["page_errors"]
    assert log["blocked"] == [], f"{notebook.name}: the page asked for something outside the local server"
