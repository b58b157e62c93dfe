"""On a real NVIDIA GPU (skipped elsewhere): bundled kernels run and check, faults and hangs are recorded and
survived, an A/A re-measurement finds no difference, NVML reads power and energy."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from compileiq_lab import Search
from compileiq_lab.analysis.validation import validate
from compileiq_lab.kernels import KernelRun, load_kernel
from compileiq_lab.measure.stats import compare
from compileiq_lab.space.catalogs import PTXAS

pytestmark = pytest.mark.gpu
FAULTS = Path(__file__).resolve().parents[1] / "data" / "gpu_faults"
OPT = PTXAS.select(names=["opt_level"])


@pytest.mark.parametrize("name", ["reduction", "sgemm", "softmax", "attention", "stencil"])
def test_bundled_kernels_run_with_correct_output(name, tmp_path):
    ev = KernelRun(load_kernel(name), OPT, ["runtime"], workdir=tmp_path)
    try:
        m = ev({})
    finally:
        ev.close()
    assert m.status == "ok", m.error
    metrics = m.detail["metrics"]
    assert 1e-7 < metrics["runtime"] < 1e-1 and metrics["samples"] >= 10
    assert metrics["runtime_min"] <= metrics["runtime_median"]


_AXPBY = """name = "axpby"
language = "cuda"
source = "axpby.cu"
entry = "axpby"

[params]
n = 100000
alpha = 1.5
beta = -0.25
shift = -3

[[inputs]]
name = "x"
dtype = "float32"
shape = ["n"]

[[outputs]]
name = "y"
dtype = "float32"
shape = ["n"]

[check]
reference = "reference"

[launch]
grid = ["(n + 255) // 256", 1, 1]
block = [256, 1, 1]
args = ["x", "y", "n", "alpha", "beta", "shift"]
"""


def test_size_t_float_double_and_negative_scalars_reach_the_kernel(tmp_path):
    folder = tmp_path / "axpby"
    folder.mkdir()
    (folder / "axpby.cu").write_text(
        'extern "C" __global__ void axpby(const float* x, float* y, size_t n, float alpha, double beta, int shift) {\n'
        "  size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;\n"
        "  if (i < n) y[i] = alpha * x[i] + (float)beta + shift; }\n")
    (folder / "kernel.toml").write_text(_AXPBY)
    (folder / "reference.py").write_text("def reference(inputs, params):\n    x = inputs['x']\n"
                                         "    return {'y': (params['alpha'] * x + params['beta'] + params['shift'])"
                                         ".astype(x.dtype)}\n")
    ev = KernelRun(load_kernel(folder), OPT, ["runtime"], workdir=tmp_path / "run")
    try:
        m = ev({})
    finally:
        ev.close()
    assert m.status == "ok", m.error  # an int32 n, or alpha passed as an int, fails the output check


def test_a_half_precision_kernel_runs_and_checks(tmp_path):
    folder = tmp_path / "hscale"
    folder.mkdir()
    toml = _AXPBY.replace('"axpby"', '"hscale"').replace('"axpby.cu"', '"hscale.cu"').replace('"float32"', '"float16"')
    (folder / "kernel.toml").write_text(toml.replace(', "alpha", "beta", "shift"]', "]"))  # (x, y, n)
    (folder / "hscale.cu").write_text(
        '#include <cuda_fp16.h>\nextern "C" __global__ void hscale(const __half* x, __half* y, size_t n) {\n'
        "  size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;\n"
        "  if (i < n) y[i] = __hmul(x[i], __float2half(2.0f)); }\n")
    (folder / "reference.py").write_text("def reference(inputs, params):\n    return {'y': inputs['x'] * 2}\n")
    ev = KernelRun(load_kernel(folder), OPT, ["runtime"], workdir=tmp_path / "run")
    try:
        m = ev({})
    finally:
        ev.close()
    assert m.status == "ok", m.error  # x * 2 is exact in half precision


def test_energy_and_power_are_measured_with_nvml(tmp_path):
    ev = KernelRun(load_kernel("sgemm"), OPT, ["runtime", "energy", "power"], workdir=tmp_path)
    try:
        m = ev({})
        info = ev.gpu_info
    finally:
        ev.close()
    assert m.ok, m.error
    metrics = m.detail["metrics"]
    assert "NVIDIA" in info["name"] and info["power"]["driver"]
    assert 0 < metrics["energy"] < 10 and metrics["sm_clock_mhz"] > 0 and metrics["energy_method"] == 0.0
    # from the energy counter: above the card at rest, within its power limit
    assert info["power"]["power_at_start_w"] < metrics["power"] <= 1.05 * info["power"]["power_limit_w"]
    assert metrics["energy"] == pytest.approx(metrics["power"] * metrics["runtime"])


def test_wrong_output_fault_and_hang_are_recorded_and_the_run_goes_on(tmp_path):
    ev = KernelRun(load_kernel(FAULTS), OPT, ["runtime"], workdir=tmp_path, timeout_s=20)
    try:
        assert ev({"defines": {"MODE": 0}}).ok
        wrong = ev({"defines": {"MODE": 1}})
        assert wrong.status == "wrong_output" and "differs" in wrong.error
        fault = ev({"defines": {"MODE": 2}})
        assert fault.status == "run_error" and ("illegal" in fault.error.lower() or "ERROR" in fault.error), fault.error
        assert ev({"opt_level": 0, "defines": {"MODE": 0}}).ok  # a fresh worker
        t0 = time.monotonic()
        hang = ev({"defines": {"MODE": 3}})
        assert hang.status == "run_timeout" and time.monotonic() - t0 < 60
        assert ev({"opt_level": 1, "defines": {"MODE": 0}}).ok
        assert ev.gpu.restarts == 2
    finally:
        ev.close()


def test_an_a_a_remeasurement_finds_no_difference(tmp_path):
    ev = KernelRun(load_kernel("reduction"), OPT, ["runtime"], workdir=tmp_path)
    try:
        cubin, _ = ev.build({})
        reply = ev.gpu.remeasure({"a": (cubin, None), "b": (cubin, None)}, rounds=30)
    finally:
        ev.close()
    c = compare(reply["samples"]["a"], reply["samples"]["b"])
    assert c.low <= 1.0 <= c.high and c.high - c.low < 0.05


def test_a_short_gpu_run_validates_its_front(tmp_path):
    ev = KernelRun(load_kernel("reduction"), PTXAS, ["runtime"], workdir=tmp_path)
    try:
        results = Search.of(ev, store=str(tmp_path / "run.db"), generations=2, pool_size=6, seed=0).start(workers=4)
        v = validate(results, ev, rounds=20)
    finally:
        ev.close()
    assert v.rows and all(r["low"] <= r["speedup"] <= r["high"] for r in v.rows)
    assert v.gpu.get("name") and v.baseline["runtime_median"] > 0
