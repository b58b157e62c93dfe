"""Packaging contracts: light import, public API, the CompileIQ example, the CLI."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import compileiq_lab

HEAVY = ["ipywidgets", "plotly", "cupy", "pynvml", "dask", "pandas", "pymoo", "IPython", "triton", "sklearn"]


def test_import_loads_no_heavy_dependency():
    code = ("import json, sys, compileiq_lab, compileiq_lab.space; "
            f"print(json.dumps([m for m in {HEAVY!r} if m in sys.modules]))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == []


def test_public_api_is_complete():
    for name in compileiq_lab.__all__:
        assert getattr(compileiq_lab, name) is not None
    assert "Search" in dir(compileiq_lab)


def _readme_quickstart() -> str:
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    section = readme[readme.index("## Quickstart"):]
    return section[section.index("```python") + len("```python"):section.index("```", section.index("```python") + 9)]


def test_readme_quickstart_as_written_has_only_ok_rows(tmp_path):
    """The README's quickstart (CompileIQ's single-objective example, the import changed) runs as shown."""
    code = _readme_quickstart() + '''
df = results.get_results()
best = results.get_best_result()
assert list(df["eval_id"]) == list(range(len(df)))
assert {"generation", "status", "error", "score_1", "params", "elapsed_s"} <= set(df.columns)
assert set(df["status"]) == {"ok"} and df.iloc[0]["generation"] == 1   # no baseline: x and y have no default
import json
rows = [[int(r.eval_id), int(r.generation), float(r.score_1), repr(r.params)] for r in df.itertuples()]
print("RESULT" + json.dumps([results.status_counts(), best["eval_id"], best["generation"], best["score_1"],
                             repr(best["params"]), rows]))
'''
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    counts, eval_id, gen, score, params, rows = json.loads(out.stdout.split("RESULT", 1)[1])
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    assert f"`results.status_counts() == {counts!r}`" in readme
    # the output the README shows is this version's, row by row, and its best
    shown = readme[readme.index("Its output, "):readme.index("`x` and `y` declare no `default=`")]
    listed = re.findall(r"(?m)^(\d+)\s+(\d+)\s+(\d+)\s+ok\s+([\d.]+)\s+(\{.*?\}) \.\.\.$", shown)
    assert len(listed) >= 3
    for index, eval_id_text, generation, value, config in listed:
        assert [int(eval_id_text), int(generation), float(value), config] == rows[int(index)]
    assert (f"{{'eval_id': {eval_id}, 'generation': {gen}, 'status': 'ok', 'score_1': {score}, 'params': {params}, "
            "...}") in shown
    assert "no baseline row: parameters x, y" in out.stderr  # said once
    assert out.stderr.count("no baseline row") == 1
    assert list((tmp_path / "compileiq_runs").glob("run-*.db"))


def test_cli_demo_and_show(tmp_path):
    db = tmp_path / "demo.db"
    out = subprocess.run([sys.executable, "-m", "compileiq_lab.cli", "demo", "--store", str(db)],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "best: score_1=2.0" in out.stdout
    show = subprocess.run([sys.executable, "-m", "compileiq_lab.cli", "show", str(db)], capture_output=True,
                          text=True)
    assert show.returncode == 0 and "best score_1 (lower is better): 2 at eval" in show.stdout, show.stdout
    missing = subprocess.run([sys.executable, "-m", "compileiq_lab.cli", "show", str(tmp_path / "no.db")],
                             capture_output=True, text=True)
    assert missing.returncode == 1 and "does not exist" in missing.stderr and "Traceback" not in missing.stderr
