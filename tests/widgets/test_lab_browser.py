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

sys.path.insert(0, str(Path(__file__).resolve().parent))
lab_browser = importlib.import_module("lab_browser")  # tests/ is not a package

_MISSING = lab_browser.missing_requirements()


@pytest.mark.slow
@pytest.mark.skipif(_MISSING is not None, reason=f"browser test: {_MISSING}")
def test_dashboard_start_click_export_in_jupyterlab(tmp_path: Path) -> None:
    notebook = lab_browser.pick_notebook(tmp_path)
    shot = tmp_path / "dashboard.png"
    r = lab_browser.run_lab_flow(notebook, tmp_path / "lab", shot)
    facts = json.dumps({k: v for k, v in r.items() if k != "browser_log"}, indent=1, default=str)

    assert r["points"] > 0 and r["evaluation_points"] > 0, facts
    assert r["final_state"] in ("finished", "exhausted"), facts
    assert re.match(r"eval \d+ \(generation \d+", r["detail"]), facts
    assert r["export_button"] == "Export JSON", facts  # the toy objective: no kernel, so no ACF
    assert r["export_message"].startswith("wrote"), facts
    exported = Path(r["export_file"])
    assert exported.is_file() and exported.parent == (tmp_path / "lab").resolve(), facts
    data = json.loads(exported.read_text())
    assert "params" in data and data["eval_id"] == r["eval_id"] and data["status"] == "ok", data
    assert shot.is_file() and shot.stat().st_size > 10_000
    log = r["browser_log"]
    assert log["blocked"] == [], f"the page asked for something outside the local server: {log['blocked']}"
    errors = [e for e in log["page_errors"] if "ResizeObserver" not in e]
    assert errors == [], f"uncaught errors in the page: {errors}"
