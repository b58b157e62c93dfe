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
    ap.add_argument("--compare", metavar="REV", help="also run the dashboard of this git revision, the two taking "
                    "turns, on a one-cell Dashboard() notebook (the same for both)")
    args = ap.parse_args()
    if args.compare:
        compare(args)
        return
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


def compare(args: argparse.Namespace) -> None:
    """The Start-to-points and detail latencies of this checkout's dashboard and of ``args.compare``'s, side by side:
    flows alternate (new, old, new, old, ...) on the same one-cell notebook; writes lab_latency_compare."""
    import os
    import subprocess

    keys = ["browser_click_to_points_s", "browser_click_to_finished_s", "point_click_to_detail_s",
            "export_click_to_wrote_s"]
    samples: dict[str, dict[str, list[float]]] = {"new": {k: [] for k in keys}, "old": {k: [] for k in keys}}
    with tempfile.TemporaryDirectory(prefix="bench-lab-") as tmp:
        old = Path(tmp) / "old"
        old.mkdir()
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", args.compare, "compileiq_lab"], check=True,
                                 capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", str(old)], input=archive, check=True)
        notebook = lab_browser.dashboard_notebook(Path(tmp) / "dashboard_only.ipynb")
        for i in range(args.repeat):
            for label in ("new", "old"):
                if label == "old":
                    os.environ[lab_browser.PACKAGE_ROOT_VAR] = str(old)
                try:
                    r = lab_browser.run_lab_flow(notebook, Path(tmp) / f"{label}{i}", timeout=args.timeout)
                finally:
                    os.environ.pop(lab_browser.PACKAGE_ROOT_VAR, None)
                for k in keys:
                    if r.get(k) is not None:
                        samples[label][k].append(r[k])
                print(f"{label} {i + 1}/{args.repeat}: points after {r['browser_click_to_points_s']:.2f} s")
    what = dict(METRICS)
    rows, summary = [], {}
    for k in keys:
        new, old_ = samples["new"][k], samples["old"][k]
        if new and old_:
            a, b = statistics.median(new), statistics.median(old_)
            summary[k] = {"new": a, "old": b, "ratio": a / b}
            rows.append([what.get(k, k), round(a, 3), round(b, 3), round(a / b, 2)])
    notes = (f"{args.repeat} flow(s) of each, alternating, each with a fresh JupyterLab server and kernel, on a "
             f"one-cell `Dashboard()` notebook (the default toy run); old = the dashboard of `{args.compare}`. "
             "Median seconds.")
    write("lab_latency_compare", {"compare": args.compare, "repeat": args.repeat, "samples": samples,
                                  "summary": summary},
          "Dashboard latency in JupyterLab, side by side with an older dashboard",
          markdown_table(["latency (s)", "this checkout", args.compare, "ratio"], rows), notes)


if __name__ == "__main__":
    main()
