"""Plot data functions, plotly figures and the self-contained HTML report."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from compileiq_lab import Results, Search, SearchConfiguration, load_results
from compileiq_lab.exceptions import ConfigurationError
from compileiq_lab.space.space import flatten_params
from compileiq_lab.store.sqlite import EvalRecord
from compileiq_lab.testing import FlagProblem
from compileiq_lab.viz.data import (
    failure_summary,
    front_table,
    history_data,
    parallel_data,
    pareto_data,
    quantity_text,
)

XSS = "<script>alert(1)</script>"


def _objective(prob: FlagProblem) -> Any:
    def obj(c: dict[str, Any]) -> Any:
        if "f0" in c and "f1" in c:
            raise ValueError(XSS)
        if "f2" in c and "f3" in c:
            raise RuntimeError("boom\nsecond line")
        if "f4" in c and "f5" in c:
            return None  # recorded as "invalid"
        return (prob(c), float(len(c)))
    return obj


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Results:
    prob = FlagProblem(n_flags=6, n_levels=2)
    path = tmp_path_factory.mktemp("viz") / "r.db"
    cfg = SearchConfiguration(generations=4, pool_size=10, num_objectives=2, seed=3,
                              objective_names=["runtime", "n_flags"])
    meta = {"kernel": "saxpy<b>", "catalog": "nvcc", "arch": "sm_90",
            "toolchain": {"nvcc": "12.4", "driver": "550"}, "host": {"gpu": "H200"}}
    Search(_objective(prob), prob.space(), cfg, store=str(path), metadata=meta).start()
    return load_results(str(path))


def _rec(i: int, gen: int, scores: list[float] | None, status: str = "ok", error: str = "",
         params: dict[str, Any] | None = None, base: bool = False) -> EvalRecord:
    return EvalRecord(eval_id=i, generation=gen, config_key=str(i), params=params or {}, status=status,
                      error=error, scores=scores, elapsed_s=0.0, started_at=0.0, is_baseline=base)


@pytest.fixture()
def small() -> Results:
    """Hand-checkable: baseline (2, 10), front {(1, 20), (4, 5)}, (3, 30) dominated, 3 failures."""
    recs = [_rec(0, 0, [2.0, 10.0], base=True),
            _rec(1, 1, [1.0, 20.0], params={"a": "-fa", "opt": {"O": 3}}),
            _rec(2, 1, None, "error", "ValueError: x\ntraceback"),
            _rec(3, 2, [4.0, 5.0], params={"opt": {"O": 1}}),
            _rec(4, 2, [3.0, 30.0], params={"a": "-fa"}),
            _rec(5, 2, None, "timeout", "took too long"),
            _rec(6, 3, None, "error", "KeyError: 'k'")]
    return Results(recs, directions=["min", "min"], objective_names=["t", "size"])


# -- data ------------------------------------------------------------------------------------
def test_pareto_data_small(small: Results) -> None:
    d = pareto_data(small)
    assert d["points"]["eval_id"] == [0, 1, 3, 4]
    assert d["points"]["on_front"] == [True, True, True, False]
    assert d["front"] == {"x": [1.0, 2.0, 4.0], "y": [20.0, 10.0, 5.0], "eval_id": [1, 0, 3]}
    assert d["failed"]["eval_id"] == [2, 5, 6]
    assert d["failed"]["error"][0] == "ValueError: x"
    assert d["baseline"] == {"x": 2.0, "y": 10.0, "eval_id": 0}
    assert (d["x_name"], d["y_name"], d["y_kind"]) == ("t", "size", "objective")
    swapped = pareto_data(small, x="size", y="t")
    assert swapped["points"]["x"] == d["points"]["y"]
    with pytest.raises(ConfigurationError):
        pareto_data(small, 0, 0)
    with pytest.raises(ConfigurationError):
        pareto_data(small, 0, 5)


def test_pareto_data_run_matches_results(run: Results) -> None:
    d = pareto_data(run)
    front_ids = {r["eval_id"] for r in run.pareto_front()}
    flagged = {e for e, f in zip(d["points"]["eval_id"], d["points"]["on_front"]) if f}
    assert flagged == front_ids == set(d["front"]["eval_id"])
    assert d["front"]["x"] == sorted(d["front"]["x"])
    n_ok = run.status_counts().get("ok", 0)
    assert len(d["points"]["x"]) == n_ok and len(d["failed"]["eval_id"]) == len(run) - n_ok


def test_pareto_data_one_objective() -> None:
    res = Results([_rec(0, 0, [3.0], base=True), _rec(1, 1, [1.0]), _rec(2, 1, [1.0]), _rec(3, 1, [2.0])],
                  directions=["min"])
    d = pareto_data(res)
    assert d["y_kind"] == "eval_id" and d["y_index"] is None
    assert d["points"]["y"] == [0.0, 1.0, 2.0, 3.0]
    assert d["points"]["on_front"] == [False, True, True, False]


def test_history_small(small: Results) -> None:
    h = history_data(small)
    assert h["generations"] == [0, 1, 2, 3]
    t = h["objectives"][0]
    assert t["best_so_far"] == [2.0, 1.0, 1.0, 1.0]
    assert t["median"] == [2.0, 1.0, 3.5, None]
    assert h["failures"] == {"error": [0, 1, 0, 1], "timeout": [0, 0, 1, 0]}
    assert h["evaluations"] == [1, 2, 3, 1] and h["ok"] == [1, 1, 2, 0]


def test_history_run_monotone_and_counts(run: Results) -> None:
    h = history_data(run)
    for obj in h["objectives"]:
        vals = [v for v in obj["best_so_far"] if v is not None]
        assert vals == sorted(vals, reverse=True)  # both minimised: never increases
    totals = {s: sum(c) for s, c in h["failures"].items()}
    expected = {s: n for s, n in run.status_counts().items() if s != "ok"}
    assert totals == expected and len(expected) >= 2


def test_best_so_far_max_direction() -> None:
    res = Results([_rec(0, 0, [1.0]), _rec(1, 1, [5.0]), _rec(2, 2, [2.0])], directions=["max"])
    assert history_data(res)["objectives"][0]["best_so_far"] == [1.0, 5.0, 5.0]


def test_parallel_small(small: Results) -> None:
    p = parallel_data(small)
    assert p["eval_id"] == [0, 1, 3, 4]
    cols = {c["name"]: c for c in p["columns"]}
    assert list(cols) == ["a", "opt.O", "t", "size"]
    a = cols["a"]
    assert a["type"] == "categorical" and a["labels"] == ["default", "-fa"]
    assert a["values"] == [0, 1, 0, 1]
    o = cols["opt.O"]
    assert o["labels"] == ["default", "1", "3"] and o["values"] == [0, 2, 1, 0]
    assert cols["t"]["kind"] == "objective" and cols["t"]["values"] == [2.0, 1.0, 4.0, 3.0]


def test_parallel_run_uses_space(run: Results) -> None:
    p = parallel_data(run)
    names = [c["name"] for c in p["columns"]]
    assert names[:8] == [f"f{i}" for i in range(6)] + ["L0", "L1"]
    assert names[-2:] == ["runtime", "n_flags"]
    for c in p["columns"]:
        assert len(c["values"]) == len(p["eval_id"])
        if c["type"] == "categorical":
            assert all(0 <= v < len(c["labels"]) for v in c["values"])


def test_flatten_params() -> None:
    assert flatten_params({"a": 1, "g": {"b": {"c": "x"}}}) == {"a": 1, "g.b.c": "x"}


def test_front_table_changes(small: Results) -> None:
    rows = front_table(small)
    assert [r["eval_id"] for r in rows] == [1, 0, 3]
    r1 = rows[0]
    assert r1["objectives"] == {"t": 1.0, "size": 20.0}
    assert r1["changes"] == {"t": "-50 % vs baseline, better", "size": "+100 % vs baseline, worse"}
    assert rows[1]["changes"] == {"t": "same as baseline", "size": "same as baseline"} and rows[1]["is_baseline"]
    assert r1["params"] == {"a": "-fa", "opt": {"O": 3}}


def test_change_wording_and_units() -> None:
    from compileiq_lab.space.objectives import METRICS, Objective

    regs, ct = METRICS["registers"], METRICS["compile_time"]
    assert regs.label == "registers (count, lower is better)"
    assert regs.change(25, 31) == "-19 % vs baseline, better"  # the example: 25 registers vs 31
    assert ct.change(0.29 * 1.246, 0.29) == "+25 % vs baseline, worse"
    # compile_time's spread (CV 2-8 % between repeated compiles of one config): a smaller gap is not a win
    assert ct.change(0.29 * 0.969, 0.29) == "-3.1 % vs baseline, within noise (10 %)"
    assert ct.change(0.29 * 1.094, 0.29) == "+9.4 % vs baseline, within noise (10 %)"
    assert ct.change(0.29 * 0.88, 0.29) == "-12 % vs baseline, better" and regs.change(30.9, 31).endswith("better")
    assert Objective("gflops", "max", "").change(110.0, 100.0) == "+10 % vs baseline, better"
    assert Objective("x").change(None, 1.0) is None and Objective("x").change(0.0, 0.0) == "same as baseline"
    spill = Objective("spill_bytes", unit="bytes")  # a regression from 0 has no percentage, but is one
    assert spill.change(168.0, 0.0) == f"from 0 to {spill.format(168.0)}, worse"
    assert ct.format(0.000123) == "123 \u00b5s" and regs.format(25.0) == "25 count"
    assert quantity_text("ptxas_time_ms", 12.5) == "12.5 ms" and quantity_text("spill_bytes", 8.0) == "8 bytes"
    assert quantity_text("launches_per_sample", 3.0) == "3"
    with pytest.raises(ConfigurationError, match=r"`0 <= noise < 1` must hold .* but got 5"):
        Objective("t", noise=5)


def test_front_table_without_baseline() -> None:
    res = Results([_rec(0, 0, None, "error", "e", base=True), _rec(1, 1, [1.0, 2.0])], directions=["min", "max"])
    assert front_table(res)[0]["changes"] == {"score_1": None, "score_2": None}


def test_failure_summary(small: Results, run: Results) -> None:
    s = failure_summary(small)
    assert s[0] == {"status": "error", "count": 2,
                    "examples": [{"eval_id": 2, "error": "ValueError: x"}, {"eval_id": 6, "error": "KeyError: 'k'"}]}
    assert s[1]["status"] == "timeout"
    summary = failure_summary(run)
    assert {r["status"]: r["count"] for r in summary} == {k: v for k, v in run.status_counts().items() if k != "ok"}
    assert all(len(r["examples"]) <= 3 for r in summary)


# -- figures ---------------------------------------------------------------------------------
def test_figures_traces(run: Results) -> None:
    pytest.importorskip("plotly")
    from compileiq_lab.viz import history_figure, parallel_figure, pareto_figure

    fig = pareto_figure(run)
    names = [t.name for t in fig.data]
    assert names[:3] == ["evaluations", "Pareto front", "baseline (compiler defaults)"]
    assert names[3].startswith("failed (")
    front_ids = {r["eval_id"] for r in run.pareto_front()}
    assert set(fig.data[1].customdata) == front_ids
    h = history_figure(run)
    hn = [t.name for t in h.data]
    assert "runtime best so far" in hn and "n_flags median" in hn
    assert {n for n in hn if n.startswith("failed: ")} == {f"failed: {s}" for s in run.status_counts() if s != "ok"}
    par = parallel_figure(run)
    assert len(par.data) == 1 and par.data[0].type == "parcoords"
    assert len(par.data[0].dimensions) == 10


def test_figures_one_objective_and_empty() -> None:
    pytest.importorskip("plotly")
    from compileiq_lab.viz import history_figure, parallel_figure, pareto_figure

    res = Results([_rec(0, 0, [3.0], base=True), _rec(1, 1, [1.0])], directions=["min"])
    assert pareto_figure(res).data[0].name == "evaluations"
    empty = Results([_rec(0, 0, None, "error", "bad", base=True)], directions=["min", "min"])
    for fig in (pareto_figure(empty), history_figure(empty), parallel_figure(empty)):
        assert fig.to_dict()["data"] is not None


def test_missing_plotly_raises(monkeypatch: pytest.MonkeyPatch, small: Results) -> None:
    from compileiq_lab.exceptions import OptionalDependencyError
    from compileiq_lab.viz import figures
    from compileiq_lab.viz.report import write_report

    monkeypatch.setitem(sys.modules, "plotly", None)
    monkeypatch.setitem(sys.modules, "plotly.graph_objects", None)
    with pytest.raises(OptionalDependencyError, match=r"pip install 'compileiq-lab\[lab\]'"):
        figures.pareto_figure(small)
    with pytest.raises(OptionalDependencyError):
        write_report(small, "unused.html")


# -- report ----------------------------------------------------------------------------------
def test_report(run: Results, tmp_path: Path) -> None:
    pytest.importorskip("plotly")
    from compileiq_lab.viz.report import write_report

    out = write_report(run, tmp_path / "sub" / "report.html")
    assert out == tmp_path / "sub" / "report.html" and out.exists()
    text = out.read_text(encoding="utf-8")
    assert text.count("<html") == 1 and '<script src="http' not in text
    assert not re.search(r"<script[^>]*\bsrc=", text)  # nothing fetched when viewed
    assert "Plotly.newPlot" in text and len(text) > 1_000_000  # the bundle is embedded
    assert text.count("plotly.js v") <= 2  # embedded once (the banner may repeat in the bundle)
    assert XSS not in text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in text
    assert "saxpy&lt;b&gt;" in text and "nvcc" in text and "sm_90" in text and "H200" in text
    assert text.count('class="front-row"') == len(run.pareto_front())
    for row in front_table(run):
        assert f">{row['eval_id']}" in text
    for status in run.status_counts():
        assert status in text
    assert run.store_path in text


def test_report_one_objective_no_metadata(tmp_path: Path) -> None:
    pytest.importorskip("plotly")
    from compileiq_lab.viz.report import write_report

    prob = FlagProblem(n_flags=4, n_levels=1)
    res = Search(prob, prob.space(), SearchConfiguration(generations=2, pool_size=6),
                 store=str(tmp_path / "one.db")).start()
    text = write_report(res, tmp_path / "one.html").read_text(encoding="utf-8")
    assert "<title>compileiq-lab run</title>" in text and "No evaluation failed." in text


def test_import_loads_no_plotly() -> None:
    code = ("import sys, compileiq_lab, compileiq_lab.viz, compileiq_lab.viz.data, compileiq_lab.viz.report\n"
            "bad = [m for m in sys.modules if m == 'plotly' or m.startswith('plotly.')]\n"
            "assert not bad, bad\n")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_report_of_a_kernel_run_shows_the_machine_code_of_its_pick(tmp_path: Path) -> None:
    """`compileiq-lab report` on a kernel run: the picked point's ptxas -v resources and SASS mix beside the
    baseline's, the figures `code_diff` computes."""
    from compileiq_lab import Search
    from compileiq_lab.analysis.machine_code import code_diff
    from compileiq_lab.cli import main
    from compileiq_lab.kernels import KernelRun
    from compileiq_lab.store.pick import default_pick, pick_point
    from compileiq_lab.testing import tool_available

    if not tool_available("nvcc"):
        pytest.skip("needs nvcc")
    run = KernelRun("sgemm", "ptxas", ["sass_instructions", "registers"], arch="sm_90", workdir=tmp_path / "w")
    store = tmp_path / "sgemm.db"
    results = Search.of(run, store=str(store), generations=2, pool_size=8, seed=0).start(workers=2)
    assert main(["report", str(store), "-o", str(tmp_path / "r.html")]) == 0
    text = (tmp_path / "r.html").read_text()
    rec, _ = pick_point(results, default_pick(True))
    assert rec is not None and f"Machine code: eval {rec.eval_id} vs the baseline" in text
    diff = code_diff(run, rec.params, results.baseline_record.params)
    registers = diff.loc["registers"]
    assert (f'<tr><td>registers</td><td class="num">{registers.baseline:g}</td>'
            f'<td class="num">{registers.point:g}</td>') in text
    assert "<td>fma/alu</td>" in text or "nvdisasm" in text
