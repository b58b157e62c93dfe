"""GPU objectives end to end without a GPU: real compiles, the stand-in GPU worker (time grows with code size),
search, interleaved re-measurement, and the speedup CI carried into the exported ACF."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from compileiq_lab import Search, SearchConfiguration, load_acf, load_results
from compileiq_lab.acf.export import point_acf
from compileiq_lab.analysis.validation import validate
from compileiq_lab.exceptions import ConfigurationError
from compileiq_lab.kernels import KernelRun, load_kernel
from compileiq_lab.space.catalogs import PTXAS
from compileiq_lab.testing import tool_available
from compileiq_lab.testing.gpu_standin import STANDIN_BACKEND

needs_cuda = pytest.mark.skipif(not (tool_available("nvcc") or tool_available("ptxas")),
                                reason="nvcc/ptxas not installed")
NO_NVML = "compileiq_lab.testing.gpu_standin:NoNvmlStandIn"


def evaluator(tmp_path, objectives=("runtime", "energy"), backend=STANDIN_BACKEND):
    return KernelRun(load_kernel("reduction"), PTXAS.select(names=["opt_level", "maxrregcount"]),
                           list(objectives), workdir=tmp_path / "work", gpu_backend=backend)


@needs_cuda
def test_gpu_objectives_measure_compiled_code_and_dedup_identical_code(tmp_path):
    ev = evaluator(tmp_path)
    try:
        base, o3 = ev({}), ev({"opt_level": 3})
        other = ev({"defines": {"BLOCK": 512}})
    finally:
        ev.close()
    assert base.ok and o3.ok and other.ok, base.error
    m = base.detail["metrics"]
    assert base.scores[0] == pytest.approx(m["binary_size"] * 1e-9, rel=0.05)  # the stand-in's clock
    assert m["energy"] > 0 and m["samples"] >= 10 and m["sm_clock_mhz"] == 1980
    assert o3.detail["run_reused"] and o3.scores == base.scores  # -O3 is ptxas's default: same code
    assert not other.detail["run_reused"] and ev.stats["runs"] == 2 and ev.stats["runs_saved"] == 1
    assert ev.gpu_info["name"] == "stand-in GPU"


@needs_cuda
def test_power_and_energy_without_nvml_are_refused_at_configuration_time(tmp_path):
    with pytest.raises(ConfigurationError, match="power/energy are unavailable here: NVML unavailable"):
        evaluator(tmp_path, ("runtime", "energy"), backend=NO_NVML)
    ev = evaluator(tmp_path, ("runtime",), backend=NO_NVML)  # runtime alone still works
    try:
        assert ev({}).ok
    finally:
        ev.close()


@needs_cuda
def test_a_target_the_gpu_cannot_load_is_refused(tmp_path):
    with pytest.raises(ConfigurationError, match="use --arch sm_90"):
        KernelRun(load_kernel("reduction"), PTXAS, ["runtime"], arch="sm_80", workdir=tmp_path,
                        gpu_backend=STANDIN_BACKEND)


def test_without_a_gpu_runtime_of_a_cuda_kernel_says_what_to_do(tmp_path):
    from tests.conftest import gpu_reason

    if gpu_reason() is None:
        pytest.skip("a GPU is present here")
    with pytest.raises(ConfigurationError, match="GPU worker could not start.*static objectives"):
        KernelRun(load_kernel("reduction"), PTXAS, ["runtime"], workdir=tmp_path)


@needs_cuda
def test_search_then_interleaved_validation_then_acf_with_the_speedup_ci(tmp_path):
    ev = evaluator(tmp_path)
    store = str(tmp_path / "run.db")
    meta = {"kernel": "reduction", "catalog": "ptxas", "arch": "sm_90", "objectives": ["runtime", "energy"],
            "toolchain": ev.toolchain(), "gpu": ev.gpu_info}
    try:
        results = Search.of(ev, store=store, metadata=meta, generations=2, pool_size=6, seed=1).start()
        v = validate(results, ev, rounds=16)
        assert ev.gpu.worker.pid is None  # the search's worker was stopped: one GPU context at a time
    finally:
        ev.close()
    assert v.rows and v.rounds == 16 and v.method == "paired-bootstrap"
    sizes = {r.eval_id: r.detail["metrics"]["binary_size"] for r in results.records if r.status == "ok"}
    base_id = v.baseline["eval_id"]
    for row in v.rows:  # the stand-in's time is 1 ns per byte: the speedup is the size ratio
        assert row["speedup"] == pytest.approx(sizes[base_id] / sizes[row["eval_id"]], rel=0.03)
        assert row["low"] <= row["speedup"] <= row["high"] and row["energy_ratio"] > 0
        assert row["win"] == (row["low"] > 1 + v.noise_floor)
    aa = v.baseline["aa"]  # the baseline against itself
    assert aa["low"] <= aa["speedup"] <= aa["high"] and abs(aa["speedup"] - 1) < 0.02
    assert v.noise_floor == (0.0 if aa["low"] <= 1 <= aa["high"] else max(1 - aa["low"], aa["high"] - 1))
    assert len(v.samples["baseline_aa"]) == 16
    stored = load_results(store)
    assert stored.header.validation is not None and stored.header.validation.rows == json.loads(json.dumps(v.rows))
    assert stored.validation.wins == v.wins and stored.validation.noise_floor == v.noise_floor
    shown = subprocess.run([sys.executable, "-m", "compileiq_lab.cli", "show", store], capture_output=True, text=True)
    assert shown.returncode == 0 and "A/A noise floor" in shown.stdout and str(v.rows[0]["eval_id"]) in shown.stdout
    rec = next(r for r in stored.records if r.eval_id == v.rows[0]["eval_id"])
    acf = point_acf(stored, rec, load_kernel("reduction"), PTXAS, meta)
    again = load_acf(acf.to_json())
    assert again.validation["speedup"] == pytest.approx(v.rows[0]["speedup"])
    assert again.ci["speedup"] == [v.rows[0]["low"], v.rows[0]["high"]] and again.host["gpu"] == "stand-in GPU"
    assert again.validation["win"] == v.rows[0]["win"]


def test_validate_command_needs_a_gpu_run(tmp_path, store_path):
    from compileiq_lab.testing import toy_objective, toy_space

    Search(toy_objective, toy_space(), SearchConfiguration(generations=1, pool_size=4), store=store_path).start()
    out = subprocess.run([sys.executable, "-m", "compileiq_lab.cli", "validate", store_path],
                         capture_output=True, text=True)
    assert out.returncode != 0 and "not made by `compileiq-lab tune`" in out.stderr


def test_tune_for_runtime_without_a_gpu_is_one_clear_line(tmp_path):
    from tests.conftest import gpu_reason

    if gpu_reason() is None:
        pytest.skip("a GPU is present here")
    out = subprocess.run([sys.executable, "-m", "compileiq_lab.cli", "tune", "reduction", "--objectives",
                          "runtime,energy", "--generations", "1"], capture_output=True, text=True, cwd=tmp_path)
    assert out.returncode == 1 and "Traceback" not in out.stderr
    assert "GPU worker could not start" in out.stderr and "static objectives" in out.stderr


@needs_cuda
def test_validate_refuses_too_few_rounds_with_the_fix(tmp_path):
    ev = evaluator(tmp_path, ("runtime",))
    try:
        results = Search.of(ev, store=":memory:", generations=1, pool_size=4).start()
        with pytest.raises(ConfigurationError, match="rounds must be an integer >= 10"):
            validate(results, ev, rounds=1)
        with pytest.raises(ConfigurationError, match="method must be one of"):
            validate(results, ev, method="median-of-hope")
    finally:
        ev.close()


@needs_cuda
def test_points_are_checked_on_every_workload_and_mixed_results_are_flagged(tmp_path):
    import shutil as sh

    from compileiq_lab.kernels import kernels_root
    from compileiq_lab.widgets.detail import describe

    folder = tmp_path / "reduction"
    sh.copytree(kernels_root() / "reduction", folder)
    with open(folder / "kernel.toml", "a") as f:  # the stand-in reverses its clock on a workload named "inverted"
        f.write('\n[[workloads]]\nname = "inverted"\nparams = { n = 4096, blocks = 8 }\n')
    kernel = load_kernel(folder)
    ev = KernelRun(kernel, PTXAS.select(names=["opt_level", "maxrregcount"]), ["runtime"],
                         workdir=tmp_path / "work", gpu_backend=STANDIN_BACKEND)
    meta = {"kernel": "reduction", "catalog": "ptxas", "arch": "sm_90", "objectives": ["runtime"],
            "toolchain": ev.toolchain(), "gpu": ev.gpu_info}
    store = str(tmp_path / "run.db")
    try:
        faster = {"opt_level": 1, "defines": {"BLOCK": 256}}  # ptxas -O1: 3 % less code than the default -O3
        results = Search.of(ev, store=store, metadata=meta, generations=2, pool_size=6, seed=2,
                            warm_start=[faster]).start()
        size = {r.eval_id: r.detail["metrics"]["binary_size"] for r in results.records if r.status == "ok"}
        smallest = min(size, key=size.get)  # the stand-in's fastest code on the tuning workload
        assert size[smallest] < 0.98 * size[0], size
        v = validate(results, ev, rounds=30, eval_ids=[smallest])
    finally:
        ev.close()
    assert v.workloads == ["large", "small", "inverted"]
    for row in v.rows:  # same clock on large and small; every speedup inverted on "inverted"
        w = row["workloads"]
        assert w["large"]["speedup"] == pytest.approx(row["speedup"], rel=0.02)
        assert w["inverted"]["speedup"] == pytest.approx(1 / row["speedup"], rel=0.02)
        assert row["mixed"] == (row["win"] and any(e["loss"] for e in w.values()))
    winners = [r for r in v.rows if r["win"]]
    assert winners and all(r["mixed"] for r in winners), v.rows
    stored = load_results(store)
    assert "wins on the tuning workload but loses on another" in describe(stored, winners[0]["eval_id"])
    rec = next(r for r in stored.records if r.eval_id == winners[0]["eval_id"])
    acf = load_acf(point_acf(stored, rec, kernel, PTXAS, meta).to_json())
    assert set(acf.validation["workloads"]) == {"large", "small", "inverted"}
    assert acf.validation["workloads"]["inverted"]["win"] is False


@needs_cuda
def test_validation_refuses_a_store_another_run_writes_before_measuring(tmp_path):
    import time

    from compileiq_lab.exceptions import StoreError
    from compileiq_lab.store import RunStore

    ev = evaluator(tmp_path, ("runtime",))
    store = str(tmp_path / "run.db")
    try:
        results = Search.of(ev, store=store, generations=1, pool_size=4).start()
        other = RunStore(store)
        other.acquire()  # another run is writing this store
        try:
            t0 = time.monotonic()
            with pytest.raises(StoreError, match="being written by another run"):
                validate(results, ev, rounds=16)
            assert time.monotonic() - t0 < 5 and ev.gpu is not None and ev.gpu.worker.pid is not None
        finally:
            other.close()
    finally:
        ev.close()
    assert load_results(store).validation is None


needs_gcc = pytest.mark.skipif(not tool_available("gcc"), reason="gcc not installed")


@needs_gcc
def test_a_c_kernel_timed_for_real_is_re_measured_on_the_cpu(tmp_path):
    """validate and the ACF gate on a C kernel's CPU runtime: fresh runs of each build, interleaved, with an A/A
    control; the result stored in the run and carried into the ACF's certificate."""
    from compileiq_lab.analysis.certify import recheck

    run = KernelRun(load_kernel("dot"), "gcc", ["runtime"], workdir=tmp_path / "w")
    store = str(tmp_path / "c.db")
    results = Search.of(run, store=store, generations=1, pool_size=3).start()
    v = validate(results, run, rounds=10, max_points=2)
    front = {r.eval_id for r in results.front_records()}
    assert v.rounds == 10 and 1 <= len(v.rows) <= 2 and {r["eval_id"] for r in v.rows} <= front
    assert all(len(v.samples[str(r["eval_id"])]) == 10 for r in v.rows) and len(v.samples["baseline_aa"]) == 10
    assert all(r["energy"] is None and r["low"] <= r["speedup"] <= r["high"] for r in v.rows)
    assert v.device["cpu"] and v.baseline["aa"]["low"] <= v.baseline["aa"]["high"]
    ticks = [r.detail["metrics"]["timer_tick_s"] for r in results.records if r.status == "ok"]
    assert ticks and all(0 < t < 1e-3 for t in ticks)  # each timed run measured its clock's step
    assert v.timer["resolution_s"] >= min(ticks)  # the step the harness measured, not the clock's stated 1 ns
    assert load_results(store).validation.rows == v.rows  # stored in the run
    acf = point_acf(load_results(store), results.record(v.rows[0]["eval_id"]), run.kernel, run.catalog)
    assert acf.validation["certificate"]["cpu"] == v.device["cpu"]
    # the gate fails on a real regression: one accumulator makes the sum one chain of dependent adds
    base = results.baseline_record.params
    slow = recheck({**base, "defines": {**base["defines"], "ACCUMULATORS": 1}}, run, rounds=10, tolerance=0.0)
    assert not slow.passed and slow.high < 1.0 and slow.rounds == 10


@needs_gcc
def test_a_c_kernel_is_re_measured_on_its_other_workloads_on_the_cpu(tmp_path):
    """A C kernel's [[workloads]]: every point re-timed on each one's own inputs (their size, their reference)."""
    import shutil as sh

    from compileiq_lab.kernels import kernels_root

    folder = tmp_path / "dot"
    sh.copytree(kernels_root() / "dot", folder)
    with open(folder / "kernel.toml", "a") as f:
        f.write('\n[[workloads]]\nname = "small"\nparams = { n = 4096 }\n')
    run = KernelRun(load_kernel(folder), "gcc", ["runtime"], workdir=tmp_path / "w")
    results = Search.of(run, store=str(tmp_path / "c.db"), generations=1, pool_size=3).start()
    v = validate(results, run, rounds=10, max_points=2)
    assert v.workloads == ["small"] and v.rows
    for row in v.rows:
        small = row["workloads"]["small"]
        assert "error" not in small and small["low"] <= small["speedup"] <= small["high"], small
        assert row["mixed"] == (row["win"] and small["loss"])
    inputs = tmp_path / "w" / "workload-small" / "in"
    assert (inputs / "x.bin").stat().st_size == 4096 * 4  # the workload's own inputs, not the tuning ones
    assert load_results(str(tmp_path / "c.db")).validation.workloads == ["small"]
    assert validate(results, run, rounds=10, max_points=1, workloads=[], save=False).workloads == []


def test_validate_says_what_it_re_measures_for_static_objectives(tmp_path):
    run = KernelRun(load_kernel("dot"), "gcc", ["text_bytes"], workdir=tmp_path / "w")
    results = Search.of(run, store=":memory:", generations=1, pool_size=3).start()
    with pytest.raises(ConfigurationError, match="runtime on a runnable C kernel; static metrics are exact"):
        validate(results, run, rounds=10)


@needs_gcc
def test_points_with_the_same_machine_code_are_measured_once_and_said_to_be_twins(tmp_path, capsys):
    """Two points whose flags differ but whose code does not (-fno-loop-interchange on a loop with nothing to
    interchange) are timed once, and the second row names the first rather than pass for an independent result."""
    from compileiq_lab.cli.runs import print_validation

    run = KernelRun(load_kernel("dot"), "gcc", ["runtime"], workdir=tmp_path / "w",
                    controls=["opt_level", "loop_interchange"])
    first = {"opt_level": 3, "defines": {"ACCUMULATORS": 4}}
    twin = {**first, "loop_interchange": "-fno-loop-interchange"}
    results = Search.of(run, store=str(tmp_path / "c.db"), generations=1, pool_size=3,
                        warm_start=[first, twin]).start()
    ids = {json.dumps(r.params, sort_keys=True): r.eval_id for r in results.records}
    a, b = ids[json.dumps(first, sort_keys=True)], ids[json.dumps(twin, sort_keys=True)]
    assert results.record(a).detail["code_hash"] == results.record(b).detail["code_hash"]
    v = validate(results, run, rounds=10, eval_ids=[a, b], confidence=0.9)
    rows = {r["eval_id"]: r for r in v.rows}
    assert rows[a]["same_code_as"] is None and rows[b]["same_code_as"] == a
    assert rows[a]["runtime_median"] == rows[b]["runtime_median"]  # one measurement, reported twice
    print_validation(v)
    assert f"(same code as eval {a}: measured once)" in capsys.readouterr().out
    from compileiq_lab.widgets.detail import _validation_html  # the lab's point view says so too

    stored = load_results(str(tmp_path / "c.db"))
    assert f"the same machine code as eval {a}: one measurement for both" in _validation_html(stored, b)
    assert "90 % CI" in _validation_html(stored, a) and "same machine code" not in _validation_html(stored, a)


_FSUM_C = """
void cil_kernel(void **bufs, const long *params) {
    const float *restrict x = (const float *)bufs[0];
    float *restrict tot = (float *)bufs[1];
    const long n = params[0];
    float t = 0.0f;
    for (long i = 0; i < n; ++i) t += x[i] * x[i];
    tot[0] = t;
}
"""
_FSUM_TOML = """name = "fsum"
language = "c"
source = "fsum.c"
entry = "cil_kernel"
[params]
n = 64
[[inputs]]
name = "x"
dtype = "float32"
shape = ["n"]
init = "uniform"
[[outputs]]
name = "tot"
dtype = "float32"
shape = [1]
[check]
reference = "reference"
rtol = 1e-6
atol = 1e-6
[[workloads]]
name = "big"
params = { n = 300000 }
"""
_FSUM_REF = """import numpy as np
def reference(inputs, params):
    t = np.float32(0)
    for v in (inputs["x"] * inputs["x"]).tolist():
        t = np.float32(t + np.float32(v))
    return {"tot": np.array([t], dtype=np.float32)}
"""


@needs_gcc
def test_a_point_with_wrong_output_on_another_workload_is_no_win_no_pick_and_fails_the_gate(tmp_path, capsys):
    """-ffast-math reorders a float32 sum: right within the tolerance on 64 values, wrong on the kernel's declared
    300,000-value workload. Such a point is not a win whatever its speedup, no export picks it, and the ACF gate
    re-checks every workload."""
    from compileiq_lab.analysis.certify import recheck
    from compileiq_lab.store.pick import pick_point

    folder = tmp_path / "fsum"
    folder.mkdir()
    (folder / "fsum.c").write_text(_FSUM_C)
    (folder / "kernel.toml").write_text(_FSUM_TOML)
    (folder / "reference.py").write_text(_FSUM_REF)
    run = KernelRun(load_kernel(folder), "gcc", ["runtime"], controls=["opt_level", "fast_math"], unsafe_math=True,
                    workdir=tmp_path / "w")
    fast = {"opt_level": 3, "fast_math": "-ffast-math"}
    results = Search.of(run, store=str(tmp_path / "f.db"), generations=1, pool_size=2, warm_start=[fast]).start()
    point = next(r for r in results.records if r.params.get("fast_math") == "-ffast-math")
    assert point.status == "ok"  # right on the tuning workload
    from compileiq_lab.viz.report import report_html

    assert "Not re-measured: the scores above are the search's single measurements" in report_html(results)
    v = validate(results, run, rounds=10, eval_ids=[point.eval_id])
    row = v.row(point.eval_id)
    assert row is not None and row["win"] is False and row["wrong_output_on"] == ["big"]
    assert "wrong output" in row["workloads"]["big"]["error"] and v.wrong_output == {point.eval_id: ["big"]}
    assert "it computes wrong output on workload big" in row["why_not"] and "loses" not in row["why_not"]
    from compileiq_lab.cli.runs import print_validation

    print_validation(v)
    shown = capsys.readouterr().out
    assert f"WARNING: eval {point.eval_id} computes wrong output on workload big: not a win" in shown
    assert "energy" not in shown  # a CPU measures none: no column of n/a
    stored = load_results(str(tmp_path / "f.db"))
    page = report_html(stored)  # the HTML report shows the re-measurement as validate does
    assert "Re-measured (10 interleaved rounds, 95 % CI)" in page and "wrong output on big: not a win" in page
    picked, why = pick_point(stored, "runtime")
    assert picked is not None and picked.detail["code_hash"] != point.detail["code_hash"]
    assert f"wrong: eval {point.eval_id} on 'big'" in why
    # tune --validate --export: the export is made from the run's snapshot taken before the re-measurement
    import argparse

    from compileiq_lab import load_acf
    from compileiq_lab.cli.options import export_point

    assert results.validation is None
    acf_path = tmp_path / "best.acf"
    assert export_point(argparse.Namespace(pick=None, no_minimize=True), str(acf_path), results, run, v) == 0
    assert load_acf(acf_path).controls.get("fast_math") != "-ffast-math"
    with pytest.raises(ConfigurationError, match="on every workload of the kernel, but on workload 'big'"):
        recheck(point.params, run, rounds=10)
    run.close()
    # exported by its id: written as asked, with a warning that no pick would choose it
    out = subprocess.run([sys.executable, "-m", "compileiq_lab.cli", "export", str(tmp_path / "f.db"), "--eval-id",
                          str(point.eval_id), "-o", str(tmp_path / "asked.acf")], capture_output=True, text=True)
    assert out.returncode == 0 and (tmp_path / "asked.acf").is_file(), out.stderr
    assert f"WARNING: eval {point.eval_id} computed wrong output on workload 'big'" in out.stderr
