"""KernelRun on bundled kernels: static CUDA metrics, real CPU runs, dedup, conflicts, failures."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

from compileiq_lab import Search, SearchConfiguration
from compileiq_lab.exceptions import ConfigurationError
from compileiq_lab.kernels import KernelRun, load_kernel
from compileiq_lab.space.catalogs import GCC, NVCC, PTXAS
from compileiq_lab.testing import tool_available

needs_cuda = pytest.mark.skipif(not (tool_available("nvcc") or tool_available("ptxas")),
                                reason="nvcc/ptxas not found (PATH or the CUDA wheels)")
needs_gcc = pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc not installed")
needs_valgrind = pytest.mark.skipif(shutil.which("valgrind") is None, reason="valgrind not installed")


@needs_cuda
def test_static_cuda_metrics_and_code_identity(tmp_path):
    ev = KernelRun(load_kernel("reduction"), PTXAS, ["registers", "sass_instructions"], workdir=tmp_path)
    base = ev({})
    o3 = ev({"opt_level": 3})
    o0 = ev({"opt_level": 0})
    assert base.ok and o3.ok and o0.ok
    assert base.detail["code_hash"] == o3.detail["code_hash"] and o3.detail["duplicate_code"]
    assert o0.scores != base.scores and not o0.detail["duplicate_code"]
    assert base.detail["metrics"]["sass_instructions"] * 16 < base.detail["metrics"]["text_bytes"]
    assert ev.stats["compiles"] == 3 and len(ev.code_hashes) == 2


@needs_cuda
def test_known_conflicts_are_refused_without_compiling(tmp_path):
    ev = KernelRun(load_kernel("reduction"), PTXAS, ["registers"], workdir=tmp_path)
    cfg = {"opt_level": 3, "fast_compile": "min"}
    assert "Ofast-compile" in ev.constraint(cfg)
    m = ev(cfg)
    assert m.status == "compile_error" and m.detail["conflict"] and ev.stats["compiles"] == 0


@needs_cuda
def test_defines_and_frontend_flags_reach_the_compiler(tmp_path):
    kernel = load_kernel("sgemm")
    ev = KernelRun(kernel, NVCC, ["registers"], workdir=tmp_path)
    knob = next(iter(kernel.defines))
    values = list(kernel.defines[knob])
    argv = ev.argv({"defines": {knob: values[-1]}, "extra_device_vectorization": "--extra-device-vectorization",
                    "maxrregcount": 64})
    assert f"-D{knob}={values[-1]}" in argv["frontend"] and "--extra-device-vectorization" in argv["frontend"]
    assert argv["backend"] == ["--maxrregcount=64"]
    assert "defines" in ev.search_space() and set(ev.search_space()) - {"defines"} == set(NVCC.names)
    assert ev({"defines": {knob: values[-1]}}).ok


@needs_cuda
def test_cuda_tuning_run_beats_the_baseline_on_static_metrics(tmp_path):
    ev = KernelRun(load_kernel("reduction"), PTXAS, ["sass_instructions"], workdir=tmp_path / "w")
    res = Search(ev, ev.search_space(), SearchConfiguration(generations=3, pool_size=6), store=":memory:",
                 constraint=ev.constraint).start(workers=2)
    best, base = res.get_best_result(), res.baseline
    assert base["status"] == "ok" and best["score_1"] <= base["score_1"]
    assert set(res.status_counts()) == {"ok"}


def test_objectives_are_checked_against_the_language(tmp_path):
    with pytest.raises(ConfigurationError, match="objectives for a cuda kernel"):
        KernelRun(load_kernel("reduction"), PTXAS, ["instructions"], workdir=tmp_path)
    with pytest.raises(ConfigurationError, match="objectives for a c kernel"):
        KernelRun(load_kernel("dot"), GCC, ["energy"], workdir=tmp_path)


@needs_gcc
def test_cpu_kernel_runs_checks_and_dedups(tmp_path):
    ev = KernelRun(load_kernel("dot"), GCC, ["runtime", "text_bytes"], workdir=tmp_path)
    a = ev({"opt_level": 2})
    # -fomit-frame-pointer is already on at -O2 on x86-64: other flags, identical machine code
    b = ev({"opt_level": 2, "omit_frame_pointer": "-fomit-frame-pointer"})
    c = ev({"opt_level": 1})
    assert a.ok and b.ok and c.ok, a.error
    metrics = a.detail["metrics"]
    assert metrics["runtime"] > 0 and metrics["runtime_median"] >= metrics["runtime"] and metrics["samples"] >= 10
    assert b.detail["code_hash"] == a.detail["code_hash"] and b.detail["run_reused"]
    assert b.scores[0] == a.scores[0]  # the measurement is reused, not re-taken
    assert c.detail["code_hash"] != a.detail["code_hash"] and not c.detail["run_reused"]
    assert ev.stats == {"compiles": 3, "unique_code": 2, "runs": 2, "runs_saved": 1, "conflicts": 0, "ignored": 0}


def _broken_dot(tmp_path):
    """A copy of the dot kernel whose result is off by one."""
    kernel = load_kernel("dot")
    broken = tmp_path / "dot"
    shutil.copytree(kernel.folder, broken)
    src = broken / kernel.source
    src.write_text(src.read_text().replace("void cil_kernel(", "static void real_kernel(") +
                   "\nvoid cil_kernel(void **bufs, const long *params) {\n"
                   "    real_kernel(bufs, params);\n    ((double *)bufs[2])[0] += 1.0;\n}\n")
    return load_kernel(broken)


@needs_gcc
def test_wrong_output_is_recorded(tmp_path):
    ev = KernelRun(_broken_dot(tmp_path), GCC, ["runtime"], workdir=tmp_path / "w")
    m = ev({"opt_level": 2})
    assert m.status == "wrong_output" and "writes its input" not in m.error, (m.status, m.error)


@needs_gcc
def test_a_kernel_that_writes_its_inputs_is_told_why_its_output_is_wrong(tmp_path):
    kernel = _broken_dot(tmp_path)
    src = kernel.source_path  # each call changes x[0]: the next call sums another vector
    src.write_text(src.read_text().replace("((double *)bufs[2])[0] += 1.0;", "((float *)bufs[0])[0] += 1.0f;"))
    m = KernelRun(load_kernel(kernel.folder), GCC, ["runtime"], workdir=tmp_path / "w")({"opt_level": 2})
    assert m.status == "wrong_output", (m.status, m.error)
    assert "the kernel writes its input buffer 'x'" in m.error and "copy them to a scratch output" in m.error


@needs_gcc
def test_a_kernel_that_segfaults_is_a_crashed_row_naming_the_signal(tmp_path):
    kernel = _broken_dot(tmp_path)
    src = kernel.source_path
    src.write_text(src.read_text().replace("((double *)bufs[2])[0] += 1.0;", "*(volatile int *)0 = 1;"))
    m = KernelRun(load_kernel(kernel.folder), GCC, ["runtime"], workdir=tmp_path / "w")({"opt_level": 2})
    assert m.status == "crashed" and "killed by signal 11 (SIGSEGV)" in m.error, (m.status, m.error)


@needs_gcc
@needs_valgrind
def test_instructions_objective_is_reproducible(tmp_path):
    ev = KernelRun(load_kernel("dot"), GCC, ["instructions"], workdir=tmp_path)
    a = ev({"opt_level": 1})
    ev2 = KernelRun(load_kernel("dot"), GCC, ["instructions"], workdir=tmp_path / "again")
    b = ev2({"opt_level": 1})
    c = ev2({"opt_level": 3})
    assert a.ok and b.ok and c.ok, (a.error, b.error, c.error)
    assert a.scores == b.scores and c.scores != a.scores


needs_nvrtc = pytest.mark.skipif(__import__("importlib").util.find_spec("cuda") is None,
                                 reason="cuda-bindings (NVRTC) not installed")


@needs_nvrtc
def test_nvrtc_backend_compiles_in_process(tmp_path):
    from compileiq_lab.space.catalogs import NVRTC

    ev = KernelRun(load_kernel("reduction"), NVRTC, ["registers", "sass_instructions"], workdir=tmp_path)
    base, o1 = ev({}), ev({"opt_level": 1})
    assert base.ok and o1.ok, (base.error, o1.error)
    assert base.detail["metrics"]["registers"] > 0 and base.detail["code_hash"] != o1.detail["code_hash"]
    assert ev.toolchain()["nvrtc"].startswith("NVRTC 13.")
    from compileiq_lab.measure.nvrtc import NvrtcCompiler

    bad = NvrtcCompiler("sm_90", tmp_path).compile(load_kernel("reduction").source_path, ["-Xcicc", "-O1"])
    assert bad.status == "compile_error" and "-Xcicc" in bad.error
    conflict = NvrtcCompiler("sm_90", tmp_path).compile(
        load_kernel("reduction").source_path, ["-Xptxas=-O3", "-Xptxas=--Ofast-compile=min"])
    assert conflict.status == "compile_error" and "Conflicting options" in conflict.error


@needs_gcc
@needs_valgrind
def test_instructions_objective_checks_outputs_too(tmp_path):
    m = KernelRun(_broken_dot(tmp_path), GCC, ["instructions"], workdir=tmp_path / "w")({"opt_level": 2})
    assert m.status == "wrong_output"


@needs_gcc
def test_concurrent_identical_builds_never_see_half_a_binary(tmp_path):
    from concurrent.futures import ThreadPoolExecutor

    ev = KernelRun(load_kernel("matmul_c"), GCC, ["text_bytes", "compile_time"], workdir=tmp_path)
    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(lambda _: ev({"opt_level": 3}), range(16)))
    assert {m.status for m in results} == {"ok"}
    assert len({m.detail["code_hash"] for m in results}) == 1
    assert all(m.detail["metrics"]["compile_time"] > 0 for m in results)  # cache hits report the real build time


def test_a_long_failure_message_keeps_its_start_and_its_end():
    from compileiq_lab.measure.evaluator import MESSAGE_CHARS
    from compileiq_lab.toolchain.tools import keep_ends

    text = "entry: `the entry names exactly one kernel` must hold " + "k; " * 2000 + "Pass one of the mangled names."
    kept = keep_ends(text, MESSAGE_CHARS)
    assert kept.startswith("entry: `the entry names exactly one kernel`") and kept.endswith("mangled names.")
    assert MESSAGE_CHARS <= len(kept) < MESSAGE_CHARS + 50
    assert f"[... {len(text) - MESSAGE_CHARS} characters ...]" in kept
    assert keep_ends("short", MESSAGE_CHARS) == "short"


_HISTOGRAM = """name = "histogram"
language = "c"
source = "histogram.c"
entry = "cil_kernel"

[params]
n = 100000

[[inputs]]
name = "data"
dtype = "uint8"
shape = ["n"]

[[inputs]]
name = "weights"
dtype = "int16"
shape = ["n"]

[[outputs]]
name = "counts"
dtype = "uint32"
shape = [256]

[[outputs]]
name = "weighted"
dtype = "int64"
shape = [256]

[check]
reference = "reference"
rtol = 0
atol = 0
"""


@needs_gcc
def test_a_kernel_of_8_16_and_64_bit_and_unsigned_buffers_runs_and_checks(tmp_path):
    folder = tmp_path / "histogram"
    folder.mkdir()
    (folder / "kernel.toml").write_text(_HISTOGRAM)
    (folder / "histogram.c").write_text(
        "#include <stdint.h>\n#include <string.h>\n"
        "void cil_kernel(void **bufs, const long *params) {\n"
        "  const uint8_t *data = bufs[0]; const int16_t *w = bufs[1];\n"
        "  uint32_t *counts = bufs[2]; int64_t *weighted = bufs[3];\n"
        "  memset(counts, 0, 256 * sizeof *counts); memset(weighted, 0, 256 * sizeof *weighted);\n"
        "  for (long i = 0; i < params[0]; ++i) { counts[data[i]] += 1; weighted[data[i]] += w[i]; }\n}\n")
    (folder / "reference.py").write_text(
        "import numpy as np\n\ndef reference(inputs, params):\n    d, w = inputs['data'], inputs['weights']\n"
        "    return {'counts': np.bincount(d, minlength=256).astype(np.uint32),\n"
        "            'weighted': np.bincount(d, weights=w, minlength=256).astype(np.int64)}\n")
    kernel = load_kernel(folder)
    inputs = kernel.make_inputs()
    assert inputs["data"].dtype == np.uint8 and 0 <= inputs["data"].min() and inputs["data"].max() < 100
    assert inputs["weights"].dtype == np.int16 and inputs["weights"].min() < 0
    ev = KernelRun(kernel, GCC, ["runtime"], workdir=tmp_path / "run")
    try:
        m = ev({"opt_level": 2})
    finally:
        ev.close()
    assert m.ok, m.error  # the outputs match the reference exactly, read back with their own element types
