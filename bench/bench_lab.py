"""Dashboard latency in a real browser: JupyterLab + headless Chromium, quickstart notebook, toy run.

Runs tests/widgets/lab_browser.py's flow ``--repeat`` times (each with a fresh JupyterLab and kernel) and reports
the median of each latency: Start click to the first Pareto points on screen, to the "finished" status,
point click to the detail panel, Export click to "wrote". ``--screenshot docs/dashboard.png`` also saves
the page (from the last repetition).
"""

from __future__ import annotations

import argparse
import importlib
import importlib.metadata as md
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

from _common import markdown_table, write

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "widgets"))
lab_browser = importlib.import_module("lab_browser")  # tests/ is not a package

# (key, what it measures); browser_* are measured in the page: click event to the first animation frame
# with the change in the DOM; the others by the driving process around Playwright calls
METRICS = [
    ("browser_click_to_status_changed_s", "Start click -> status text changes (in page)"),
    ("browser_click_to_plot_s", "Start click -> Pareto figure in the DOM (in page)"),
    ("browser_click_to_points_s", "Start click -> first Pareto points (in page)"),
    ("browser_click_to_finished_s", "Start click -> status 'finished' (in page)"),
    ("click_to_points_s", "Start click -> first Pareto points (driver)"),
    ("click_to_finished_s", "Start click -> status 'finished' (driver)"),
    ("point_click_to_detail_s", "point click -> detail panel shows the eval (driver)"),
    ("export_click_to_wrote_s", "Export click -> 'wrote <file>' (driver)"),
    ("server_start_s", "JupyterLab start -> /api/status answers"),
    ("lab_load_s", "page open -> notebook panel"),
    ("kernel_ready_s", "page open -> kernel idle"),
    ("run_all_s", "Run All -> notebook done (dashboard shown)"),
    ("total_s", "whole flow"),
]


def _version(name: str) -> str | None:
    try:
        return md.version(name)
    except md.PackageNotFoundError:
        return None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=3, help="flows to run (median reported); default 3")
    ap.add_argument("--screenshot", type=Path, help="save the page after the last flow here (e.g. docs/dashboard.png)")
    ap.add_argument("--timeout", type=float, default=120.0, help="seconds each step may take")
    args = ap.parse_args()
    missing = lab_browser.missing_requirements()
    if missing:
        sys.exit(f"cannot run the lab benchmark: {missing}")
    runs: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="bench-lab-") as tmp:
        notebook = lab_browser.pick_notebook(Path(tmp))
        for i in range(args.repeat):
            shot = args.screenshot if i == args.repeat - 1 else None
            r = lab_browser.run_lab_flow(notebook, Path(tmp) / f"run{i}", shot, timeout=args.timeout)
            log = r.pop("browser_log")
            r["blocked_requests"], r["page_errors"] = log["blocked"], log["page_errors"]
            r["export_file"] = Path(r["export_file"]).name  # no machine paths in results
            runs.append(r)
            print(f"run {i + 1}/{args.repeat}: points after {r['browser_click_to_points_s']:.2f} s, "
                  f"finished after {r['browser_click_to_finished_s']:.2f} s, "
                  f"detail {r['point_click_to_detail_s']:.2f} s")
    rows, summary = [], {}
    for key, what in METRICS:
        values = [r[key] for r in runs if r.get(key) is not None]
        if not values:
            continue
        summary[key] = {"median": statistics.median(values), "min": min(values), "max": max(values)}
        rows.append([what, statistics.median(values), min(values), max(values)])
    last = runs[-1]
    versions = {p: _version(p) for p in ("jupyterlab", "ipywidgets", "anywidget", "plotly", "playwright")}
    versions["chromium"] = last.get("chromium")
    data = {"repeat": args.repeat, "notebook": last["notebook"], "versions": versions, "summary": summary,
            "runs": runs}
    notebook_name = "notebooks/01_quickstart.ipynb" if last["notebook_is_quickstart"] else \
        "a one-cell notebook (`Dashboard()`)"
    notes = (f"{args.repeat} flow(s), each with a fresh JupyterLab server and kernel, on {notebook_name} "
             f"(Run All, then the dashboard's default toy run: {last['status'].split(';')[0]}). "
             "'in page' times run from the Start click event to the first animation frame whose DOM has the "
             "change (a requestAnimationFrame loop in the page); 'driver' times are taken by the Python process "
             "around Playwright calls (so include a few ms of round trip). Points and 'finished' can land in the "
             "same frame: the toy run ends before the browser has drawn the first update. "
             f"Headless Chromium {versions['chromium']}, JupyterLab {versions['jupyterlab']}, ipywidgets "
             f"{versions['ipywidgets']}, anywidget {versions['anywidget']}, plotly {versions['plotly']}; "
             "no request left the local server (blocked: "
             f"{sum(len(r['blocked_requests']) for r in runs)}).")
    seen = [summary.get(k, {}).get("median")
            for k in ("browser_click_to_status_changed_s", "browser_click_to_points_s")]
    if None not in seen and abs(seen[0] - seen[1]) < 0.05:
        notes += (" The status text changed in the same frame as the points appeared: the page showed nothing of "
                  "the run (not even 'running') until the dashboard's new figure widgets were drawn, so the "
                  "Start latency here is mostly creating the plots, not the search.")
    write("lab_latency", data, "Dashboard latency in JupyterLab (headless Chromium)",
          markdown_table(["latency (s)", "median", "min", "max"], rows), notes)
    if args.screenshot:
        print(f"screenshot: {args.screenshot}")


if __name__ == "__main__":
    main()
