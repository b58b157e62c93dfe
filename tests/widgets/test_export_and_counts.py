"""The lab's exports and counts: what an export says it dropped, never over another point's file, under a name of its
own where another run's export holds the default; a front counted in distinct score vectors."""

from __future__ import annotations

import html
import json

import pytest

pytest.importorskip("ipywidgets")
pytest.importorskip("anywidget")

import compileiq_lab.space as ss
from compileiq_lab import KernelRun, Run, Search, SearchConfiguration, load_acf, load_results
from compileiq_lab.acf.exporting import export_point
from compileiq_lab.exceptions import ConfigurationError
from compileiq_lab.testing import tool_available
from compileiq_lab.widgets import Dashboard


@pytest.mark.skipif(not tool_available("ptxas"), reason="needs ptxas")
def test_an_export_says_what_it_dropped_and_never_replaces_another_points_file(tmp_path):
    """A point whose controls change nothing is exported as the compiler defaults, and the lab says so (as the CLI
    does); an export to a file holding another point is refused, one of the same point replaces it."""
    (tmp_path / "axpy.cu").write_text("__global__ void axpy(float a, const float* x, float* y, int n) {\n"
                                      "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
                                      "  if (i < n) y[i] = a * x[i] + y[i];\n}\n")
    kr = KernelRun(str(tmp_path / "axpy.cu"), "ptxas", ["registers"], arch="sm_90", controls=["maxrregcount"],
                   workdir=tmp_path / "w")
    noop = {"maxrregcount": 255}  # above what the kernel uses: the same machine code
    search = Search.of(kr, store=str(tmp_path / "r.db"), generations=1, pool_size=2, seed=0, warm_start=[noop])
    dash = Dashboard(Run(search), kr, folder=tmp_path / "out")
    dash.start()
    results = dash.wait(timeout=120)
    point = next(r for r in results.records if r.params == noop and not r.is_baseline)
    dash.detail.show(results, point.eval_id, kr)  # this very point, not its representative
    dash.detail.path.value = "noop.acf"
    dash.detail.export_button.click()
    said = dash.detail.message.value
    assert "wrote" in said and "dropped as having no effect" in said and "maxrregcount" in said, said
    assert "it sets no control: the compiler defaults build this point" in said
    assert load_acf(tmp_path / "out" / "noop.acf").controls == {}
    dash.detail.export_button.click()  # the same point again: replaced
    assert "wrote" in dash.detail.message.value
    other = next(r for r in results.records if r.status == "ok" and r.eval_id != point.eval_id)
    dash.detail.show(results, other.eval_id, kr)
    dash.detail.path.value = "noop.acf"
    dash.detail.export_button.click()
    refused = html.unescape(dash.detail.message.value)
    assert "never replaces another point's file" in refused and f"holds eval {point.eval_id} of" in refused
    assert load_acf(tmp_path / "out" / "noop.acf").run["eval_id"] == point.eval_id  # not lost
    kr.close()


def test_a_front_is_counted_in_distinct_score_vectors_as_show_counts_it() -> None:
    """``y`` changes no score: configs tie, and the front's count says how many repeat a score vector."""
    def objective(c: dict) -> tuple[float, float]:
        return float(c["x"]), float(10 - c["x"])

    space = {"x": ss.range(1, 4), "y": ss.range(1, 9)}
    settings = SearchConfiguration(generations=3, pool_size=8, seed=0, num_objectives=2)
    dash = Dashboard(Run(Search(objective, space, settings, store=":memory:")))
    dash.start()
    results = dash.wait(timeout=60)
    front = [(r["score_1"], r["score_2"]) for r in results.pareto_front()]
    distinct = len(set(front))
    assert len(front) > distinct  # ties on the front: what the count must fold
    title = dash.plots.pareto.layout.title.text
    assert f"{distinct} (+{len(front) - distinct} with the same scores) on the front" in title, title
    assert len(results.distinct_front()) == distinct


def test_the_same_points_export_is_replaced_however_its_store_was_named_and_another_runs_gets_its_own_name(
        tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    space = {"x": ss.range(1, 9)}

    def run(store: str):
        return Search(lambda c: float(c["x"]), space, SearchConfiguration(generations=1, pool_size=3, seed=0),
                      store=store).start()

    first = run("a.db")
    out = export_point(first, 0, None, folder="out")
    assert out.name == "point-eval0.json"
    assert export_point(load_results(str(tmp_path / "a.db")), 0, None, folder="out") == out  # ./a.db, absolute
    other = export_point(run("b.db"), 0, None, folder="out")  # the default name holds a.db's point: not replaced
    assert other.name == "point-b-eval0.json"
    assert json.loads(out.read_text())["store"].endswith("a.db")
    export_point(first, 0, None, path="p.json", folder="out")
    with pytest.raises(ConfigurationError, match="never replaces another point's file, but p.json in .* holds eval 0 "
                                                 "of a.db; name another file"):
        export_point(load_results("b.db"), 0, None, path="p.json", folder="out")  # a name given: refused
    mem = Search(lambda c: float(c["x"]), space, SearchConfiguration(generations=1, pool_size=3, seed=0),
                 store=":memory:").start()
    export_point(mem, 0, None, path="m.json", folder="out")
    with pytest.raises(ConfigurationError, match="never replaces"):  # two runs in memory are never one store
        export_point(Search(lambda c: float(c["x"]), space, SearchConfiguration(generations=1, pool_size=3, seed=0),
                            store=":memory:").start(), 0, None, path="m.json", folder="out")
