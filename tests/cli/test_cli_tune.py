"""The tune and catalog commands end to end, in a subprocess, as a user runs them."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from compileiq_lab import load_results
from compileiq_lab.store.pick import default_pick, pick_point
from compileiq_lab.testing import tool_available
from compileiq_lab.toolchain import find_tool

needs_cuda = pytest.mark.skipif(not tool_available("nvcc"), reason="nvcc not installed")
needs_gcc = pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc not installed")


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "compileiq_lab.cli", *args], capture_output=True, text=True,
                          cwd=cwd, timeout=600)


@needs_cuda
def test_tune_bundled_cuda_kernel_static_and_export(tmp_path):
    out = cli("tune", "reduction", "--space", "ptxas", "--objectives", "registers,sass_instructions",
              "--generations", "3", "--pool-size", "6", "--store", "r.db", "--export", "best.json", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "(baseline)" in out.stdout and "distinct machine code" in out.stdout
    doc = json.loads((tmp_path / "best.json").read_text())
    assert doc["kernel"] == "reduction" and doc["arch"] == "sm_90" and set(doc["argv"]) == {"frontend", "backend"}
    assert set(doc["objectives"]) == {"registers", "sass_instructions"} and doc["baseline"]["registers"] > 0
    res = load_results(str(tmp_path / "r.db"))
    assert res.header.metadata["kernel"] == "reduction" and res.n_objectives == 2
    assert len(res) == 3 * 6  # the baseline is one of the first generation's six


HELD_OUT = r"""
// a kernel none of the bundled ones resembles: a histogram with shared-memory atomics
extern "C" __global__ void histogram256(const unsigned char* data, unsigned int* bins, int n) {
  __shared__ unsigned int local[256];
  for (int i = threadIdx.x; i < 256; i += blockDim.x) local[i] = 0;
  __syncthreads();
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
    atomicAdd(&local[data[i]], 1u);
  __syncthreads();
  for (int i = threadIdx.x; i < 256; i += blockDim.x) atomicAdd(&bins[i], local[i]);
}
"""


@needs_cuda
def test_tune_a_held_out_bare_cu_file(tmp_path):
    src = tmp_path / "histogram.cu"
    src.write_text(HELD_OUT)
    out = cli("tune", str(src), "--objectives", "sass_instructions", "--generations", "2", "--store", "h.db",
              cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    res = load_results(str(tmp_path / "h.db"))
    assert res.status == "finished" and res.status_counts().get("ok", 0) >= 2


@needs_gcc
def test_tune_c_kernel_for_runtime(tmp_path):
    out = cli("tune", "dot", "--objectives", "runtime", "--generations", "2", "--pool-size", "4",
              "--store", "c.db", "--export", "c.json", "--validate", "10", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    doc = json.loads((tmp_path / "c.json").read_text())
    assert "-O2" in doc["argv"]["c"] and doc["objectives"]["runtime"] > 0
    # the front re-measured against the baseline on this CPU, interleaved, with an A/A control
    assert "re-measured interleaved (10 rounds" in out.stdout and "us per call" in out.stdout, out.stdout
    cert = doc["validation"]["certificate"]
    assert doc["validation"]["rounds"] == 10 and cert["cpu"] and cert["gpu"] is None and cert["aa"]["low"] > 0
    # and the ACF's win re-checked here (a CI gate on a CPU kernel): exit 0 exactly when it holds
    again = cli("validate", "--acf", "c.json", "--rounds", "10", cwd=tmp_path)
    assert "re-measured 10 interleaved rounds" in again.stdout and "Traceback" not in again.stderr, again.stderr
    assert (again.returncode == 0) == ("validate: PASSED" in again.stdout), again.stdout + again.stderr


def test_catalog_and_user_errors(tmp_path):
    if tool_available("ptxas"):
        out = cli("catalog", "ptxas", cwd=tmp_path)
        assert out.returncode == 0 and "maxrregcount" in out.stdout and "register_allocation" in out.stdout
    bad = cli("catalog", "fortran", cwd=tmp_path)  # a name no catalog has: the command line is wrong (exit 2)
    assert bad.returncode == 2 and "names a catalog" in bad.stderr and "Traceback" not in bad.stderr
    typo = cli("catalog", "ptxs", cwd=tmp_path)
    assert typo.returncode == 2 and "did you mean 'ptxas'" in typo.stderr, typo.stderr
    missing = cli("tune", "no_such_kernel", cwd=tmp_path)
    assert missing.returncode == 1 and "Traceback" not in missing.stderr and "no_such_kernel" in missing.stderr


@needs_cuda
def test_resume_with_another_setup_is_refused(tmp_path):
    first = cli("tune", "reduction", "--space", "ptxas", "--generations", "1", "--pool-size", "4", "--store", "r.db",
                cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    again = cli("tune", "reduction", "--space", "ptxas", "--generations", "2", "--pool-size", "4", "--store", "r.db",
                cwd=tmp_path)
    assert again.returncode == 0, again.stderr            # same setup: the run continues
    other = cli("tune", "reduction", "--space", "ptxas", "--objectives", "registers,spill_bytes",
                "--generations", "2", "--pool-size", "4", "--store", "r.db", cwd=tmp_path)
    assert other.returncode == 1 and "another setup" in other.stderr and "objectives" in other.stderr


@needs_cuda
def test_a_failed_baseline_is_said_once_and_the_fixed_kernel_is_told_how_to_reuse_the_store(tmp_path):
    src = tmp_path / "broken.cu"
    src.write_text('extern "C" __global__ void k(float* x) { x[0] = undefined_name; }\n')
    base = ("tune", str(src), "--objectives", "registers", "--generations", "2", "--no-canary", "--store", "b.db")
    out = cli(*base, cwd=tmp_path)
    assert out.returncode == 1 and out.stderr.count("undefined_name") == 1, out.stderr  # the error alone says it
    assert "the run stopped after the baseline" in out.stderr and "arguments" not in out.stdout  # no empty table
    src.write_text('extern "C" __global__ void k(float* x) { x[0] = 1.0f; }\n')
    again = cli(*base, cwd=tmp_path)
    assert again.returncode == 1 and "the kernel source changed" in again.stderr
    assert "stopped early and holds no result: delete" in again.stderr, again.stderr
    (tmp_path / "b.db").unlink()
    assert cli(*base, cwd=tmp_path).returncode == 0


_TEMPLATE_TOML = """name = "scale"
language = "cuda"
source = "scale.cu"
entry = "ENTRY"
"""


@needs_cuda
def test_a_kernel_folder_whose_entry_changed_is_another_setup_and_no_warm_start(tmp_path):
    """kernel.toml's entry names one of several template instantiations: a store of one is not continued with
    another, nor does a run of one warm-start another."""
    folder = tmp_path / "scale"
    folder.mkdir()
    (folder / "scale.cu").write_text(
        "template <typename T> __global__ void scale(T* x) { x[threadIdx.x] *= 2; }\n"
        "template __global__ void scale<float>(float*);\ntemplate __global__ void scale<double>(double*);\n")
    toml = folder / "kernel.toml"
    toml.write_text(_TEMPLATE_TOML.replace("ENTRY", "void scale<float>(float*)"))
    base = ("tune", str(folder), "--space", "ptxas", "--objectives", "registers", "--pool-size", "3", "--no-canary")
    first = cli(*base, "--generations", "1", "--store", "f.db", cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    toml.write_text(_TEMPLATE_TOML.replace("ENTRY", "void scale<double>(double*)"))
    again = cli(*base, "--generations", "2", "--store", "f.db", cwd=tmp_path)
    assert again.returncode == 1 and "kernel.toml names another entry" in again.stderr, again.stderr
    other = cli(*base, "--generations", "1", "--store", "d.db", cwd=tmp_path)
    assert other.returncode == 0 and "warm start" not in other.stderr + other.stdout, other.stderr
    assert load_results(str(tmp_path / "d.db")).header.kernel.entry == "void scale<double>(double*)"


@needs_cuda
def test_resume_with_another_entry_or_build_context_is_refused(tmp_path):
    """A bare multi-kernel file: continuing a store with another --entry or another --define would append another
    kernel's (or build's) rows under the first one's header."""
    source = Path(__file__).resolve().parents[1] / "data" / "public_kernels" / "llm.c" / "dev" / "cuda" / \
        "softmax_forward.cu"
    base = ("tune", str(source), "--space", "ptxas", "--objectives", "registers", "--pool-size", "3", "--no-canary",
            "--store", "s.db")
    first = cli(*base, "--entry", "softmax_forward_kernel1", "--generations", "1", cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    same = cli(*base, "--entry", "softmax_forward_kernel1", "--generations", "2", cwd=tmp_path)
    assert same.returncode == 0, same.stderr  # the same setup continues
    entry = cli(*base, "--entry", "softmax_forward_kernel4", "--generations", "3", cwd=tmp_path)
    assert entry.returncode == 1 and "another setup" in entry.stderr and "entry: stored 'softmax_forward_kernel1'" \
        in entry.stderr, entry.stderr
    define = cli(*base, "--entry", "softmax_forward_kernel1", "--define", "X=1", "--generations", "3", cwd=tmp_path)
    assert define.returncode == 1 and "another setup" in define.stderr and "build:" in define.stderr, define.stderr
    assert load_results(str(tmp_path / "s.db")).header.kernel.extra["entry"] == "softmax_forward_kernel1"


@needs_cuda
def test_mismatched_catalog_and_bad_arch_are_clear_errors(tmp_path):
    wrong = cli("tune", "reduction", "--space", "gcc", "--generations", "1", cwd=tmp_path)
    assert wrong.returncode == 1 and "use nvcc, ptxas or nvrtc" in wrong.stderr
    arch = cli("tune", "reduction", "--arch", "sm_12", "--generations", "1", cwd=tmp_path)
    assert arch.returncode == 1 and "cannot target 'sm_12'" in arch.stderr and "sm_90" in arch.stderr


@needs_gcc
def test_bare_c_file_tunes_on_static_objectives(tmp_path):
    src = tmp_path / "lib.c"
    src.write_text("float acc(const float *x, long n) { float s = 0; for (long i = 0; i < n; i++) s += x[i]; "
                   "return s; }\nint main(void) { return 0; }\n")
    out = cli("tune", str(src), "--objectives", "text_bytes", "--generations", "2", "--pool-size", "4",
              "--store", "s.db", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert load_results(str(tmp_path / "s.db")).status_counts().get("ok", 0) >= 4


@needs_cuda
@pytest.mark.parametrize(("source", "space", "why"), [
    ('extern "C" __global__ void k(float* x) { x[threadIdx.x] = not_declared; }\n', "ptxas",
     "front end (nvcc -ptx) and the searched controls (ptxas) cannot change that"),
    ('#include "not_there.cuh"\nextern "C" __global__ void k(float* x) { x[0] = 1.0f; }\n', "nvcc",
     "a file it includes is missing"),
    ('#include <torch/extension.h>\n__global__ void k(at::Half* x) { x[0] = x[1]; }\n', "nvcc",
     "this is a PyTorch extension's file, compiled without its binding: a kernel or device function that uses the "
     "framework's own C++ types (at::Half"),
    ('extern "C" __global__ void k(float* x) { x[threadIdx.x] = not_declared; }\n', "nvcc",
     "does not compile at the front end, and no searched control changes that"),
])
def test_a_baseline_no_control_can_fix_stops_the_run(tmp_path, source, space, why):
    src = tmp_path / "broken.cu"
    src.write_text(source)
    out = cli("tune", str(src), "--space", space, "--objectives", "registers", "--generations", "4", "--store",
              "b.db", cwd=tmp_path)
    assert out.returncode == 1 and why in out.stderr and "Traceback" not in out.stderr, out.stderr
    res = load_results(str(tmp_path / "b.db"))
    assert len(res) == 1 and res.status == "baseline_failed" and why in res.header.stop_reason


def _nvcc_finds(header: str, tmp_path: Path) -> bool:
    probe = tmp_path / "probe.cu"
    probe.write_text(f"#include <{header}>\n")
    return subprocess.run([find_tool("nvcc"), "-E", str(probe), "-o", str(tmp_path / "probe.ii")],
                          capture_output=True).returncode == 0


@needs_cuda
def test_a_missing_cuda_library_header_is_named_with_the_library_and_the_nvcc_release(tmp_path):
    if _nvcc_finds("cublas_v2.h", tmp_path):
        pytest.skip("this nvcc finds cuBLAS's headers")
    src = tmp_path / "bench.cu"  # as llm.c's dev/cuda/common.h does: a cuBLAS reference in the host code
    src.write_text('#include <cublas_v2.h>\nextern "C" __global__ void k(float* x) { x[threadIdx.x] = 1.0f; }\n')
    out = cli("tune", str(src), "--space", "nvcc", "--objectives", "registers", "--generations", "2", "--store",
              "b.db", cwd=tmp_path)
    release = re.search(r"release (\d+\.\d+)", subprocess.run([find_tool("nvcc"), "--version"], capture_output=True,
                                                              text=True).stdout)[1]
    why = (f"cublas_v2.h: No such file or directory); it is cuBLAS's header, a CUDA library nvcc does not come with, "
           f"which the kernel file includes: install cuBLAS for CUDA {release}")
    assert out.returncode == 1 and why in out.stderr and "pip install the nvidia-cublas release" in out.stderr, \
        out.stderr
    assert why in load_results(str(tmp_path / "b.db")).header.stop_reason


@needs_cuda
@pytest.mark.parametrize("space", ["nvcc", "ptxas"])
def test_a_front_end_error_in_a_cuda_library_header_says_its_release_must_fit_the_nvcc(tmp_path, space):
    inc = tmp_path / "newer"  # a cuBLAS header of a later release, using what this nvcc's runtime headers lack
    inc.mkdir()
    (inc / "cublas_api.h").write_text("#pragma once\n"
                                      "inline int support() { return (int)cudaDevAttrOfALaterRelease; }\n")
    src = tmp_path / "bench.cu"
    src.write_text('#include <cublas_api.h>\nextern "C" __global__ void k(float* x) { x[threadIdx.x] = 1.0f; }\n')
    out = cli("tune", str(src), "-I", str(inc), "--space", space, "--objectives", "registers", "--generations", "2",
              "--store", "b.db", cwd=tmp_path)
    assert out.returncode == 1, out.stderr
    assert "cublas_api.h(2): error" in out.stderr and "the error is in cuBLAS's header cublas_api.h, whose release " \
        "must fit the nvcc's (CUDA 1" in out.stderr and "the source or a fixed argument" not in out.stderr, out.stderr


@needs_gcc
@pytest.mark.parametrize("source", ["float f(float x) { return x * 2 }\n", 'const char *g(void) { return "abc; }\n'])
def test_a_c_syntax_error_stops_the_run_after_the_baseline(tmp_path, source):
    src = tmp_path / "broken.c"
    src.write_text(source)
    out = cli("tune", str(src), "--objectives", "text_bytes", "--generations", "4", "--store", "b.db", cwd=tmp_path)
    why = "a syntax error in broken.c, which no searched control changes (fix the source): "
    assert out.returncode == 1 and why in out.stderr and "broken.c:1:" in out.stderr, out.stderr
    res = load_results(str(tmp_path / "b.db"))
    assert len(res) == 1 and res.status == "baseline_failed" and why in res.header.stop_reason


@needs_gcc
def test_a_c_syntax_error_a_control_s_macro_may_steer_searches_on(tmp_path):
    src = tmp_path / "steered.c"  # -O0 leaves __OPTIMIZE__ undefined: a searched control decides which line compiles
    src.write_text("#ifdef __OPTIMIZE__\nfloat f(float x) { return x * 2 }\n#else\n"
                   "float f(float x) { return x * 2; }\n#endif\n")
    cli("tune", str(src), "--objectives", "text_bytes", "--generations", "2", "--pool-size", "4", "--store", "b.db",
        cwd=tmp_path)
    res = load_results(str(tmp_path / "b.db"))
    assert res.status == "finished" and len(res) == 2 * 4  # the baseline one of the first generation's 4


@needs_cuda
def test_a_failing_baseline_a_searched_control_may_fix_searches_on(tmp_path):
    src = tmp_path / "broken.cu"  # an #error directive's verdict is the preprocessor's, which macros may decide
    src.write_text('#ifdef __CUDA_ARCH__\n#error not for this build\n#endif\n'
                   'extern "C" __global__ void k(float* x) { x[threadIdx.x] = 1.0f; }\n')
    out = cli("tune", str(src), "--space", "nvcc", "--objectives", "registers", "--generations", "2",
              "--pool-size", "4", "--store", "b.db", cwd=tmp_path)
    res = load_results(str(tmp_path / "b.db"))
    assert res.status == "finished" and len(res) == 2 * 4 and out.returncode == 1


@needs_cuda
def test_tune_prints_units_directions_and_changes_vs_the_baseline(tmp_path):
    out = cli("tune", "reduction", "--space", "ptxas", "--objectives", "registers,sass_instructions",
              "--generations", "2", "--pool-size", "6", "--store", "r.db", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "objectives: registers (count, lower is better); sass_instructions (count, lower is better)" in out.stdout
    assert "vs baseline, " in out.stdout and "x the baseline" not in out.stdout


@needs_cuda
def test_tune_show_export_and_the_report_pick_one_representative(tmp_path):
    out = cli("tune", "reduction", "--space", "ptxas", "--objectives", "registers,sass_instructions",
              "--generations", "3", "--pool-size", "8", "--seed", "3", "--store", "r.db", "--export", "t.acf",
              cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    res = load_results(str(tmp_path / "r.db"))
    chosen = res.best_record(0)
    tied = [r for r in res.records if r.status == "ok" and r.scores == chosen.scores]
    assert chosen == min(tied, key=lambda r: (len(r.params), r.eval_id))
    tune_acf = json.loads((tmp_path / "t.acf").read_text())
    assert cli("export", "r.db", "-o", "e.acf", cwd=tmp_path).returncode == 0
    export_acf = json.loads((tmp_path / "e.acf").read_text())
    # tune --export and export pick the same point: a static run's default, no regression against the baseline
    picked, _ = pick_point(res, default_pick(static=True))
    assert picked is not None and tune_acf["run"]["eval_id"] == export_acf["run"]["eval_id"] == picked.eval_id
    base = res.baseline_record
    assert base is not None and all(v <= b for v, b in zip(picked.scores, base.scores))
    show = cli("show", "r.db", cwd=tmp_path)
    best_line = f"best registers (count, lower is better): {chosen.scores[0]:.0f} count at eval {chosen.eval_id}"
    assert best_line in show.stdout
    front_ids = [int(line.split()[1].rstrip(":")) for line in show.stdout.splitlines() if line.startswith("  eval ")]
    assert front_ids == [r.eval_id for r, _ in res.distinct_front()]
    assert cli("report", "r.db", "-o", "r.html", cwd=tmp_path).returncode == 0
    html = (tmp_path / "r.html").read_text()
    rows = html.split('<tr class="front-row">')[1:]
    assert len(rows) == len(res.distinct_front()) and f">{chosen.eval_id}" in rows[0]


@needs_cuda
def test_a_front_end_control_after_the_double_dash_is_the_builds_and_left_out_of_the_search(tmp_path):
    """A repository's build with --use_fast_math (cuda_hgemm's release build) is tuned as it is built: the switch
    reaches every compile and the search leaves it and the controls it implies alone; searching one of them as well
    is refused, and a ptxas control given fixed still is (it would never reach ptxas)."""
    (tmp_path / "k.cu").write_text("__global__ void k(float *x) { x[threadIdx.x] = sqrtf(x[threadIdx.x]) / 3.f; }\n")
    out = cli("tune", "k.cu", "--space", "nvcc", "--unsafe-math", "--generations", "1", "--store", "r.db", "--",
              "--use_fast_math", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    for control in ("use_fast_math", "ftz", "prec_div", "prec_sqrt", "fmad"):
        assert f"note: {control} left out: the build fixes it (--use_fast_math)" in out.stderr
    res = load_results(tmp_path / "r.db")
    assert res.header.metadata["build"]["args"] == ["--use_fast_math"]
    assert not {"use_fast_math", "ftz", "fmad"} & {k for r in res.records for k in r.params}
    both = cli("tune", "k.cu", "--space", "nvcc", "--controls", "ftz", "--store", "b.db", "--", "-ftz=true",
               cwd=tmp_path)
    assert both.returncode == 2 and "`a control is searched or fixed, not both` must hold" in both.stderr
    ptxas = cli("tune", "k.cu", "--store", "p.db", "--", "-maxrregcount=32", cwd=tmp_path)
    assert ptxas.returncode == 1 and "It sets the ptxas control 'maxrregcount'" in ptxas.stderr, ptxas.stderr


@needs_cuda
def test_the_front_end_switch_reaches_the_code_measured(tmp_path):
    (tmp_path / "k.cu").write_text("__global__ void k(float *x) { x[threadIdx.x] = sqrtf(x[threadIdx.x]) / 3.f; }\n")
    sass = []
    for extra in ([], ["--", "--use_fast_math"]):
        out = cli("tune", "k.cu", "--space", "ptxas", "--objectives", "sass_instructions", "--generations", "1",
                  "--store", f"r{len(extra)}.db", *extra, cwd=tmp_path)
        assert out.returncode == 0, out.stderr
        base = load_results(tmp_path / f"r{len(extra)}.db").baseline_record
        sass.append(base.scores[0])
    assert sass[1] < sass[0]  # approximate sqrt and division: fewer instructions than IEEE-rounded ones


@needs_cuda
def test_a_front_of_the_baseline_alone_says_nothing_beat_it(tmp_path):
    # 20 registers, under ptxas' floor of 24 for a cap: no searched control lowers them
    (tmp_path / "k.cu").write_text('extern "C" __global__ void k(float* x) {\n  float acc = 0.f;\n'
                                   "  for (int i = 0; i < 4; ++i) acc += x[threadIdx.x * 4 + i] * x[i];\n"
                                   "  x[threadIdx.x] = acc;\n}\n")
    out = cli("tune", "k.cu", "--space", "ptxas", "--objectives", "registers", "--generations", "2", "--store",
              "run.db", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    rows = out.stdout.splitlines()
    assert any(r.split()[:2] == ["0", "20"] and "(the baseline above)" in r for r in rows)
    assert "no config beat the compiler defaults on registers" in out.stdout and "same as baseline" not in out.stdout


@needs_cuda
def test_resuming_with_fewer_generations_than_stored_says_nothing_new_is_evaluated(tmp_path):
    tune = ("tune", "reduction", "--space", "ptxas", "--objectives", "registers", "--pool-size", "3", "--store",
            "run.db", "--no-canary")
    assert cli(*tune, "--generations", "3", cwd=tmp_path).returncode == 0
    again = cli(*tune, "--generations", "1", cwd=tmp_path)
    assert again.returncode == 0 and "already holds 3 generations, more than --generations 1" in again.stderr
    assert "pass --generations 4 or more" in again.stderr


@needs_gcc
def test_a_run_whose_every_output_is_wrong_stops_after_its_first_generation_and_says_why(tmp_path):
    folder = tmp_path / "dot"
    shutil.copytree(Path(__file__).resolve().parents[2] / "kernels" / "dot", folder)
    reference = folder / "reference.py"
    reference.write_text(reference.read_text().replace('{"out": np.array([np.dot(', '{"out": 2 * np.array([np.dot('))
    out = cli("tune", str(folder), "--objectives", "runtime", "--generations", "6", "--pool-size", "4", "--no-canary",
              "--store", "w.db", cwd=tmp_path)
    assert out.returncode == 1, out.stderr
    assert "the run stopped: the baseline and all 3 configs of the first generation computed wrong output" in out.stderr
    assert "differs beyond rtol=1e-09" in out.stderr and "[check] rtol, atol" in out.stderr
    res = load_results(str(tmp_path / "w.db"))
    assert res.status == "stopped" and len(res) == 4  # not the 6 generations asked for
    assert {r.status for r in res.records} == {"wrong_output"}
    # the reference fixed, the store of wrong rows is another setup, not replayed into the same stop
    reference.write_text((Path(__file__).resolve().parents[2] / "kernels" / "dot" / "reference.py").read_text())
    again = cli("tune", str(folder), "--objectives", "runtime", "--generations", "6", "--pool-size", "4",
                "--no-canary", "--store", "w.db", cwd=tmp_path)
    assert again.returncode == 1 and "kernel.toml or reference.py changed since the run was stored" in again.stderr
    assert "stopped early and holds no result: delete" in again.stderr
    # a kernel whose outputs are right is not stopped
    ok = cli("tune", str(folder), "--objectives", "runtime", "--generations", "2", "--pool-size", "4", "--no-canary",
             "--store", "ok.db", cwd=tmp_path)
    assert ok.returncode == 0, ok.stderr
    assert load_results(str(tmp_path / "ok.db")).status == "finished"


@needs_cuda
def test_a_regex_entry_tunes_its_kernel_and_the_acf_records_a_name_it_can_hold(tmp_path):
    src = tmp_path / "two.cu"
    src.write_text("__global__ void k1(float* x) { x[0] = 1.0f; }\n__global__ void k2(float* x) { x[1] = 2.0f; }\n")
    for entry, recorded in (("regex:^k2\\(", "_Z2k2Pf"),  # ^ ( \ are kept out of an ACF: the symbol it found
                            ("regex:k2.*float", "regex:k2.*float")):  # an ACF holds this one as typed
        acf = tmp_path / f"{len(recorded)}.acf"
        out = cli("tune", str(src), "--entry", entry, "--space", "ptxas", "--objectives", "registers",
                  "--generations", "1", "--store", f"{len(recorded)}.db", "--export", str(acf), cwd=tmp_path)
        assert out.returncode == 0, out.stderr
        assert json.loads(acf.read_text())["build"]["entry"] == recorded
        again = cli("verify", str(acf), cwd=tmp_path)
        assert again.returncode == 0 and "verify: OK" in again.stdout, again.stdout + again.stderr
    from compileiq_lab.acf.export import _recorded_entry
    from compileiq_lab.exceptions import ConfigurationError

    with pytest.raises(ConfigurationError, match="its kernel's symbol is too long to record"):
        _recorded_entry("regex:^gemm", "_Z" + "x" * 2000)


@needs_cuda
def test_an_nvcc_point_is_shown_as_the_nvcc_line_that_rebuilds_it(tmp_path):
    from compileiq_lab.measure.binary import inspect_elf
    from compileiq_lab.measure.nvcc import parse_ptxas_verbose

    out = cli("tune", "reduction", "--space", "nvcc", "--objectives", "registers,sass_instructions",
              "--generations", "3", "--pool-size", "6", "--store", "r.db", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    rows = [ln.split(None, 3) for ln in out.stdout.splitlines() if re.match(r"\s+\d+\s+\d+\s+\d+\s+\S", ln)]
    assert rows and "-Xptxas" in out.stdout, out.stdout  # a front point with a ptxas control
    source = Path(__file__).resolve().parents[2] / "kernels" / "reduction" / "reduction.cu"
    for _, registers, sass, shown in rows:
        args = shown.split("   (+")[0].split()
        for i, tok in enumerate(args):  # ptxas' own options never stand bare, where nvcc would take them as its own
            if re.match(r"-O\d|--maxrregcount|--register-usage-level|-dlcm|--allow-expensive", tok):
                assert i and args[i - 1] in ("-Xptxas", "-Xcicc"), shown
        cubin = tmp_path / "k.cubin"
        built = subprocess.run([find_tool("nvcc"), "-arch=sm_90", "-cubin", *args, "-Xptxas", "-v", str(source),
                                "-o", str(cubin)], capture_output=True, text=True)
        assert built.returncode == 0, (shown, built.stderr[-400:])
        assert parse_ptxas_verbose(built.stdout + built.stderr)["registers"] == int(registers), shown
        assert inspect_elf(cubin).sass_instructions == int(sass), shown
