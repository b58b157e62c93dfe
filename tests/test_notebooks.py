"""The lab notebooks run top to bottom, headless, in a fresh kernel of this interpreter (no GPU needed)."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

nbformat = pytest.importorskip("nbformat", reason="the notebook tests need nbformat (pip install -e '.[lab,test]')")
nbclient = pytest.importorskip("nbclient", reason="the notebook tests need nbclient (pip install -e '.[lab,test]')")
pytest.importorskip("ipykernel", reason="the notebook tests need ipykernel (pip install -e '.[lab,test]')")
pytest.importorskip("ipywidgets", reason="the notebook tests need ipywidgets (pip install -e '.[lab]')")
pytest.importorskip("anywidget", reason="the notebook tests need anywidget (pip install -e '.[lab]')")
pytest.importorskip("plotly", reason="the notebook tests need plotly (pip install -e '.[lab]')")

REPO = Path(__file__).resolve().parents[1]
NOTEBOOKS = REPO / "notebooks"
KERNEL_NAME = "python3"
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


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
        return nb

    return run


def test_notebooks_are_stored_clean() -> None:
    """Stored without outputs, execution counts or widget state, for the python3 kernel."""
    names = sorted(p.name for p in NOTEBOOKS.glob("*.ipynb"))
    assert names == ["01_quickstart.ipynb", "02_tune_gpu_kernel.ipynb", "03_tradeoffs_and_acf.ipynb",
                     "04_teaching_search.ipynb"]
    for name in names:
        nb = nbformat.read(NOTEBOOKS / name, as_version=4)
        nbformat.validate(nb)
        assert nb.metadata.kernelspec.name == KERNEL_NAME, name
        assert "widgets" not in nb.metadata, f"{name} stores widget state"
        for cell in nb.cells:
            if cell.cell_type == "code":
                assert not cell.outputs and cell.execution_count is None, f"{name} stores outputs"


def test_quickstart(execute: Any) -> None:
    nb = execute("01_quickstart.ipynb")
    text = _all_text(nb)
    assert "best score 2.0 at {'x': 1.0, 'y': 1" in text  # the toy optimum
    assert "Pareto front:" in text and "sass_instructions=" in text  # the reduction kernel's front
    assert any("application/vnd.plotly.v1+json" in _mimes(c) for c in nb.cells), "no plotly figure shown"
    last = nb.cells[-1]
    assert last.source == "from compileiq_lab.widgets import Dashboard\n\ndash = Dashboard()\ndash"
    assert WIDGET_VIEW in _mimes(last), "the dashboard was not displayed as a widget"


def test_tune_gpu_kernel(execute: Any, tmp_path: Path) -> None:
    from compileiq_lab import load_acf
    from compileiq_lab.measure.gpu import gpu_unavailable_reason

    nb = execute("02_tune_gpu_kernel.ipynb")
    text = _all_text(nb)
    if gpu_unavailable_reason() is None:
        assert "GPU found" in text and "A/A noise floor" in text
    else:
        assert "fallback: tuning for static objectives" in text
        assert "static objectives are exact" in text
    assert "finished after" in text
    front = [line for line in text.splitlines() if line.startswith("Pareto front:")]
    assert front and int(front[0].split()[2]) >= 1
    exported = list(tmp_path.rglob("softmax-eval*.acf"))  # the point exported through the dashboard
    assert len(exported) == 1 and load_acf(exported[0]).kernel == "softmax"
    assert any(WIDGET_VIEW in _mimes(c) for c in nb.cells), "the dashboard was not displayed"


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
        if parts and parts[0] in ("ga", "nsga2", "random") and len(parts) >= 4:
            finals[parts[0]] = float(parts[1])
    assert set(finals) == {"ga", "nsga2", "random"}, text
    assert finals["ga"] < finals["random"] and finals["nsga2"] < finals["random"]  # search beats sampling
    assert "same config: True" in text
    assert "stage 1: common (2 controls)" in text and "stage 3: common+advanced+exotic" in text
    assert "generation 1 opens with them: True" in text
    assert "sm_80" in text and "sm_90" in text  # fronts compared across architectures
