"""overlay_fronts_figure over real run stores of Python objectives: each run's front on the two axes shown (not its
full front, which zig-zags in 2-D), its points and baseline, labels and axis titles, and the runs it refuses."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("plotly")

import compileiq_lab.space as ss
from compileiq_lab import Search, SearchConfiguration, load_results
from compileiq_lab.exceptions import ConfigurationError
from compileiq_lab.store import Results
from compileiq_lab.viz import overlay_fronts_figure
from compileiq_lab.viz.overlay import front_2d, run_label

SPACE = {"x": ss.range(0, 12, default=0), "y": ss.range(0, 5, default=0)}  # the baseline: x = y = 0


def three(config):
    x, y = config["x"], config["y"]
    return float(x), float(10 - x + y), float((y - 2) ** 2)


def make_run(path: Path, fn=three, names=("a", "b", "c"), directions="min", seed=2) -> Results:
    # model="none" (pymoo's offspring unscreened): the runs these tests were written on (no ties on two axes)
    cfg = SearchConfiguration(generations=3, pool_size=8, seed=seed, num_objectives=len(names),
                              objective_names=list(names), problem_type=directions, model="none")
    Search(fn, SPACE, cfg, store=str(path)).start()
    return load_results(str(path))


def non_dominated(points, signs=(1.0, 1.0)):
    """Eval ids of (u, v, id) points no other point beats on both (in each one's direction)."""
    s = [(signs[0] * u, signs[1] * v, i) for u, v, i in points]
    return {i for u, v, i in s if not any(a <= u and b <= v and (a < u or b < v) for a, b, _ in s)}


def ok(res: Results, xi: int, yi: int):
    return [(r.scores[xi], r.scores[yi], r.eval_id) for r in res.records if r.status == "ok"]


def role(fig, name: str):
    return [t for t in fig.data if t.meta["role"] == name]


def test_each_front_is_the_runs_front_on_the_two_axes_not_its_full_front(tmp_path: Path):
    one, two = make_run(tmp_path / "one.db", seed=2), make_run(tmp_path / "two.db", seed=5)
    fig = overlay_fronts_figure([one, two], "a", "c")
    fronts = role(fig, "front")
    assert [t.meta["path"] for t in fronts] == [one.store_path, two.store_path]
    for res, t in zip((one, two), fronts):
        assert set(t.customdata) == non_dominated(ok(res, 0, 2))
        assert {r.eval_id for r in front_2d(res, "a", "c")} == set(t.customdata)
        full = {r.eval_id for r in res.front_records()}
        assert set(t.customdata) < full  # the 3-objective front has more points, which would zig-zag here
        assert list(t.x) == sorted(t.x) and t.line.shape == "hv"
    for res, t in zip((one, two), role(fig, "points")):
        assert sorted(t.customdata) == sorted(i for _, _, i in ok(res, 0, 2)) and t.marker.opacity < 0.5
    for res, t in zip((one, two), role(fig, "baseline")):
        assert list(t.customdata) == [res.baseline_record.eval_id] and t.marker.symbol == "star"
    assert fig.layout.xaxis.title.text == "a (lower is better)"
    assert fig.layout.yaxis.title.text == "c (lower is better)"
    # alike runs are told apart by their files, in the legend and in every hover
    assert fronts[0].name == f"three, {len(one)} evals [one.db]: front"
    assert all("[two.db]" in text for t in fig.data if t.meta["run"] == 1 for text in t.text)
    # by index: in the first run's objectives
    by_index = overlay_fronts_figure([one, two], 0, 2, labels=["first", "second"])
    assert [t.customdata for t in role(by_index, "front")] == [t.customdata for t in fronts]
    assert role(by_index, "front")[1].name == "second: front"


def test_a_maximised_x_draws_its_staircase_the_other_way(tmp_path: Path):
    res = make_run(tmp_path / "max.db", names=("gain", "cost"), directions=["max", "min"],
                   fn=lambda c: (float(c["x"] + c["y"]), float(c["x"] * c["x"] + 3 * c["y"])))
    fig = overlay_fronts_figure([res])
    (front,) = role(fig, "front")
    assert set(front.customdata) == non_dominated(ok(res, 0, 1), signs=(-1.0, 1.0)) and len(front.x) > 1
    assert front.line.shape == "vh" and fig.layout.xaxis.title.text == "gain (higher is better)"
    assert run_label(res) == f"<lambda>, {len(res)} evals"


def test_runs_that_cannot_share_the_axes_are_refused(tmp_path: Path):
    three_obj = make_run(tmp_path / "abc.db")
    single = make_run(tmp_path / "single.db", fn=lambda c: float(c["x"]), names=("a",))
    with pytest.raises(ConfigurationError, match=r"single\.db.*lacks \['c'\] and has \['a'\]"):
        overlay_fronts_figure([three_obj, single], "a", "c")
    with pytest.raises(ConfigurationError, match="same objective"):
        overlay_fronts_figure([three_obj], "b", "b")
    with pytest.raises(ConfigurationError, match="no runs"):
        overlay_fronts_figure([])
    with pytest.raises(ConfigurationError, match="1 labels for 2 runs"):
        overlay_fronts_figure([three_obj, three_obj], labels=["x"])
    with pytest.raises(ConfigurationError, match=r"index 1 is out of range.*\['a'\]"):
        overlay_fronts_figure([single, three_obj], 0, 1)
    maxed = make_run(tmp_path / "maxed.db", directions=["max", "min", "min"])
    with pytest.raises(ConfigurationError, match="'a' is minimised in some runs and maximised in others"):
        overlay_fronts_figure([three_obj, maxed], "a", "b")
