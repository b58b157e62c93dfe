"""Certified wins: Holm's step-down over the points tested, the timer-resolution and A/A criteria, the ACF's
certificate and `validate --acf` (on the stand-in GPU backend, real worker processes)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from compileiq_lab import Search, load_acf
from compileiq_lab.acf.export import point_acf
from compileiq_lab.analysis.certify import certify, recheck
from compileiq_lab.analysis.validation import validate
from compileiq_lab.cli import main
from compileiq_lab.kernels import KernelRun, load_kernel
from compileiq_lab.measure.stats import compare, exceed_p_value
from compileiq_lab.space.catalogs import PTXAS
from compileiq_lab.testing import tool_available
from compileiq_lab.testing.gpu_standin import STANDIN_BACKEND

needs_cuda = pytest.mark.skipif(not (tool_available("nvcc") and tool_available("ptxas")),
                                reason="nvcc/ptxas not installed")


def shared(rng, speedups, n=40, noise=0.01, t=1e-5):
    """Per-round times of a baseline ("b") and candidates (name -> speedup), all sharing each round's drift."""
    drift = 1 + 0.02 * rng.standard_normal(n)
    return {name: t / s * drift * (1 + noise * rng.standard_normal(n)) for name, s in {"b": 1.0, **speedups}.items()}


def test_holm_keeps_the_best_of_many_null_candidates_from_being_certified():
    """20 candidates no faster than the baseline and one 5 % faster: unadjusted, chance makes some of the nulls look
    like wins; after Holm's step-down only the real one is certified."""
    found = None
    for seed in range(200):  # a draw where chance hands the unadjusted test at least one false win
        samples = shared(np.random.default_rng(seed), {"real": 1.05, **{f"n{i}": 1.0 for i in range(20)}})
        false_wins = [k for k in samples if k.startswith("n") and compare(samples["b"], samples[k]).low > 1.0]
        if false_wins:
            found = samples, false_wins
            break
    assert found is not None
    samples, false_wins = found
    labels = [k for k in samples if k != "b"]
    rows = [{"eval_id": i, "win": True} for i in range(len(labels))]
    certify(rows, samples, "b", dict(enumerate(labels)), floor=0.0, confidence=0.95, method="paired-bootstrap")
    by_label = {labels[r["eval_id"]]: r for r in rows}
    assert by_label["real"]["certified"] and by_label["real"]["adjusted_low"] > 1.0
    assert by_label["real"]["adjusted_low"] < compare(samples["b"], samples["real"]).low  # the interval widened
    for k in false_wins:
        why = by_label[k]["why_not"]
        assert not by_label[k]["certified"] and ("Holm-adjusted" in why or "step-down stopped" in why)
    assert by_label["real"]["holm_confidence"] == pytest.approx(1 - 0.05 / len(labels))  # the smallest p: Bonferroni


def test_a_gain_below_the_timer_resolution_a_loss_elsewhere_or_the_baseline_code_is_never_certified():
    samples = shared(np.random.default_rng(1), {"p": 1.05, "q": 1.05, "r": 1.05}, t=3e-6, noise=0.001)
    rows = [{"eval_id": 0}, {"eval_id": 1, "workloads": {"big": {"loss": True}}},
            {"eval_id": 2, "same_code_as_baseline": True}]
    labels = {0: "p", 1: "q", 2: "r"}
    # one launch per sample and a 0.5 us timer: a 0.14 us gain per launch is below what the timer resolves
    certify(rows, samples, "b", labels, floor=0.0, confidence=0.95, method="paired-bootstrap",
            timer={"resolution_s": 5e-7, "launches": {"b": 1, "p": 1, "q": 1, "r": 1}})
    assert not rows[0]["certified"] and "below the timer's resolution" in rows[0]["why_not"]
    certify(rows, samples, "b", labels, floor=0.0, confidence=0.95, method="paired-bootstrap",
            timer={"resolution_s": 5e-7, "launches": {"b": 1000, "p": 1000, "q": 1000, "r": 1000}})
    assert rows[0]["certified"]
    assert not rows[1]["certified"] and "loses on workload big" in rows[1]["why_not"]
    assert not rows[2]["certified"] and "baseline's own machine code" in rows[2]["why_not"]


def test_a_win_inside_the_aa_floor_is_not_certified():
    samples = shared(np.random.default_rng(3), {"c": 1.01}, noise=0.002)
    rows = [{"eval_id": 0}]
    certify(rows, samples, "b", {0: "c"}, floor=0.02, confidence=0.95, method="paired-bootstrap")
    assert not rows[0]["certified"] and "1 + the A/A floor (1.0200)" in rows[0]["why_not"]


def test_exceed_p_value_is_small_for_a_clear_win_and_large_for_none():
    samples = shared(np.random.default_rng(0), {"fast": 1.05, "same": 1.0})
    base, fast, same = samples["b"], samples["fast"], samples["same"]
    for method in ("paired-bootstrap", "bootstrap", "welch"):
        assert exceed_p_value(base, fast, 1.0, method=method) < 0.01
        assert exceed_p_value(base, fast, 1.2, method=method) > 0.9
    assert exceed_p_value(base, same, 1.0) > 0.05


@needs_cuda
def test_validation_certifies_writes_a_certificate_and_validate_acf_rechecks_it(tmp_path, capsys):
    run = KernelRun(load_kernel("reduction"), PTXAS.select(names=["opt_level", "maxrregcount"]), ["runtime"],
                    workdir=tmp_path / "work", gpu_backend=STANDIN_BACKEND)
    store = str(tmp_path / "run.db")
    try:
        results = Search.of(run, store=store, generations=2, pool_size=6, seed=1).start()
        v = validate(results, run, rounds=16)
    finally:
        run.close()
    assert all("certified" in r and "p_value" in r for r in v.rows)
    assert v.cache == "warm" and v.device.get("name") == "stand-in GPU"
    best = max(v.rows, key=lambda r: r["speedup"])
    rec = results.record(best["eval_id"])
    stored = Search.open(store).results
    acf = point_acf(stored, rec, load_kernel("reduction"), PTXAS, acf_path="best.acf")
    cert = acf.validation["certificate"]
    assert cert["certified"] == best["certified"] and cert["recheck"] == "compileiq-lab validate --acf best.acf"
    assert cert["cache"] == "warm" and cert["rounds"] == 16 and cert["code_hash"] == rec.detail["code_hash"]
    assert cert["gpu"] == "stand-in GPU" and cert["workloads"]["tuning"]["adjusted_low"] == best["adjusted_low"]
    path = tmp_path / "best.acf"
    path.write_text(acf.to_json())
    assert load_acf(path).validation["certificate"]["certified"] == best["certified"]  # the schema takes it
    # the CI gate: the stand-in's time follows code size, so the point's recorded speedup holds again
    code = main(["validate", "--acf", str(path), "--gpu-backend", STANDIN_BACKEND, "--rounds", "12"])
    out = capsys.readouterr()
    expected = best["speedup"] >= 1.0 - 1e-9
    assert (code == 0) == expected, out
    assert ("validate: PASSED" in out.out) == expected
    assert "output right on the tuning workload and on every declared one: large, small" in out.out
    # a point slower than the baseline fails the gate
    slow = max((r for r in stored.records if r.status == "ok"), key=lambda r: r.scores[0])
    if slow.scores[0] > stored.baseline_record.scores[0] * 1.02:
        slow_acf = tmp_path / "slow.acf"
        slow_acf.write_text(point_acf(stored, slow, load_kernel("reduction"), PTXAS).to_json())
        assert main(["validate", "--acf", str(slow_acf), "--gpu-backend", STANDIN_BACKEND, "--tolerance", "0"]) == 1
        assert "validate: FAILED" in capsys.readouterr().err


@needs_cuda
def test_recheck_needs_a_gpu_and_reports_a_changed_machine_code(tmp_path, caplog):
    static = KernelRun(load_kernel("reduction"), PTXAS.select(names=["opt_level"]), ["registers"],
                       workdir=tmp_path / "s")
    with pytest.raises(Exception, match="needs a kernel run with a runtime objective"):
        recheck({}, static)
    run = KernelRun(load_kernel("reduction"), PTXAS.select(names=["opt_level"]), ["runtime"],
                    workdir=tmp_path / "w", gpu_backend=STANDIN_BACKEND)
    try:
        r = recheck({"opt_level": 1}, run, recorded_hash="0" * 64, rounds=10, tolerance=0.5)
    finally:
        run.close()
    assert r.recorded_hash != r.code_hash and "differs from the recorded" in caplog.text
    assert r.passed == (r.low >= 0.5) and r.aa_low <= 1.0 + 0.05
    assert json.loads(json.dumps(r.__dict__))["rounds"] == 10


def test_validate_takes_a_store_or_an_acf(capsys):
    assert main(["validate"]) == 2  # the command line alone is wrong: a usage error
    assert "a run store or --acf FILE" in capsys.readouterr().err


def test_recorded_h200_samples_certify_the_large_wins_and_not_those_inside_the_aa_floor():
    """The per-round samples of the H200 run (tests/data/gpu_samples_h200.json), as one family of 8 points, with the
    A/A floor that run's GPU tests measured on the reduction baseline (0.992 [0.987, 0.994]: floor 0.013)."""
    from pathlib import Path

    runs = json.loads((Path(__file__).resolve().parents[1] / "data" / "gpu_samples_h200.json").read_text())["runs"]
    names = sorted(runs)
    # each point against its own baseline: the paired method sees only the per-round ratios, so a common baseline
    # of ones and candidates of point / baseline per round give every point exactly its own ratios
    samples = {"b": [1.0] * 40, **{name: list(np.asarray(runs[name]["best"]) / np.asarray(runs[name]["baseline"]))
                                    for name in names}}
    rows = [{"eval_id": i} for i in range(len(names))]
    certify(rows, samples, "b", dict(enumerate(names)), floor=0.013, confidence=0.95, method="paired-bootstrap")
    verdicts = {name: rows[i] for i, name in enumerate(names)}
    levels = sorted(r["holm_confidence"] for r in rows)  # Holm: alpha/8, alpha/7, ..., alpha for the last
    assert levels[-1] == pytest.approx(1 - 0.05 / 8) and levels[0] == pytest.approx(0.95)
    for name in ("attention/knobs", "sgemm/knobs", "softmax/knobs", "attention/flags_only", "reduction/knobs"):
        assert verdicts[name]["certified"], (name, verdicts[name].get("why_not"))
    for name in ("reduction/flags_only", "softmax/flags_only", "sgemm/flags_only"):  # sub-1.3 % wins: not shown
        why = verdicts[name]["why_not"]
        assert not verdicts[name]["certified"] and ("A/A floor" in why or "step-down stopped" in why)


def test_after_holms_step_down_stops_later_points_say_so():
    samples = shared(np.random.default_rng(5), {"weak": 1.0, "strong": 1.03}, noise=0.01)
    rows = [{"eval_id": 0}, {"eval_id": 1}]
    # a floor that the strong point clears and the weak one does not: the weak one stops the step-down only if it
    # comes first, so put it first by giving the strong one no evidence at all against a huge floor
    certify(rows, samples, "b", {0: "weak", 1: "strong"}, floor=0.5, confidence=0.95, method="paired-bootstrap")
    first, second = sorted(rows, key=lambda r: r["p_value"])
    assert "does not lie above" in first["why_not"]
    assert f"step-down stopped at eval {first['eval_id']}" in second["why_not"]


@needs_cuda
def test_recheck_refuses_a_tolerance_outside_0_1(tmp_path):
    run = KernelRun(load_kernel("reduction"), PTXAS.select(names=["opt_level"]), ["runtime"],
                    workdir=tmp_path / "w", gpu_backend=STANDIN_BACKEND)
    try:
        with pytest.raises(Exception, match=r"tolerance must lie in \[0, 1\), but got 1.5"):
            recheck({"opt_level": 1}, run, tolerance=1.5)
    finally:
        run.close()
