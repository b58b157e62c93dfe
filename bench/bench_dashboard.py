"""Dashboard update cost: time in the notebook kernel to apply one generation's update with 5,000 points on the
Pareto scatter (goal: at most 100 ms), against 500 points, measured inside a real Jupyter kernel (nbclient).
``--compare REV`` measures the dashboard of another revision (e.g. the one before a change) in the same run, the two
kernels taking turns, and reports the ratio."""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import markdown_table, write

SIZES = (500, 5000)
REPEATS = 15


def make_store(path: Path, n: int) -> None:
    """A finished two-objective run with about ``n`` evaluations (instant objective)."""
    import compileiq_lab.space as ss
    from compileiq_lab import Search, SearchConfiguration

    def objective(c: dict) -> tuple[float, float]:
        a = sum(c.get(k, 0) for k in "abc")
        b = sum(c.get(k, 0) for k in "def")
        return float(a + 0.01 * b), float(300 - a + b)

    space = {k: ss.range(0, 99) for k in "abcdef"}
    pool = 50
    cfg = SearchConfiguration(generations=n // pool, pool_size=pool, seed=0, num_objectives=2,
                              objective_names=["runtime", "energy"])
    Search(objective, space, cfg, store=str(path)).start()


CELL = """
import json, statistics, time
from compileiq_lab import Run, Search
from compileiq_lab.run.events import EvaluationEvent, GenerationEvent
from compileiq_lab.store.results import Results
from compileiq_lab.widgets import Dashboard
out = {}
for n, path in PATHS.items():
    search = Search.open(path, objective_function=lambda c: (0.0, 0.0))
    dash = Dashboard(Run(search))
    full = dash.run.results()
    # the state after all but the last generation (50 points) was shown
    prev = Results(full.records[:-50], directions=full.directions, objective_names=full.objective_names)
    times, cold = [], []
    for _ in range(REPEATS):
        dash.plots._cache.reset()
        dash.plots.update(prev)
        dash._records = list(prev.records)
        events = [EvaluationEvent(r) for r in full.records[-50:]] + [GenerationEvent(1, 50, 0, None, len(full))]
        t0 = time.perf_counter()
        dash._apply(events)  # the generation's 50 rows as the events carry them: traces, history, progress
        times.append(time.perf_counter() - t0)
        dash.plots._cache.reset()
        t0 = time.perf_counter()
        dash.plots.update(full)  # a reopened run: every point at once
        cold.append(time.perf_counter() - t0)
    out[n] = {"points": len(full.records), "update_ms": [t * 1e3 for t in times],
              "cold_ms": statistics.median(cold) * 1e3}
    search.close()
print("RESULT" + json.dumps(out))
"""


def _measure(paths: dict[int, str], tmp: str, package_root: str | None) -> dict[str, Any]:
    """The cell's figures in a fresh kernel importing compileiq_lab from ``package_root`` (None: this checkout)."""
    import nbclient
    import nbformat

    env = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [package_root, env]))
    try:
        nb = nbformat.v4.new_notebook()
        nb.cells = [nbformat.v4.new_code_cell(f"PATHS = {json.dumps(paths)}\nREPEATS = {REPEATS}\n" + CELL)]
        nbclient.NotebookClient(nb, timeout=600, kernel_name="python3",
                                resources={"metadata": {"path": tmp}}).execute()
    finally:
        if env is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = env
    text = "".join(o.get("text", "") for o in nb.cells[0].outputs if o.get("name") == "stdout")
    result: dict[str, Any] = json.loads(text.split("RESULT", 1)[1])
    return result


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--compare", metavar="REV", help="also measure the dashboard of this git revision")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        paths = {}
        for n in SIZES:
            paths[n] = str(Path(tmp) / f"run{n}.db")
            t0 = time.perf_counter()
            make_store(Path(paths[n]), n)
            print(f"store with ~{n} points in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
        old_root = None
        if args.compare:
            old_root = str(Path(tmp) / "old")
            Path(old_root).mkdir()
            repo = Path(__file__).resolve().parents[1]
            archive = subprocess.run(["git", "-C", str(repo), "archive", args.compare, "compileiq_lab"],
                                     check=True, capture_output=True).stdout
            subprocess.run(["tar", "-x", "-C", old_root], input=archive, check=True)
        turns = [("new", None), ("old", old_root), ("new", None), ("old", old_root)] if old_root else [("new", None)]
        runs: dict[str, list[dict[str, Any]]] = {}
        for label, root in turns:  # taking turns: drift on this machine hits both alike
            runs.setdefault(label, []).append(_measure(paths, tmp, root))
        data = _pooled(runs["new"])
        old = _pooled(runs["old"]) if "old" in runs else None
    rows = []
    for n in SIZES:
        d = data[str(n)]
        med = statistics.median(d["update_ms"])
        rows.append([d["points"], round(med, 1), round(min(d["update_ms"]), 1), round(d["cold_ms"], 1)])
        data[str(n)]["median_ms"] = med
    ratio = data[str(SIZES[1])]["median_ms"] / data[str(SIZES[0])]["median_ms"]
    table = markdown_table(["points", "one generation's update, median ms", "best ms",
                            "all points at once (reopened run), median ms"], rows)
    big = data[str(SIZES[1])]["median_ms"]
    notes = (f"One generation's update (50 new points) = apply the rows the run's events carry (no store read), "
             f"add the new points (hover text, incremental front), send the Pareto traces and the per-generation "
             f"chart inside "
             f"`batch_update()`, and the progress line; measured in a Jupyter kernel (nbclient), median of "
             f"{REPEATS}. "
             f"Goal: at most 100 ms at 5,000 points: {'met' if big <= 100 else 'NOT met'} ({big:.0f} ms). "
             f"5,000 vs 500 points: {ratio:.1f}x the time.")
    extra: dict[str, Any] = {}
    if old is not None:
        big_old = statistics.median(old[str(SIZES[1])]["update_ms"])
        cold_new, cold_old = data[str(SIZES[1])]["cold_ms"], old[str(SIZES[1])]["cold_ms"]
        extra = {"compare": args.compare, "old": old, "update_ratio_new_vs_old": big / big_old,
                 "cold_ratio_new_vs_old": cold_new / cold_old}
        notes += (f" Side by side with the dashboard of `{args.compare}` (kernels taking turns, the same stores): "
                  f"one generation at 5,000 points {big:.1f} ms vs {big_old:.1f} ms ({big / big_old:.2f}x), "
                  f"all points at once {cold_new:.0f} ms vs {cold_old:.0f} ms ({cold_new / cold_old:.2f}x). The new "
                  "dashboard also fills the evaluations table and the failures view on every update.")
    write("dashboard", {"sizes": data, "repeats": REPEATS, "ratio_5000_vs_500": ratio, **extra},
          "Dashboard update cost", table, notes)
    return 0


def _pooled(measurements: list[dict[str, Any]]) -> dict[str, Any]:
    """Several kernels' figures as one: their update samples together, the median of their cold times."""
    out: dict[str, Any] = {}
    for key in measurements[0]:
        out[key] = {"points": measurements[0][key]["points"],
                    "update_ms": [t for m in measurements for t in m[key]["update_ms"]],
                    "cold_ms": statistics.median(m[key]["cold_ms"] for m in measurements)}
    return out


if __name__ == "__main__":
    sys.exit(main())
