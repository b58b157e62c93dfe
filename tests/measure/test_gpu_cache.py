"""Cold and warm cache timing, timer facts, throttled rounds and device facts, without a GPU: the stand-in backend in
a real GPU worker process (GpuRunner -> worker -> reply), so each mode is seen applied end to end."""

from __future__ import annotations

import hashlib
from dataclasses import replace

import pytest

from compileiq_lab.exceptions import ConfigurationError
from compileiq_lab.kernels import load_kernel
from compileiq_lab.measure.gpu import GpuOptions, GpuRunner
from compileiq_lab.measure.gpu_backend import TIMER_RESOLUTION_S
from compileiq_lab.testing.gpu_standin import COLD_FACTOR, L2_BYTES, STANDIN_BACKEND, STANDIN_UUID, THROTTLED, script

NO_NVML = "compileiq_lab.testing.gpu_standin:NoNvmlStandIn"


def make_runner(backend: str = STANDIN_BACKEND, **options):
    return GpuRunner(load_kernel("reduction"), GpuOptions(budget_s=0.05, **options), timeout_s=5.0, backend=backend)


@pytest.fixture
def runners():
    made = []

    def start(backend: str = STANDIN_BACKEND, **options):
        r = make_runner(backend, **options)
        made.append(r)
        r.start()
        return r

    yield start
    for r in made:
        r.close()


def test_cold_mode_flushes_before_every_sample_and_is_slower_than_warm(runners, tmp_path):
    cubin = script(tmp_path / "k.json", time_s=2e-5, noise=0.01)
    warm, cold = runners(cache="warm"), runners(cache="cold")
    w, c = warm.run(cubin), cold.run(cubin)
    assert w.status == c.status == "ok", (w.error, c.error)
    wm, cm = w.metrics, c.metrics
    assert wm["runtime"] == pytest.approx(2e-5, rel=0.02)
    assert cm["runtime"] == pytest.approx(2e-5 * COLD_FACTOR, rel=0.02)
    assert cm["runtime"] / wm["runtime"] == pytest.approx(COLD_FACTOR, rel=0.03)
    # warm: a graph of 50 launches per sample (1 ms at 20 us), no flush; cold: one launch per sample, each flushed
    assert (wm["cache_cold"], wm["launches_per_sample"], wm["cache_flushes"]) == (0.0, 50, 0)
    assert (cm["cache_cold"], cm["launches_per_sample"]) == (1.0, 1)
    assert cm["cache_flushes"] > cm["samples"] >= 10  # the warm-up samples were flushed too
    assert wm["timer_resolution_s"] == cm["timer_resolution_s"] == TIMER_RESOLUTION_S == 0.5e-6


def test_the_measure_reply_names_the_cache_mode(runners, tmp_path):
    cold = runners(cache="cold")
    reply = cold.worker.call("measure", cold.item(script(tmp_path / "k.json", time_s=1e-4)), 5.0)
    assert reply["status"] == "ok" and reply["cache"] == "cold" and reply["method"] == "stand-in-cold"
    warm = runners()
    reply = warm.worker.call("measure", warm.item(script(tmp_path / "k.json", time_s=1e-4)), 5.0)
    assert reply["cache"] == "warm" and reply["method"] == "stand-in"


def test_remeasure_carries_the_cold_factor_and_the_timer_facts(runners, tmp_path):
    items = {"a": (script(tmp_path / "a.json", time_s=1e-4, noise=0.0), None),
             "b": (script(tmp_path / "b.json", time_s=5e-5, noise=0.0), None)}
    warm = runners(cache="warm").remeasure(items, rounds=8)
    cold = runners(cache="cold").remeasure(items, rounds=8)
    assert warm["cache"] == "warm" and cold["cache"] == "cold"
    assert warm["samples"] == {"a": [1e-4] * 8, "b": [5e-5] * 8}
    assert cold["samples"]["a"] == pytest.approx([1e-4 * COLD_FACTOR] * 8)
    assert cold["samples"]["b"] == pytest.approx([5e-5 * COLD_FACTOR] * 8)
    assert warm["launches_per_sample"] == {"a": 10, "b": 20} and cold["launches_per_sample"] == {"a": 1, "b": 1}
    assert warm["cache_flushes"] == {"a": 0, "b": 0}
    assert all(n >= 8 for n in cold["cache_flushes"].values())
    assert warm["timer_resolution_s"] == cold["timer_resolution_s"] == TIMER_RESOLUTION_S
    assert warm["throttled_rounds"] == cold["throttled_rounds"] == 0 and warm["throttle_checked"] is True


def test_an_unknown_cache_mode_is_refused_naming_the_valid_ones():
    with pytest.raises(ConfigurationError, match=r"GpuOptions.cache must be one of 'warm', 'cold', but got 'hot'"):
        GpuOptions(cache="hot")
    with pytest.raises(ConfigurationError, match=r"but got 'lukewarm'; use 'warm'"):
        replace(GpuOptions(), cache="lukewarm")


def test_the_worker_refuses_an_unknown_cache_mode_too():
    r = make_runner()
    r._setup["options"]["cache"] = "hot"  # as a parent that bypassed GpuOptions would send it
    try:
        with pytest.raises(ConfigurationError, match=r"could not start: ValueError: cache must be one of 'warm', "
                                                     r"'cold', but got 'hot'"):
            r.start()
    finally:
        r.close()


def test_info_carries_the_certificate_facts(runners):
    info = runners(cache="cold", lock_clocks_mhz=1500).info
    assert info["uuid_sha256"] == hashlib.sha256(STANDIN_UUID.encode()).hexdigest()
    assert STANDIN_UUID not in repr(info)  # only the hash leaves the worker
    assert info["l2_bytes"] == L2_BYTES and info["mig_mode"] == "disabled" and info["clocks_locked"] is True
    assert info["driver_version"] and info["cuda_runtime_version"] == "12.4"
    assert info["sm_clock_mhz"] > 0 and info["mem_clock_mhz"] > 0 and info["power_limit_w"] > 0
    assert info["timer_resolution_s"] == TIMER_RESOLUTION_S and info["cache"] == "cold"
    assert runners().info["clocks_locked"] is False


def test_facts_nvml_cannot_give_are_none_not_errors(runners):
    info = runners(NO_NVML).info
    assert info["nvml"] and info["uuid_sha256"] and info["l2_bytes"] == L2_BYTES
    for key in ("driver_version", "sm_clock_mhz", "mem_clock_mhz", "power_limit_w", "mig_mode"):
        assert key in info and info[key] is None, key
    assert info["clocks_locked"] is False


def test_a_round_during_which_the_clock_drops_is_retaken(runners, tmp_path):
    # with no warm-up time the remeasure warm-up takes 4 samples: sample 10 falls in round 5 (0-based)
    items = {"a": (script(tmp_path / "a.json", time_s=1e-4, noise=0.0, throttle_samples=[10]), None),
             "b": (script(tmp_path / "b.json", time_s=2e-4, noise=0.0), None)}
    reply = runners(warmup_s=0.0).remeasure(items, rounds=12)
    assert reply["throttle_checked"] is True
    assert reply["throttled_rounds"] == 1 and reply["throttled_round_numbers"] == [5]
    assert reply["throttle_persisted"] == 0
    # the throttled (slower) sample was discarded, the whole round taken again: every candidate keeps one per round
    assert reply["samples"] == {"a": [1e-4] * 12, "b": [2e-4] * 12}


def test_a_round_is_retaken_only_once(runners, tmp_path):
    items = {"a": (script(tmp_path / "a.json", time_s=1e-4, noise=0.0, throttle_samples=[10, 11]), None)}
    reply = runners(warmup_s=0.0).remeasure(items, rounds=12)
    assert reply["throttled_rounds"] == 1 and reply["throttled_round_numbers"] == [5]
    assert reply["throttle_persisted"] == 1  # the re-take throttled again: kept, and said so
    samples = reply["samples"]["a"]
    assert len(samples) == 12 and samples[5] == pytest.approx(1e-4 / THROTTLED)
    assert samples[:5] + samples[6:] == [1e-4] * 11


def test_without_a_clock_reading_no_round_is_judged(runners, tmp_path):
    items = {"a": (script(tmp_path / "a.json", time_s=1e-4, noise=0.0, throttle_samples=[10]), None)}
    reply = runners(NO_NVML, warmup_s=0.0).remeasure(items, rounds=12)
    assert reply["throttle_checked"] is False and reply["throttled_rounds"] == 0
    assert len(reply["samples"]["a"]) == 12


def test_the_energy_check_compares_the_window_method_with_the_counter_over_a_long_run(tmp_path):
    """Through a real worker: the stand-in's counter steps at 300 W of wall time, so the counter's energy per launch
    is 300 W x the wall time per launch of the long run, and its power is 300 W."""
    runner = make_runner(energy=True)
    cubin = script(tmp_path / "k.json", time_s=1e-3, noise=0.01)
    reply = runner.energy_check(cubin, seconds=0.5)
    assert reply["seconds"] >= 0.5 and reply["launches"] > 0
    assert reply["counter_power"] == pytest.approx(300.0, rel=0.1)
    assert reply["counter_energy"] == pytest.approx(300.0 * reply["wall_per_launch_s"], rel=0.1)
    assert reply["window_power"] == pytest.approx(300.0, rel=0.1)
    assert reply["ratio"] == pytest.approx(reply["window_energy"] / reply["counter_energy"])
    with pytest.raises(ConfigurationError, match="NVML is unavailable"):
        make_runner(NO_NVML).energy_check(cubin, seconds=0.2)
