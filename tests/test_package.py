"""Packaging contracts: light import, public API, the CompileIQ example, the CLI."""

from __future__ import annotations

import json
import subprocess
import sys

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


def test_compileiq_example_runs_with_only_the_import_changed(tmp_path):
    code = '''
from compileiq_lab import Search, SearchConfiguration
import compileiq_lab.space as ss

def objective(config):
    return config["x"] ** 2 + config["y"]

space = {"x": ss.range(start=1.0, end=20.0, step=0.5), "y": ss.choice([1, 2, 3]),
         "z": ss.literal("this is a constant", knockout_prob=0.5)}
cfg = SearchConfiguration(generations=5, problem_type="min", num_objectives=1)
results = Search(objective_function=objective, search_space=space, search_config=cfg).start()
df = results.get_results()
best = results.get_best_result()
assert list(df["eval_id"]) == list(range(len(df)))
assert {"generation", "status", "error", "score_1", "params", "elapsed_s"} <= set(df.columns)
assert set(df["status"]) == {"ok"} and df.iloc[0]["generation"] == 1   # no baseline: x and y have no default
print(best["score_1"], best["generation"], sorted(best["params"]))
'''
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    score, gen, keys = out.stdout.split(" ", 2)
    assert float(score) >= 2.0 and int(gen) >= 1 and "'x'" in keys
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
    assert show.returncode == 0 and "best score_1 (min): 2 at eval" in show.stdout, show.stdout
    missing = subprocess.run([sys.executable, "-m", "compileiq_lab.cli", "show", str(tmp_path / "no.db")],
                             capture_output=True, text=True)
    assert missing.returncode == 1 and "does not exist" in missing.stderr and "Traceback" not in missing.stderr
