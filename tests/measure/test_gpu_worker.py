"""The GPU worker protocol without a GPU: a stand-in backend in a real worker process that sleeps, exits,
raises and faults, so timeouts, crashes and sticky errors are recorded and the worker is replaced."""

from __future__ import annotations

import time

import pytest

from compileiq_lab.exceptions import ConfigurationError
from compileiq_lab.kernels import load_kernel
from compileiq_lab.measure.gpu import GpuOptions, GpuRunner, arch_runs_on
from compileiq_lab.measure.stats import compare
from compileiq_lab.testing.gpu_standin import STANDIN_BACKEND, script


@pytest.fixture
def runner():
    r = GpuRunner(load_kernel("reduction"), GpuOptions(budget_s=0.05), timeout_s=3.0, backend=STANDIN_BACKEND)
    r.start()
    yield r
    r.close()


def test_a_candidate_is_checked_and_timed(runner, tmp_path):
    out = runner.run(script(tmp_path / "ok.json", time_s=2e-5, noise=0.01))
    assert out.status == "ok", out.error
    m = out.metrics
    assert m["runtime"] == pytest.approx(2e-5, rel=0.02) and m["samples"] >= 10
    assert m["launches_per_sample"] == 50  # 1 ms of kernel time per sample at 20 us per launch
    assert m["runtime_min"] <= m["runtime_median"] and m["runtime_iqr"] > 0
    assert "energy" not in m  # energy only when asked


def test_wrong_output_is_recorded_and_not_timed(runner, tmp_path):
    out = runner.run(script(tmp_path / "bad.json", wrong=True))
    assert out.status == "wrong_output" and "differs" in out.error and out.metrics == {}


def test_a_hanging_kernel_times_out_and_the_worker_is_replaced(runner, tmp_path):
    pid = runner.worker.pid
    t0 = time.monotonic()
    out = runner.run(script(tmp_path / "hang.json", sleep_s=60))
    assert out.status == "run_timeout" and time.monotonic() - t0 < 10
    assert runner.restarts == 1
    after = runner.run(script(tmp_path / "ok.json", time_s=1e-4))
    assert after.status == "ok" and runner.worker.pid != pid


def test_a_dying_worker_is_recorded_as_crashed_and_replaced(runner, tmp_path):
    out = runner.run(script(tmp_path / "die.json", exit=7))
    assert out.status == "crashed" and "exit code 7" in out.error and runner.restarts == 1
    assert runner.run(script(tmp_path / "ok.json", time_s=1e-4)).status == "ok"


@pytest.mark.parametrize("instructions, text", [({"fatal": True}, "ILLEGAL_ADDRESS"), ({"raise": "boom"}, "boom")])
def test_a_fault_is_a_run_error_and_the_poisoned_worker_is_replaced(runner, tmp_path, instructions, text):
    pid = runner.worker.pid
    out = runner.run(script(tmp_path / "fault.json", **instructions))
    assert out.status == "run_error" and text in out.error
    assert runner.worker.pid is None  # killed at once: a sticky CUDA error poisons the context
    assert runner.run(script(tmp_path / "ok.json", time_s=1e-4)).status == "ok" and runner.worker.pid != pid


def test_a_refused_launch_is_a_run_error_that_keeps_the_worker(runner, tmp_path):
    pid = runner.worker.pid
    out = runner.run(script(tmp_path / "big.json", refused=True))
    assert out.status == "run_error" and "refused the launch" in out.error
    assert runner.worker.pid == pid and runner.run(script(tmp_path / "ok.json", time_s=1e-4)).status == "ok"


def test_energy_and_power_come_from_the_stepped_counter(tmp_path):
    r = GpuRunner(load_kernel("reduction"), GpuOptions(budget_s=0.05, energy=True, energy_window_s=0.2),
                  backend=STANDIN_BACKEND)
    try:
        m = r.run(script(tmp_path / "ok.json", time_s=1e-4)).metrics
    finally:
        r.close()
    # the stand-in's counter rises 3 J every 10 ms (300 W); energy per launch = power x time per launch
    assert m["energy_method"] == 0.0 and m["power"] == pytest.approx(300, rel=0.1)
    assert m["energy"] == pytest.approx(m["power"] * m["runtime"]) and m["energy"] == pytest.approx(0.03, rel=0.12)
    assert m["energy_window_s"] >= 0.2 and m["power_peak"] == m["power_sampled_mean"] == 300


def test_interleaved_remeasure_finds_a_real_speedup_and_no_false_one(runner, tmp_path):
    items = {"base": (script(tmp_path / "b.json", time_s=1e-4, noise=0.02), None),
             "fast": (script(tmp_path / "f.json", time_s=1e-4 / 1.1, noise=0.02), None),
             "same": (script(tmp_path / "s.json", time_s=1e-4, noise=0.02), None)}
    pid = runner.worker.pid
    reply = runner.remeasure(items, rounds=30, energy_rounds=1)
    assert runner.worker.pid == pid  # a fresh worker did it; the search's worker is untouched
    s = reply["samples"]
    assert {len(v) for v in s.values()} == {30}
    fast, same = compare(s["base"], s["fast"]), compare(s["base"], s["same"])
    assert fast.win and 1.07 < fast.speedup < 1.13 and fast.high - fast.low < 0.05
    assert 0.98 < same.low <= same.speedup <= same.high < 1.02  # no difference worth a claim
    assert set(reply["energy"]) == set(items) and all(e[0] > 0 for e in reply["energy"].values())


def test_remeasure_failure_is_a_clear_error(runner, tmp_path):
    with pytest.raises(ConfigurationError, match="re-measuring 1 candidates failed"):
        runner.remeasure({"a": (script(tmp_path / "die.json", exit=3), None)}, rounds=3)


def test_start_failures_and_unrunnable_kernels_are_configuration_errors(tmp_path):
    with pytest.raises(ConfigurationError, match="GPU worker could not start: ModuleNotFoundError"):
        GpuRunner(load_kernel("reduction"), backend="compileiq_lab.no_such_module:Backend").start()
    bare = tmp_path / "k.cu"
    bare.write_text("__global__ void k() {}\n")
    with pytest.raises(ConfigurationError, match="cannot run on a GPU"):
        GpuRunner(load_kernel(bare), backend=STANDIN_BACKEND)


def test_launch_geometry_follows_the_define_values():
    r = GpuRunner(load_kernel("reduction"), backend=STANDIN_BACKEND)
    assert r.item("x.cubin", {"BLOCK": 512})["block"] == [512, 1, 1]
    assert r.item("x.cubin")["block"] == [256, 1, 1] and r.item("x.cubin")["grid"] == [512, 1, 1]


@pytest.mark.parametrize("arch, device, ok", [("sm_90", "sm_90", True), ("sm_80", "sm_86", True),
                                              ("sm_86", "sm_80", False), ("sm_80", "sm_90", False),
                                              ("sm_90a", "sm_90", True), ("sm_90a", "sm_100", False)])
def test_which_cubins_load_on_which_gpu(arch, device, ok):
    assert arch_runs_on(arch, device) is ok
