"""Control influence on problems whose influential controls are known: ranking, 'not explored', interactions."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("sklearn")

import compileiq_lab.space as ss
from compileiq_lab import Search, SearchConfiguration
from compileiq_lab.analysis.influence import control_influence, control_interactions
from compileiq_lab.exceptions import ConfigurationError


def known_problem():
    rng = np.random.default_rng(0)

    def objective(c):  # a and b matter, d and e only together, the rest not at all
        a, b, d, e = c.get("a", 4), c.get("b", "x"), c.get("d", 0), c.get("e", 0)
        return 10 + 3 * a + (6 if b == "y" else 0) + 5 * d * e + rng.normal(0, 0.3)

    space = {"a": ss.range(0, 9), "b": ss.choice(["x", "y", "z"]), "noise1": ss.range(0, 9),
             "noise2": ss.choice([1, 2, 3]), "d": ss.choice([0, 1]), "e": ss.choice([0, 1]),
             "never": ss.choice([7], knockout_prob=0.0)}
    cfg = SearchConfiguration(generations=6, pool_size=30, strategy="random", seed=0, baseline=False)
    return Search(objective, space, cfg, store=":memory:").start()


@pytest.fixture(scope="module")
def results():
    return known_problem()


def test_the_influential_controls_are_recovered_in_order(results):
    df = control_influence(results, rounds=4, n_trees=60)
    explored = df[df["status"] == "explored"]
    assert list(explored["control"][:2]) == ["a", "b"]
    assert set(explored["control"][2:4]) == {"d", "e"}
    noise = explored.set_index("control").loc[["noise1", "noise2"]]
    assert (noise["influence"] < 0.01).all() and (explored.iloc[1]["low"] > noise["high"].max())
    assert (explored["low"] <= explored["high"]).all()
    assert df.attrs["r2"] > 0.8 and df.attrs["objective"] == "score_1"


def test_a_control_that_never_varied_is_not_explored_rather_than_without_effect(results):
    df = control_influence(results, rounds=3, n_trees=40)
    row = df.set_index("control").loc["never"]
    assert row["status"] == "not explored" and np.isnan(row["influence"]) and row["values"] == 1
    assert df.iloc[-1]["control"] == "never"  # listed last


def test_the_joint_effect_is_the_strongest_interaction(results):
    df = control_interactions(results, top=4, rounds=3, n_trees=60)
    top = df.iloc[0]
    assert {top["control_a"], top["control_b"]} == {"d", "e"}
    assert top["low"] > df.iloc[1]["high"]


def test_too_few_evaluations_and_unknown_objectives_are_refused():
    small = Search(lambda c: float(c.get("x", 0)), {"x": ss.range(0, 3)},
                   SearchConfiguration(generations=1, pool_size=4), store=":memory:").start()
    with pytest.raises(ConfigurationError, match="at least 12 successful evaluations"):
        control_influence(small)
    with pytest.raises(ConfigurationError, match="objective must be one of"):
        control_influence(known_problem(), objective="energy")


def test_the_html_report_shows_which_controls_matter(results, tmp_path):
    from compileiq_lab.viz.report import write_report

    text = write_report(results, tmp_path / "r.html").read_text()
    assert "Which controls matter" in text and "control influence on score_1" in text
