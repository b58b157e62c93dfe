"""The dashboard's controls, tabs and runs in a real browser: JupyterLab + headless Chromium (Playwright) run a
generated notebook (two static runs of the bundled CUDA reduction kernel, a dashboard over a slow Python objective,
a dashboard with the form) and drive them through the UI only: Start / Pause / Resume / Stop, the y axis, table row
and scatter point selecting each other, the failures tab, the runs tab (overlay two fronts, open a run), a kernel
point's machine code, Export ACF, Copy flags, and a replay from the form.

Skipped, with the reason, where Chromium, the lab packages or nvcc/ptxas are missing (CI installs them; no GPU).
Product bugs this flow once found (listed in ``_known_bugs``: trace names lost in the browser, a reopened run's
header rewritten, a widget thread racing an import) fail it, named, after every other check has passed.
"""

from __future__ import annotations

import importlib
import json
import re
import sys
from pathlib import Path
from typing import Any

import pytest

from compileiq_lab.testing import tool_available

sys.path.insert(0, str(Path(__file__).resolve().parent))
lab_browser = importlib.import_module("lab_browser")  # tests/ is not a package
lab_v2 = importlib.import_module("lab_browser_v2")

_MISSING = lab_browser.missing_requirements()
_NO_COMPILER = next((f"needs {t} (the reduction kernel's static runs)" for t in ("nvcc", "ptxas")
                     if not tool_available(t)), None)
#: A kernel error of a race the flow once found (see ``_known_bugs``).
_PANDAS_RACE = "partially initialized module 'pandas'"
#: The live scatter's trace names, in live.py's fixed order (EVALS, FRONT, BASELINE, FAILED, SELECTED).
_TRACE_NAMES = ("evaluations", "Pareto front", "baseline (compiler defaults)", "failed (", "selected")


def _known_bugs(r: dict[str, Any], workdir: Path, race_errors: list[str]) -> list[str]:
    """The product bugs this run showed (each with where it is); [] when none."""
    from compileiq_lab.store import load_results

    bugs = []
    names = r["live_trace_names"]
    if not all(isinstance(n, str) and n.startswith(e) for n, e in zip(names, _TRACE_NAMES)):
        bugs.append(f"the live scatter's traces lost their names in the browser (legend {r['live_legend']}): "
                    "LivePlots._update_pareto renames one trace inside batch_update() before the figure is shown, and "
                    "plotly's widget model then unsets the name of every trace that batch did not rename")
    source = load_results(str(workdir / "compileiq_runs" / "sm_90.db")).header.status
    if r["replay_state"] != "finished" and source == "running":
        bugs.append(f"opening sm_90.db in the runs tab (Dashboard.reopen -> Run.open -> Search.open) rewrote its "
                    f"header status from 'finished' to 'running' without starting it, so its replay ended "
                    f"{r['replay_state']!r}")
    if race_errors:
        bugs.append("a widget message, handled in JupyterLab's comm subshell thread (commsOverSubshells="
                    "perCommTarget, ipykernel 7), read a half-imported pandas while LivePlots.show_influence imported "
                    f"it in the kernel's main thread: {race_errors[0][:200]}")
    return bugs


@pytest.mark.slow
@pytest.mark.skipif(_MISSING is not None, reason=f"browser test: {_MISSING}")
@pytest.mark.skipif(_NO_COMPILER is not None, reason=f"browser test: {_NO_COMPILER}")
def test_dashboard_controls_tabs_and_runs_in_jupyterlab(tmp_path: Path) -> None:
    from compileiq_lab import load_acf

    workdir, shots = tmp_path / "lab", tmp_path / "shots"
    r = lab_v2.run_lab_v2_flow(workdir, shots)
    facts = json.dumps({k: v for k, v in r.items() if k != "browser_log"}, indent=1, default=str)

    # the notebook: two kernel run stores, a form-less dashboard over the live run, a dashboard with the form
    assert r["kernel_run_stores"] == ["sm_80.db", "sm_90.db"], facts
    assert r["form_in_live"] == 0 and r["form_in_form"] == 1, facts
    assert r["live_status_before"].startswith("idle: generation 0/8, 0 evaluations"), facts

    # Pause holds the run (the button reads Resume, no new evaluation for a second), Resume goes on, Stop ends it
    assert r["pause_state"] == "paused" and r["pause_button"] == "Resume", facts
    assert r["pause_still_paused"] == "paused", facts
    n0, n1 = r["pause_evaluations"]
    assert n0 == n1 > 0 and r["pause_points"][0] == r["pause_points"][1], facts
    assert r["resume_state"] == "running" and r["resume_button"] == "Pause", facts
    assert r["resume_evaluations"] > n1, facts
    assert r["live_state"] == "stopped" and r["live_status"].startswith("stopped:"), facts
    assert r["resume_evaluations"] <= r["live_evaluations"] < 8 * 8 + 1, facts  # ended before its 8 generations
    assert r["live_buttons_disabled"] == {"Start": True, "Pause": True, "Stop": True}, facts  # no form: ended

    # the y axis: picking x's objective swaps the two; both titles follow, with their direction in words
    assert r["axis_y_from_to"] == ["size", "cost"], facts
    assert r["axis_before"] == ["cost (lower is better)", "size (lower is better)"], facts
    assert r["axis_after"] == ["size (lower is better)", "cost (lower is better)"], facts

    # a table row opens its point (point tab, detail, the "selected" ring); a clicked point selects its row
    assert r["row_detail_id"] == r["row_picked"] and r["row_tab"] == "point", facts
    assert r["row_selected_trace"] == [r["row_picked"]], facts
    assert r["point_detail_id"] == r["point_clicked"] != r["row_picked"], facts
    assert r["point_table_pick"] == r["point_table_pick_shown"] == r["point_detail_id"], facts
    assert r["point_selected_trace"] == [r["point_detail_id"]], facts

    # the failures tab: one row per status with its count, as many as the status line says failed
    said = re.search(r"\(failed: (\d+) error\)", r["live_status"])
    assert said is not None, facts
    failed = int(said.group(1))
    assert r["failures_head"][:3] == ["status", "count", "messages"], facts
    assert [row[:2] for row in r["failures"]] == [["error", str(failed)]], facts
    assert "ValueError" in r["failures"][0][2] and "does not build" in r["failures"][0][2], facts
    assert r["failure_pick_options"] == failed + 1, facts  # "pick a failed evaluation", then each one

    # the runs tab: the two kernel runs' fronts on one figure, one front trace per run; Open shows sm_90.db
    assert sorted(re.findall(r"\((sm_\d+)\.db\)", " ".join(r["overlay_picked"]))) == ["sm_80", "sm_90"], facts
    assert len(r["overlay_picked"]) == 2 and len(r["open_picked"]) == 1 and "(sm_90.db)" in r["open_picked"][0], facts
    fronts = [t for t in r["overlay_traces"] if t["role"] == "front"]
    assert len(fronts) == 2 and all(t["points"] > 0 for t in fronts), facts
    assert sorted(re.findall(r"sm_\d+", " ".join(t["name"] for t in fronts))) == ["sm_80", "sm_90"], facts
    assert r["overlay_message"].startswith("fronts of 2 runs: sass_instructions vs registers"), facts
    assert "store compileiq_runs/sm_90.db" in r["open_status"] and r["open_points"] > 0, facts
    assert r["open_title"].startswith("16 ok, 0 failed"), facts  # 2 generations of 8, the baseline one of them

    # a kernel point: its machine code against the baseline's, a table with the registers
    assert re.match(r"eval \d+ \(generation \d+\): ok", r["kernel_detail"]), facts
    assert r["kernel_sass_table"] and "registers" in r["kernel_sass_metrics"], facts
    assert "registers" in r["kernel_sass_text"] and "baseline" in r["kernel_sass_text"], facts

    # Export ACF: the message, a data: download link, the file in the run folder, an ACF that loads
    assert r["export_button"] == "Export ACF" and r["export_message"].startswith("wrote"), facts
    assert r["export_link"] == 1 and r["export_href"].startswith("data:"), facts
    exported = Path(r["export_file"])
    assert r["export_exists"] and exported.parent == (workdir / "compileiq_runs").resolve(), facts
    assert r["export_download_name"] == exported.name and exported.suffix == ".acf", facts
    assert load_acf(exported) is not None

    # Copy flags: the clipboard holds the flags box's one-line form (its last line, after "<tool> line: ")
    last = r["copy_flags_text"].splitlines()[-1]
    assert re.match(r"^nvcc line: -arch=sm_90", last), facts
    line = last.split(" line: ", 1)[1]
    assert r["copy_label"] == "Copy flags" and r["copy_label_after"] == "copied", facts
    assert r["copy_recorded"] == [line], facts  # what the button handed navigator.clipboard.writeText
    if r.get("copy_clipboard_error") is None:  # headless Chromium let the page read the clipboard back
        assert r["copy_clipboard"] == line, facts

    # the form replays sm_90.db: the target follows the path, Start plays its points
    assert r["replay_target_before"] == "python" and r["replay_target"] == "replay", facts
    assert r["replay_note"] == "replays the run stored in compileiq_runs/sm_90.db" and r["replay_speed_visible"], facts
    assert r["replay_evaluations"] == 16 and r["replay_points"] == 16, facts
    assert "store compileiq_runs/sm_90.db" in r["replay_status"], facts
    assert r["replay_state"] in lab_browser.FINAL_STATES, facts

    # nothing went wrong anywhere: cells, the dashboards' error lines, the page, JupyterLab's log console
    log = r["browser_log"]
    assert r["cell_errors"] == [] and r["error_lines"] == ["", ""], facts
    assert log["blocked"] == [], f"the page asked for something outside the local server: {log['blocked']}"
    errors = [e for e in log["page_errors"] if "ResizeObserver" not in e]
    assert errors == [], f"uncaught errors in the page: {errors}"
    benign = lab_browser.benign_kernel_errors(log)
    race = [e for e in log["kernel_errors"] if _PANDAS_RACE in e]
    hidden = [e for e in log["kernel_errors"] if e not in benign and e not in race]
    assert hidden == [], f"errors only JupyterLab's log console would show: {hidden}\n{r.get('kernel_tracebacks')}"
    for name in lab_v2.SHOTS:
        assert (shots / name).stat().st_size > 10_000, name

    bugs = _known_bugs(r, workdir, race)
    assert bugs == [], "product bugs seen: " + " | ".join(bugs)
