"""Timing statistics on recorded and synthetic samples: median CIs, stopping rule, speedup CIs and wins."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from compileiq_lab.measure.stats import compare, median_ci, relative_halfwidth, summarize


def lognormal(rng: np.random.Generator, median: float, sigma: float, n: int) -> np.ndarray:
    return median * np.exp(sigma * rng.standard_normal(n))


def test_median_ci_covers_the_true_median_about_95_percent_of_the_time():
    rng = np.random.default_rng(1)
    hits = sum(lo <= 1.0 <= hi for lo, hi in (median_ci(lognormal(rng, 1.0, 0.1, 30)) for _ in range(400)))
    assert 0.92 <= hits / 400 <= 0.995


def test_median_ci_of_few_samples_is_their_range_and_halfwidth_shrinks_with_n():
    assert median_ci([3.0, 1.0, 2.0]) == (1.0, 3.0)
    rng = np.random.default_rng(2)
    data = lognormal(rng, 1e-5, 0.05, 400)
    assert relative_halfwidth(data[:20]) > relative_halfwidth(data) > 0
    assert relative_halfwidth([1.0]) == math.inf


def test_summarize_reports_median_min_iqr_and_count():
    s = summarize([4.0, 1.0, 2.0, 3.0, 100.0])
    assert s["runtime"] == s["runtime_median"] == 3.0 and s["runtime_min"] == 1.0
    assert s["runtime_iqr"] == 2.0 and s["samples"] == 5.0


@pytest.mark.parametrize("method", ["paired-bootstrap", "bootstrap", "welch"])
def test_a_real_speedup_is_a_win_with_the_truth_inside_the_interval(method):
    rng = np.random.default_rng(3)
    base = lognormal(rng, 1.0e-4, 0.02, 40)
    cand = lognormal(rng, 1.0e-4 / 1.05, 0.02, 40)
    c = compare(base, cand, method=method)
    assert c.win and not c.loss and c.low <= 1.05 <= c.high
    assert c.low <= c.speedup <= c.high and c.to_dict()["win"] is True


@pytest.mark.parametrize("method", ["paired-bootstrap", "bootstrap", "welch"])
def test_identical_distributions_rarely_claim_a_win(method):
    rng = np.random.default_rng(4)
    wins = sum(compare(lognormal(rng, 1.0, 0.03, 30), lognormal(rng, 1.0, 0.03, 30), method=method, n_boot=1000).win
               for _ in range(200))
    assert wins <= 12  # about 2.5 % expected (one-sided half of a 95 % interval)


def test_pairing_cancels_drift_shared_by_interleaved_rounds():
    rng = np.random.default_rng(5)
    drift = np.exp(np.linspace(0.0, 0.15, 40))  # clocks sag over the run, hitting both alike
    base = drift * lognormal(rng, 1.0, 0.005, 40)
    cand = drift * lognormal(rng, 1.0 / 1.01, 0.005, 40)
    paired = compare(base, cand, method="paired-bootstrap")
    unpaired = compare(base, cand, method="bootstrap")
    assert paired.win and paired.low <= 1.01 <= paired.high
    assert (paired.high - paired.low) < (unpaired.high - unpaired.low) / 3


def test_welch_matches_scipys_interval_on_log_times():
    from scipy.stats import ttest_ind

    rng = np.random.default_rng(6)
    base, cand = lognormal(rng, 2.0, 0.05, 25), lognormal(rng, 1.8, 0.08, 35)
    ci = ttest_ind(np.log(base), np.log(cand), equal_var=False).confidence_interval(0.95)
    c = compare(base, cand, method="welch")
    assert c.low == pytest.approx(math.exp(ci.low)) and c.high == pytest.approx(math.exp(ci.high))


def test_bad_input_is_refused_with_the_rule():
    with pytest.raises(ValueError, match="at least 2 finite positive samples"):
        compare([1.0], [1.0, 2.0])
    with pytest.raises(ValueError, match="at least 2 finite positive samples"):
        compare([1.0, -2.0], [1.0, 2.0])
    with pytest.raises(ValueError, match="equal sample counts"):
        compare([1.0, 2.0, 3.0], [1.0, 2.0])
    with pytest.raises(ValueError, match="one of"):
        compare([1.0, 2.0], [1.0, 2.0], method="magic")
    with pytest.raises(ValueError, match="0.5 < confidence < 1"):
        compare([1.0, 2.0], [1.0, 2.0], confidence=95)


DATA = Path(__file__).resolve().parents[1] / "data"
RECORDED = json.loads((DATA / "gpu_samples_h200.json").read_text())["runs"]


@pytest.mark.parametrize("run", sorted(RECORDED))
def test_recorded_h200_samples_reproduce_the_reported_speedups(run):
    r = RECORDED[run]
    c = compare(r["baseline"], r["best"])  # same method and seed as the bench
    assert c.speedup == pytest.approx(r["speedup"]) and [c.low, c.high] == pytest.approx(r["ci"])
    welch = compare(r["baseline"], r["best"], method="welch")
    if abs(c.speedup - 1) > 0.05:  # large effects: every method agrees on the verdict
        assert welch.win == c.win == compare(r["baseline"], r["best"], method="bootstrap").win
