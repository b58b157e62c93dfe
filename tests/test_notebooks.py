"""The lab notebooks are stored without outputs, stay so when the lab saves them, and run headless (no GPU needed)."""

from __future__ import annotations

import asyncio
import copy
import json
import os
import runpy
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from notebook_check import exercise_report, unverified_figures

REPO = Path(__file__).resolve().parents[1]
NOTEBOOKS = REPO / "notebooks"
KERNEL_NAME = "python3"
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
LAB_CONFIG = REPO / ".jupyter" / "jupyter_server_config.py"  # what `make lab` puts first on JUPYTER_CONFIG_PATH
STORED = sorted(NOTEBOOKS.glob("*.ipynb"))


def _lab_imports() -> tuple[Any, Any]:
    """nbformat and nbclient, skipping the test where the lab extras are not installed."""
    nbformat = pytest.importorskip("nbformat", reason="the notebook tests need nbformat (pip install -e '.[lab,test]')")
    nbclient = pytest.importorskip("nbclient", reason="the notebook tests need nbclient (pip install -e '.[lab,test]')")
    for module, extra in (("ipykernel", "lab,test"), ("ipywidgets", "lab"), ("anywidget", "lab"), ("plotly", "lab")):
        pytest.importorskip(module, reason=f"the notebook tests need {module} (pip install -e '.[{extra}]')")
    return nbformat, nbclient


def _own_kernelspec(root: Path) -> Path:
    """A "python3" kernelspec that starts this interpreter (``sys.executable``), under ``root``.

    Put first on JUPYTER_PATH, it wins over any user- or system-wide "python3" spec that points at
    another Python (one without compileiq_lab, ipywidgets, ...).
    """
    spec = root / "kernels" / KERNEL_NAME
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": f"Python 3 ({sys.executable})", "language": "python",
        "metadata": {"debugger": False}}))
    return root


def _text(output: dict[str, Any]) -> str:
    """The plain text of one cell output (stream text, or a result's text/plain)."""
    if output.get("output_type") == "stream":
        return str(output.get("text", ""))
    data = output.get("data", {})
    return str(data.get("text/plain", "")) if isinstance(data, dict) else ""


def _all_text(nb: Any) -> str:
    return "\n".join(_text(o) for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []))


def _mimes(cell: Any) -> set[str]:
    return {m for o in cell.get("outputs", []) for m in (o.get("data") or {})}


@pytest.fixture
def execute(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    """Run a notebook from a copy in tmp_path (its working folder) and return the executed notebook."""
    monkeypatch.setenv("JUPYTER_PATH", str(_own_kernelspec(tmp_path / "jupyter")))
    monkeypatch.setenv("COMPILEIQ_KERNELS", str(REPO / "kernels"))  # the kernel process inherits the environment
    scratch = tmp_path / "tmp"  # the notebooks' tempfile folders (run stores, ACFs, cubins) end up here
    scratch.mkdir()
    monkeypatch.setenv("TMPDIR", str(scratch))
    # the kernel imports this working tree's package, as the tests do
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])]))

    nbformat, nbclient = _lab_imports()

    def run(name: str) -> Any:
        work = tmp_path / "work"
        work.mkdir()
        copy = work / name
        shutil.copy(NOTEBOOKS / name, copy)
        nb = nbformat.read(copy, as_version=4)
        client = nbclient.NotebookClient(nb, timeout=600, kernel_name=KERNEL_NAME,
                                         resources={"metadata": {"path": str(work)}})
        client.execute()  # raises CellExecutionError (with the traceback) if any cell raises
        errors = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])
                  if o.get("output_type") == "error"]
        assert not errors, f"{name}: cells raised: {[(e['ename'], e['evalue']) for e in errors]}"
        assert all(c.get("execution_count") for c in nb.cells if c.cell_type == "code" and c.source.strip()), \
            f"{name}: not every code cell ran"
        _teaches(nb, name)
        return nb

    return run


def _teaches(nb: Any, name: str) -> None:
    """A teaching notebook: it opens with what the learner will learn, needs and spends, states no figure its code
    does not print, and ends with at least two exercises whose reference solutions pass their checks."""
    opening = nb.cells[0].source
    for part in ("You will learn", "Prerequisites", "Time"):
        assert part in opening, f"{name}: the first cell must say {part!r}"
    stated = unverified_figures(nb)
    assert not stated, f"{name}: numbers in markdown that no code cell beside them prints: {stated}"
    exercises, problems = exercise_report(nb)
    assert not problems, f"{name}: {problems}"
    assert len(exercises) >= 2, f"{name}: {len(exercises)} exercises pass with their reference answers"


def test_stated_figures_are_checked() -> None:
    """The checker flags a number stated in markdown that the code beside it does not print, or prints beside
    another noun, and accepts one it prints (rounded to the stated precision)."""
    nbformat = pytest.importorskip("nbformat")
    v4 = nbformat.v4

    def notebook(markdown: str, printed: str) -> Any:
        code = v4.new_code_cell("print('...')", outputs=[v4.new_output("stream", name="stdout", text=printed)])
        return v4.new_notebook(cells=[v4.new_markdown_cell("# T"), v4.new_markdown_cell("## S"),
                                      v4.new_markdown_cell(markdown), code])

    assert unverified_figures(notebook("The front has 3 points; p = 0.37.", "front: 3 points\np=0.3712")) == []
    assert unverified_figures(notebook("`-O1` on sm_90 wins.", "nothing")) == []  # code and names are not figures
    assert len(unverified_figures(notebook("The front has 4 points.", "front: 3 points"))) == 1
    assert len(unverified_figures(notebook("2 common and 7 advanced controls", "common: 2\nadvanced: 5\n7"))) == 1
    assert len(unverified_figures(notebook("We found 12 regressions.", "code_hash 3f12ab9c wins: 3"))) == 1
    assert len(unverified_figures(notebook("3 times faster", "speed-up 2.6"))) == 1
    assert len(unverified_figures(notebook("1.5x faster", "speed-up 1.21"))) == 1
    assert len(unverified_figures(notebook("-12 registers", "change: 12"))) == 1
    assert unverified_figures(notebook("-12 registers; 1.5x; 37 % of <img width='600'>", "-12\n1.5\n0.3712")) == []


def _strip_hook() -> Any:
    """The pre-save hook `make lab` configures, loaded from its config file as plain Python."""
    return runpy.run_path(str(LAB_CONFIG))["strip_outputs_pre_save_hook"]


def _lab_contents_manager(root: Path) -> Any:
    """The contents manager `jupyter lab` saves through (the server's default class), configured as `make lab` does."""
    pytest.importorskip("jupyter_server", reason="the save hook tests need jupyter_server (pip install -e '.[lab]')")
    from jupyter_server.serverapp import ServerApp
    from traitlets.config.loader import PyFileConfigLoader

    config = PyFileConfigLoader(LAB_CONFIG.name, path=str(LAB_CONFIG.parent)).load_config()
    manager_class = ServerApp.class_traits()["contents_manager_class"].default()
    return manager_class(root_dir=str(root), config=config)


def _save_as_the_lab(nb: dict[str, Any], root: Path, name: str) -> str:
    """Save a notebook model as JupyterLab does (PUT /api/contents/NAME) and return the file's text."""
    manager = _lab_contents_manager(root)
    saved = manager.save({"type": "notebook", "format": "json", "content": nb}, name)
    if asyncio.iscoroutine(saved):
        asyncio.run(saved)
    return (root / name).read_text(encoding="utf-8")


def _as_run(nb: dict[str, Any]) -> dict[str, Any]:
    """A copy of a notebook as running it in the lab leaves it: outputs, counts, timings, widgets, language info."""
    nb = copy.deepcopy(nb)
    code = [cell for cell in nb["cells"] if cell["cell_type"] == "code"]
    for n, cell in enumerate(code, start=1):
        cell["execution_count"] = n
        cell["outputs"] = [
            {"output_type": "stream", "name": "stdout", "text": "x" * 1000 + "\n"},
            {"output_type": "execute_result", "execution_count": n, "metadata": {},
             "data": {"text/plain": "Dashboard()", WIDGET_VIEW: {"model_id": f"m{n}", "version_major": 2,
                                                                 "version_minor": 0}}}]
        cell["metadata"]["execution"] = {"iopub.execute_input": "2025-01-01T00:00:00.000000Z",
                                         "shell.execute_reply": "2025-01-01T00:00:01.000000Z"}
        cell["metadata"]["scrolled"] = True
        cell["metadata"].setdefault("jupyter", {})["outputs_hidden"] = True
    nb["metadata"]["widgets"] = {"application/vnd.jupyter.widget-state+json": {
        "state": {"m1": {"model_name": "LayoutModel", "state": {}}}, "version_major": 2, "version_minor": 0}}
    nb["metadata"]["language_info"] = {"codemirror_mode": {"name": "ipython", "version": 3}, "file_extension": ".py",
                                       "mimetype": "text/x-python", "name": "python", "nbconvert_exporter": "python",
                                       "pygments_lexer": "ipython3", "version": "3.11.0"}
    return nb


def _strip_hook_result(nb: dict[str, Any]) -> dict[str, Any]:
    """What the save hook leaves of a copy of ``nb``."""
    model = {"type": "notebook", "format": "json", "content": copy.deepcopy(nb)}
    _strip_hook()(model=model, path="x.ipynb", contents_manager=None)
    return model["content"]


def test_the_lab_notebooks() -> None:
    assert [p.name for p in STORED] == ["01_quickstart.ipynb", "02_tune_gpu_kernel.ipynb",
                                        "03_tradeoffs_and_acf.ipynb", "04_teaching_search.ipynb"]


@pytest.mark.parametrize("path", STORED, ids=[p.name for p in STORED])
def test_notebooks_are_stored_clean(path: Path) -> None:
    """Stored without outputs, execution counts, run metadata or widget state, for the python3 kernel."""
    nb = json.loads(path.read_text(encoding="utf-8"))
    name = path.name
    fix = "save it from `make lab`, whose save hook strips it"
    assert nb["metadata"]["kernelspec"]["name"] == KERNEL_NAME, name
    assert "widgets" not in nb["metadata"], f"{name} stores widget state; {fix}"
    for i, cell in enumerate(nb["cells"]):
        if cell["cell_type"] == "code":
            assert cell["outputs"] == [], f"{name} cell {i} stores {len(cell['outputs'])} outputs; {fix}"
            assert cell["execution_count"] is None, \
                f"{name} cell {i} stores execution count {cell['execution_count']}; {fix}"
    assert _strip_hook_result(nb) == nb, f"{name} holds run metadata (timings, language version, ...); {fix}"
    nbformat = pytest.importorskip("nbformat")
    nbformat.validate(nbformat.reads(path.read_text(encoding="utf-8"), as_version=4))


def test_the_save_hook_strips_a_notebook_model() -> None:
    stored = json.loads((NOTEBOOKS / "01_quickstart.ipynb").read_text(encoding="utf-8"))
    run = _as_run(stored)
    run["cells"][0]["attachments"] = {"a.png": {"image/png": "iVBORw0KGgo="}}
    model = {"type": "notebook", "format": "json", "content": run}
    assert _strip_hook()(model=model, path="notebooks/01_quickstart.ipynb", contents_manager=None) is None
    nb = model["content"]
    assert nb is run  # stripped in place: the contents manager writes this model
    code = [cell for cell in nb["cells"] if cell["cell_type"] == "code"]
    assert code and all(cell["outputs"] == [] and cell["execution_count"] is None for cell in code)
    assert [cell["metadata"] for cell in nb["cells"]] == [cell["metadata"] for cell in stored["cells"]]
    assert nb["metadata"] == {"kernelspec": stored["metadata"]["kernelspec"], "language_info": {"name": "python"}}
    assert [c["source"] for c in nb["cells"]] == [c["source"] for c in stored["cells"]]
    assert [c["id"] for c in nb["cells"]] == [c["id"] for c in stored["cells"]]
    assert nb["cells"][0]["attachments"] == {"a.png": {"image/png": "iVBORw0KGgo="}}  # content, not output
    text = {"type": "file", "format": "text", "content": '{"outputs": [1]}'}  # other files are saved as they are
    _strip_hook()(model=text, path="data.json", contents_manager=None)
    assert text["content"] == '{"outputs": [1]}'


@pytest.mark.parametrize("path", STORED, ids=[p.name for p in STORED])
def test_the_lab_saves_a_run_notebook_as_stored(path: Path, tmp_path: Path) -> None:
    """Saved through the server's contents manager with `make lab`'s config, a run notebook is the stored file."""
    stored = path.read_text(encoding="utf-8")
    assert _save_as_the_lab(_as_run(json.loads(stored)), tmp_path, path.name) == stored


def test_make_lab_loads_the_save_hook() -> None:
    """`make lab` starts JupyterLab with the config that holds the hook (--show-config: loads it and exits)."""
    jupyter = Path(sys.executable).parent / "jupyter"
    if shutil.which("make") is None or not jupyter.exists():
        pytest.skip("needs make and jupyter next to this interpreter")
    # -o: never (re)build the venv from a test; BIN: this interpreter's jupyter
    out = subprocess.run(["make", "-s", "-o", ".venv/.installed-test", "lab", f"BIN={jupyter.parent}",
                          "LAB_ARGS=--show-config"], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    assert str(LAB_CONFIG) in out.stdout and "pre_save_hook = <function strip_outputs_pre_save_hook" in out.stdout, \
        out.stdout + out.stderr
    assert "Overriding existing pre_save_hook" not in out.stderr, out.stderr


def test_quickstart(execute: Any, tmp_path: Path) -> None:
    nb = execute("01_quickstart.ipynb")
    text = _all_text(nb)
    assert "best score 2.0 at {'x': 1.0, 'y': 1" in text  # the toy optimum
    assert "Pareto front:" in text and "sass_instructions=" in text  # the reduction kernel's front
    assert any("application/vnd.plotly.v1+json" in _mimes(c) for c in nb.cells), "no plotly figure shown"
    last = nb.cells[-1]
    assert last.source == "from compileiq_lab.widgets import Dashboard\n\ndash = Dashboard()\ndash"
    assert WIDGET_VIEW in _mimes(last), "the dashboard was not displayed as a widget"
    # saved from the lab after the run, the notebook is again the stored file
    stored = (NOTEBOOKS / "01_quickstart.ipynb").read_text(encoding="utf-8")
    assert _save_as_the_lab(nb, tmp_path, "01_quickstart.ipynb") == stored


RECORDINGS = REPO / "bench" / "results" / "runs"  # recorded GPU run stores, where a GPU session made them


def _check_tune_gpu_kernel(nb: Any, tmp_path: Path) -> str:
    """What 02 must show on whichever path this machine takes; returns its printed text."""
    from compileiq_lab import load_acf
    from compileiq_lab.measure.gpu import gpu_unavailable_reason

    text = _all_text(nb)
    if gpu_unavailable_reason() is None:
        kernel = "softmax"
        assert "GPU found" in text and "A/A noise floor" in text
    else:
        kernel = "matmul_c"
        assert "no GPU runs here" in text
        assert "CPU path: tuning the C kernel matmul_c for runtime and compile_time, both measured for real" in text
        assert "warm_up() a second time: None" in text  # the compiler is warmed up once, before the baseline
        assert "compile-time noise: 8 warm compiles of the baseline" in text
        assert "A/A noise floor" in text and "wins (interval above 1 + floor)" in text
    assert "finished after" in text
    front = [line for line in text.splitlines() if line.startswith("Pareto front:")]
    assert front and int(front[0].split()[2]) >= 1
    exported = list(tmp_path.rglob(f"{kernel}-eval*.acf"))  # the point exported through the dashboard
    assert len(exported) == 1 and load_acf(exported[0]).kernel == kernel
    assert any(WIDGET_VIEW in _mimes(c) for c in nb.cells), "the dashboard was not displayed"
    assert text.count("not answered yet") == 3 and all(f"Exercise {i}: correct" in text for i in (1, 2, 3))
    return text


def test_tune_gpu_kernel(execute: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("COMPILEIQ_RECORDINGS", raising=False)
    text = _check_tune_gpu_kernel(execute("02_tune_gpu_kernel.ipynb"), tmp_path)
    if not list(RECORDINGS.glob("*.db")):
        assert "no recorded GPU run ships with this copy yet" in text


def test_tune_gpu_kernel_replays_a_recorded_gpu_run(execute: Any, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """02 without a GPU replays a recorded GPU run store (here one the certification bench records with the
    stand-in GPU backend: the store and its validation are real, the figures are not)."""
    out = tmp_path / "recorded"
    subprocess.run([sys.executable, str(REPO / "bench" / "bench_certify.py"), "--standin", "--steps", "record",
                    "--generations", "2", "--out", str(out)], check=True, capture_output=True, timeout=600)
    monkeypatch.setenv("COMPILEIQ_RECORDINGS", str(out))
    nb = execute("02_tune_gpu_kernel.ipynb")
    text = _check_tune_gpu_kernel(nb, tmp_path)
    for shown in ("replaying recorded GPU run softmax.db", "GPU: stand-in GPU (sm_90)",
                  "note: recorded with the stand-in GPU backend", "recorded Pareto front:",
                  "stored validation: 20 interleaved rounds", "A/A:", "data: the recorded GPU run"):
        assert shown in text, shown
    assert sum("application/vnd.plotly.v1+json" in _mimes(c) for c in nb.cells) >= 2


def test_tradeoffs_and_acf(execute: Any) -> None:
    nb = execute("03_tradeoffs_and_acf.ipynb")
    text = _all_text(nb)
    assert "machine-code hash matches: True" in text
    assert "nvcc args:  ['-arch=sm_90'" in text and "ptxas args: ['-arch=sm_90'" in text
    assert "chosen: eval" in text


def test_teaching_search(execute: Any) -> None:
    nb = execute("04_teaching_search.ipynb")
    text = _all_text(nb)
    finals = {}
    for line in text.splitlines():
        parts = line.split()
        if parts and parts[0] in ("ga", "nsga2", "random") and len(parts) >= 4 and parts[0] not in finals:
            try:
                finals[parts[0]] = float(parts[1])  # the table: strategy, mean regret, sd, median, ...
            except ValueError:  # "ga vs random: p = ..."
                continue
    assert set(finals) == {"ga", "nsga2", "random"}, text
    assert finals["ga"] < finals["random"] and finals["nsga2"] < finals["random"]  # search beats sampling
    assert "GA vs random" in text or "ga vs random" in text
    assert "model R²" in text and text.count("not answered yet") == 3
    assert "same config: True" in text
    assert "stage 1: common (2 controls)" in text and "stage 3: common+advanced+exotic" in text
    assert "generation 1 opens with them: True" in text
    assert "sm_80" in text and "sm_90" in text  # fronts compared across architectures
