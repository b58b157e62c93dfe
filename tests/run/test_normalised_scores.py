"""Scores normalised by the baseline's: what a baseline of 0, or a negative one that reverses the order, says."""

from __future__ import annotations

import pytest

import compileiq_lab.space as ss
from compileiq_lab import Search, SearchConfiguration


def test_normalising_by_a_baseline_of_zero_says_it_is_zero(caplog: pytest.LogCaptureFixture) -> None:
    results = Search(lambda c: float(c.get("x", 0)), {"x": ss.range(1, 50)},
                     SearchConfiguration(generations=1, pool_size=4, normalize=True), store=":memory:").start()
    assert list(results.baseline_record.scores or ()) == [0.0]
    caplog.clear()
    df = results.get_results()
    assert df["norm_score_1"].isna().all()
    assert "normalised scores are NaN: the baseline's score_1 is 0, which nothing divides by" in caplog.text


def test_normalising_by_a_negative_baseline_says_the_order_is_reversed(caplog: pytest.LogCaptureFixture) -> None:
    results = Search(lambda c: float(c.get("x", 0)) - 10.0, {"x": ss.range(1, 50)},
                     SearchConfiguration(generations=1, pool_size=4, normalize=True), store=":memory:").start()
    assert list(results.baseline_record.scores or ()) == [-10.0]
    caplog.clear()
    df = results.get_results()
    assert (df["norm_score_1"] == df["score_1"] / -10.0).all()  # still the ratio, as documented
    assert "negative score (-10), which reverses its order" in caplog.text
