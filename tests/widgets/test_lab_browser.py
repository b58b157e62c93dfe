"""The dashboard in a real browser: JupyterLab + headless Chromium (Playwright) run the quickstart notebook
(or a one-cell dashboard notebook until it exists), click Start, see the Pareto points, click one, export it.

Skipped, with the reason, where Chromium or the lab packages are missing (CI installs Chromium).
"""

from __future__ import annotations

import importlib
import json
import re
import sys
from pathlib import Path

import pytest

from compileiq_lab.testing import tool_available

sys.path.insert(0, str(Path(__file__).resolve().parent))
lab_browser = importlib.import_module("lab_browser")  # tests/ is not a package

_MISSING = lab_browser.missing_requirements()
BROKEN = 'extern "C" __global__ void broken(float* x) { x[threadIdx.x] = not_declared; }\n'


@pytest.mark.slow
@pytest.mark.skipif(_MISSING is not None, reason=f"browser test: {_MISSING}")
def test_dashboard_start_click_export_in_jupyterlab(tmp_path: Path) -> None:
    notebook = lab_browser.pick_notebook(tmp_path)
    shot = tmp_path / "dashboard.png"
    broken = BROKEN if tool_available("nvcc") else None
    r = lab_browser.run_lab_flow(notebook, tmp_path / "lab", shot, broken_kernel=broken)
    facts = json.dumps({k: v for k, v in r.items() if k != "browser_log"}, indent=1, default=str)

    assert r["points"] > 0 and r["evaluation_points"] > 0, facts
    assert r["final_state"] in ("finished", "exhausted"), facts
    assert re.match(r"eval \d+ \(generation \d+", r["detail"]), facts
    assert r["export_button"] == "Export JSON", facts  # the toy objective: no kernel, so no ACF
    assert r["export_message"].startswith("wrote"), facts
    exported = Path(r["export_file"])
    assert exported.is_file() and exported.parent == (tmp_path / "lab" / "compileiq_runs").resolve(), facts
    assert "compileiq_runs" in r["export_message"], facts  # the file is shown with its folder
    data = json.loads(exported.read_text())
    assert "params" in data and data["eval_id"] == r["eval_id"] and data["status"] == "ok", data
    assert shot.is_file() and shot.stat().st_size > 10_000
    log = r["browser_log"]
    assert log["blocked"] == [], f"the page asked for something outside the local server: {log['blocked']}"
    errors = [e for e in log["page_errors"] if "ResizeObserver" not in e]
    assert errors == [], f"uncaught errors in the page: {errors}"
    # labels carry the direction in words; nothing went wrong behind the plots
    # one objective: the score over the evaluations (y), the call order on x
    assert "lower is better" in r["y_axis_title"] and "evaluation id" in r["x_axis_title"], facts
    assert "lower is better" in r["detail_text"], facts
    assert r["error_line"] == "", facts
    # what only JupyterLab's log console would show; left out: "No such comm" for the widget manager's own
    # control comm, opened before the kernel imported ipywidgets (JupyterLab's, and timing-dependent)
    benign = lab_browser.benign_kernel_errors(log)
    hidden = [e for e in log["kernel_errors"] if e not in benign]
    assert hidden == [], f"errors only JupyterLab's log console would show: {hidden}"
    assert "no baseline row" in r["notes"], facts  # the package's warnings show in the dashboard instead
    if broken is not None:  # the second run: a kernel whose defaults do not compile
        assert r["broken_status"].startswith("baseline_failed"), facts
        assert "baseline (compiler defaults) failed" in r["broken_banner"] and "not_declared" in r["broken_banner"]
        assert "click a point" in r["broken_detail"] and not r["broken_export_enabled"], facts  # no stale point
