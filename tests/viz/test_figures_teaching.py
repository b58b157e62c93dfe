"""Figures as the teaching notebooks show them: one-objective scatter, generation axes, weak influence models."""

from __future__ import annotations

from typing import Any

import pytest

from compileiq_lab import Results, Search, SearchConfiguration
from compileiq_lab.store.sqlite import EvalRecord
from compileiq_lab.testing import FlagProblem

pytest.importorskip("plotly")

from compileiq_lab.viz.figures import (  # after the plotly skip
    WEAK_FIT_R2,
    history_figure,
    influence_figure,
    pareto_figure,
)


def _rec(i: int, gen: int, scores: list[float] | None, status: str = "ok", base: bool = False) -> EvalRecord:
    return EvalRecord(eval_id=i, generation=gen, config_key=str(i), params={} if base else {"x": i}, status=status,
                      error="" if status == "ok" else "KeyError: 'x'", scores=scores, elapsed_s=0.0,
                      started_at=0.0, is_baseline=base)


def _one_objective(direction: str) -> Results:
    """Baseline 3, then 1, a failure, 1 again (a tie for best), 2 (call order = eval id)."""
    recs = [_rec(0, 0, [3.0], base=True), _rec(1, 1, [1.0]), _rec(2, 1, None, "error"),
            _rec(3, 2, [1.0]), _rec(4, 2, [2.0])]
    return Results(recs, directions=[direction], objective_names=["runtime"])


def _trace(fig: Any, name: str) -> Any:
    found = [t for t in fig.data if t.name == name]
    assert len(found) == 1, [t.name for t in fig.data]
    return found[0]


# -- one objective: score per evaluation -------------------------------------------------------
def test_one_objective_scatter_has_evaluation_order_on_x_and_the_score_on_y() -> None:
    fig = pareto_figure(_one_objective("min"))
    assert [t.name for t in fig.data] == ["evaluations", "best so far", "best", "baseline (compiler defaults)",
                                          "failed (1, no scores)"]  # no "Pareto front" with one objective
    ev = _trace(fig, "evaluations")
    assert list(ev.x) == [0, 1, 3, 4] and list(ev.y) == [3.0, 1.0, 1.0, 2.0]
    assert list(_trace(fig, "best so far").y) == [3.0, 1.0, 1.0, 1.0]
    best = _trace(fig, "best")
    assert list(best.x) == [1, 3] and list(best.y) == [1.0, 1.0]  # both points that reached the best score
    base = _trace(fig, "baseline (compiler defaults)")
    assert list(base.x) == [0] and list(base.y) == [3.0] and base.marker.symbol == "star"
    failed = _trace(fig, "failed (1, no scores)")
    assert list(failed.x) == [2] and failed.y[0] < 1.0  # at its call, under every score
    layout = fig.layout
    assert layout.xaxis.title.text == "evaluation (call order)"
    assert "runtime" in layout.yaxis.title.text and "lower is better" in layout.yaxis.title.text
    assert layout.title.text == "runtime per evaluation"


def test_one_objective_scatter_maximising() -> None:
    fig = pareto_figure(_one_objective("max"))
    assert list(_trace(fig, "best so far").y) == [3.0, 3.0, 3.0, 3.0]
    best = _trace(fig, "best")
    assert list(best.x) == [0] and list(best.y) == [3.0]  # the baseline itself is the best


def test_one_objective_scatter_of_a_real_run() -> None:
    problem = FlagProblem(n_flags=4, n_levels=1)
    res = Search(problem, problem.space(), SearchConfiguration(generations=3, pool_size=6, seed=0),
                 store=":memory:").start()
    fig = pareto_figure(res)
    ev = _trace(fig, "evaluations")
    ok = [r for r in res.records if r.status == "ok"]
    assert list(ev.x) == sorted(r.eval_id for r in ok)
    assert min(ev.y) == res.get_best_result()["score_1"]
    assert set(_trace(fig, "best").x) == {r["eval_id"] for r in res.pareto_front()}


def test_two_objective_scatter_is_unchanged() -> None:
    recs = [_rec(0, 0, [2.0, 10.0], base=True), _rec(1, 1, [1.0, 20.0]), _rec(2, 1, [4.0, 5.0]),
            _rec(3, 2, [3.0, 30.0])]
    fig = pareto_figure(Results(recs, directions=["min", "min"], objective_names=["t", "size"]))
    assert [t.name for t in fig.data] == ["evaluations", "Pareto front", "baseline (compiler defaults)"]
    assert list(_trace(fig, "Pareto front").x) == [1.0, 2.0, 4.0]


# -- history: the generation axis ------------------------------------------------------------------
def _xaxes(fig: Any) -> dict[str, Any]:
    layout = fig.to_dict()["layout"]
    return {k: v for k, v in layout.items() if k.startswith("xaxis")}


def test_history_of_a_run_without_failures_keeps_its_generation_axis() -> None:
    problem = FlagProblem()
    res = Search(problem, problem.space(), SearchConfiguration(generations=15, pool_size=12, seed=0, strategy="ga"),
                 store=":memory:").start()
    assert set(res.status_counts()) == {"ok"}
    fig = history_figure(res)
    axes = _xaxes(fig)
    assert list(axes) == ["xaxis"]  # no empty failures panel
    axis = axes["xaxis"]
    assert axis.get("showticklabels", True) is True and axis["title"]["text"] == "generation"
    assert axis["dtick"] == 1  # whole generations
    assert not [t for t in fig.data if t.type == "bar"]
    assert "no evaluation failed" in fig.layout.title.text
    gens = sorted({r.generation for r in res.records})
    assert all(list(t.x) == gens for t in fig.data)


def test_history_with_failures_shows_the_axis_on_every_panel() -> None:
    recs = [_rec(0, 0, [2.0, 10.0], base=True), _rec(1, 1, [1.0, 20.0]), _rec(2, 1, None, "error"),
            _rec(3, 2, [4.0, 5.0]), _rec(4, 2, None, "timeout")]
    fig = history_figure(Results(recs, directions=["min", "min"], objective_names=["t", "size"]))
    axes = _xaxes(fig)
    assert len(axes) == 3  # two objectives and the failures panel
    for axis in axes.values():
        assert axis["showticklabels"] is True and axis["title"]["text"] == "generation"
    assert {t.name for t in fig.data if t.type == "bar"} == {"failed: error", "failed: timeout"}
    assert "no evaluation failed" not in fig.layout.title.text


# -- influence: no bars from a model that does not fit -----------------------------------------------
def _influence(r2: float) -> Any:
    pd = pytest.importorskip("pandas")
    df = pd.DataFrame({"control": ["opt_level", "maxrregcount", "fast_compile"],
                       "influence": [0.4, 0.1, float("nan")], "low": [0.3, 0.0, float("nan")],
                       "high": [0.5, 0.2, float("nan")], "status": ["explored", "explored", "not explored"],
                       "values": [3, 2, 1]})
    df.attrs.update(objective="registers", r2=r2, evaluations=40)
    return df


def test_influence_of_a_weak_model_draws_no_bars() -> None:
    assert 0 < WEAK_FIT_R2 < 1
    fig = influence_figure(_influence(0.08))
    assert len(fig.data) == 0  # no bars at all
    notes = [a.text for a in fig.layout.annotations]
    assert len(notes) == 1
    assert notes[0].startswith("model too weak to say (R² = 0.08 < 0.5): the run does not show which controls matter;")
    assert "more evaluations or a wider exploration are needed" in notes[0]
    ticks = list(fig.layout.yaxis.ticktext)
    assert ticks == ["fast_compile (not explored)", "maxrregcount", "opt_level"]  # every control still listed
    assert "R² 0.08" in fig.layout.title.text


def test_influence_without_a_measured_fit_draws_no_bars() -> None:
    fig = influence_figure(_influence(float("nan")))
    assert len(fig.data) == 0 and "R² could not be measured" in fig.layout.annotations[0].text


def test_influence_of_a_good_model_draws_bars() -> None:
    for r2 in (WEAK_FIT_R2, 0.9):
        fig = influence_figure(_influence(r2))
        assert [t.type for t in fig.data] == ["bar"]
        assert list(fig.data[0].y) == ["maxrregcount", "opt_level"]  # explored only, largest on top
        assert not fig.layout.annotations
        assert "not explored: fast_compile" in fig.layout.title.text
