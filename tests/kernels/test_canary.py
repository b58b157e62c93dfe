"""The canary: the compiler controls must change the machine code before a search (real compiles; the wrappers are
real shell scripts first on PATH, the way a site's wrapper would be)."""

from __future__ import annotations

import logging
import os
import shutil
import stat
from pathlib import Path

import pytest

from compileiq_lab import space as ss
from compileiq_lab.exceptions import ConfigurationError
from compileiq_lab.kernels import KernelRun
from compileiq_lab.kernels.canary import NO_CONTROL, canary, check_canary, optimisation_controls
from compileiq_lab.measure.gpu import GpuOptions
from compileiq_lab.space.catalogs import CLANG, GCC, NVCC, NVCC_FRONTEND, NVRTC, PTXAS, Catalog, Control
from compileiq_lab.testing import tool_available
from compileiq_lab.testing.gpu_standin import STANDIN_BACKEND
from compileiq_lab.toolchain.tools import find_tool

needs_cuda = pytest.mark.skipif(not (tool_available("nvcc") and tool_available("ptxas")),
                                reason="nvcc and ptxas not installed")
needs_gcc = pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc not installed")


def _wrapper(folder: Path, name: str, body: str) -> Path:
    """A shell script named like the compiler, first on PATH once the test puts ``folder`` there."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


def _first_on_path(monkeypatch: pytest.MonkeyPatch, folder: Path, name: str) -> None:
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ.get('PATH', '')}")
    assert Path(find_tool(name)).parent == folder  # PATH comes before the CUDA wheels: the wrapper is the one used


def test_the_optimisation_level_control_is_found_in_every_catalog_by_its_argument():
    names = {name: [(c.name, c.stage) for c in optimisation_controls(cat)]
             for name, cat in {"nvcc": NVCC, "nvcc_frontend": NVCC_FRONTEND, "ptxas": PTXAS, "nvrtc": NVRTC,
                               "gcc": GCC, "clang": CLANG}.items()}
    assert names == {"nvcc": [("opt_level", "backend"), ("cicc_opt", "frontend")],
                     "nvcc_frontend": [("cicc_opt", "frontend")], "ptxas": [("opt_level", "backend")],
                     "nvrtc": [("opt_level", "backend")], "gcc": [("opt_level", "c")], "clang": [("opt_level", "c")]}
    assert optimisation_controls(PTXAS.select(names=["maxrregcount", "fast_compile"])) == ()  # --Ofast-compile is not


def test_a_catalog_without_an_optimisation_level_passes_without_compiling(tmp_path):
    site = Catalog("ptxas", (PTXAS["maxrregcount"],))  # a site's own catalog: no curated one to borrow -O from
    run = KernelRun("reduction", site, ["registers"], catalog_name="site_ptxas", measure=False, workdir=tmp_path)
    result = canary(run)
    assert result.ok and result.reason == NO_CONTROL and result.control is None and result.checked == ()
    check_canary(run)


@needs_cuda
def test_a_cuda_kernel_with_the_ptxas_catalog_passes(tmp_path, caplog):
    run = KernelRun("reduction", PTXAS, ["registers"], measure=False, workdir=tmp_path)
    result = canary(run)
    assert result.ok, result.reason
    assert (result.control, result.value, result.stage, result.checked) == ("opt_level", 0, "backend", ("opt_level",))
    assert result.baseline_hash and result.canary_hash and result.baseline_hash != result.canary_hash
    assert result.canary_argv == {"frontend": ["-DBLOCK=256"], "backend": ["-O0"]}
    assert result.baseline_argv == {"frontend": ["-DBLOCK=256"], "backend": []}
    assert result.time_ratio is None and result.baseline_time_s is None and result.time_differs is None
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # built in a scratch folder, nothing cached for the run
    with caplog.at_level(logging.INFO, logger="compileiq_lab.kernels.canary"):
        check_canary(run)
    assert "changed the machine code" in caplog.text


@needs_cuda
def test_a_define_the_source_defines_again_is_warned_about(tmp_path, caplog):
    from compileiq_lab.kernels import BuildContext, load_kernel

    src = tmp_path / "d.cu"
    src.write_text('#define MAXB 1024\n#ifndef KEPT\n#define KEPT 1\n#endif\n'
                   'extern "C" __global__ void k(float* x) { x[threadIdx.x] = MAXB + KEPT; }\n')
    kernel = load_kernel(src, build=BuildContext.make(defines=["MAXB=512", "KEPT=2"]))
    with caplog.at_level(logging.WARNING, logger="compileiq_lab.kernels.canary"):
        assert canary(KernelRun(kernel, PTXAS, ["registers"], measure=False, workdir=tmp_path / "w")).ok
    assert 'the source #defines MAXB again, after the --define MAXB=...' in caplog.text
    assert "#ifndef MAXB" in caplog.text and "KEPT" not in caplog.text


@needs_cuda
@pytest.mark.parametrize("source", ["", "#include <cstdio>\nint main() { puts(\"hi\"); return 0; }\n",
                                    "__device__ float twice(float x) { return 2 * x; }\n"])
def test_a_file_without_a_kernel_is_said_to_hold_none(tmp_path, source):
    """Not blamed on a compiler wrapper: the baseline compiled, to a module without an entry."""
    from compileiq_lab.kernels import load_kernel

    src = tmp_path / "none.cu"
    src.write_text(source)
    result = canary(KernelRun(load_kernel(src), PTXAS, ["registers"], measure=False, workdir=tmp_path / "w"))
    assert not result.ok and "none.cu must hold a kernel to tune" in result.reason, result.reason
    assert "wrapper" not in result.reason


@needs_cuda
def test_a_file_of_template_kernels_alone_is_told_the_lines_that_instantiate_them(tmp_path):
    from compileiq_lab.kernels import load_kernel

    src = tmp_path / "soft.cu"
    src.write_text("template <const int NUM_THREADS = 256>\n__global__ void softmax(float *x, float *y, int N) "
                   "{ y[threadIdx.x % NUM_THREADS] = x[0] * N; }\n")
    result = canary(KernelRun(load_kernel(src), PTXAS, ["registers"], measure=False, workdir=tmp_path / "w"))
    assert not result.ok and "soft.cu must hold a kernel to tune" in result.reason, result.reason
    assert "`template __global__ void softmax<>(float *x, float *y, int N);`" in result.reason


@needs_cuda
def test_nvcc_checks_both_stages_and_a_subset_borrows_the_curated_level(tmp_path):
    both = canary(KernelRun("sgemm", NVCC, ["registers"], measure=False, workdir=tmp_path / "a"))
    assert both.ok and both.checked == ("opt_level", "cicc_opt") and both.control == "opt_level"
    subset = canary(KernelRun("reduction", PTXAS.select(names=["maxrregcount"]), ["registers"], measure=False,
                              workdir=tmp_path / "b"))
    assert subset.ok and subset.control == "opt_level" and subset.canary_argv["backend"] == ["-O0"]


@needs_cuda
def test_a_baseline_already_at_the_lowest_level_is_compared_with_the_highest(tmp_path):
    level = Control("opt_level", "--opt-level", ss.choice([0, 1, 2, 3], default=0), "-O{value}", "backend",
                    "code_generation", "ptxas optimisation level, -O0 by default at this site")
    run = KernelRun("reduction", Catalog("ptxas", (level,)), ["registers"], catalog_name="site_ptxas",
                    measure=False, workdir=tmp_path)
    result = canary(run)
    assert result.ok and result.value == 3 and result.baseline_argv["backend"] == ["-O0"], result.reason


@needs_gcc
def test_a_c_kernel_with_gcc_passes(tmp_path):
    result = canary(KernelRun("dot", GCC, ["text_bytes"], measure=False, workdir=tmp_path))
    assert result.ok, result.reason
    assert (result.control, result.value, result.stage) == ("opt_level", 0, "c")
    assert result.canary_argv == {"c": ["-DACCUMULATORS=4", "-O2", "-O0"]}  # the last -O wins
    assert result.baseline_hash != result.canary_hash


@needs_cuda
def test_a_ptxas_wrapper_that_drops_the_controls_fails_the_canary(tmp_path, monkeypatch):
    real = find_tool("ptxas")
    # only the arch, -v, the output flag and the files reach the real ptxas (--version and --help for its checks)
    _wrapper(tmp_path / "bin", "ptxas", 'for a in "$@"; do\n  shift\n  case "$a" in\n'
             '    -arch=*|-v|-o|--version|--help|[!-]*) set -- "$@" "$a" ;;\n  esac\ndone\n'
             f'exec "{real}" "$@"\n')
    _first_on_path(monkeypatch, tmp_path / "bin", "ptxas")
    run = KernelRun("reduction", PTXAS, ["registers"], measure=False, workdir=tmp_path / "w")
    result = canary(run)
    assert not result.ok and result.control == "opt_level" and result.value == 0
    assert result.baseline_hash == result.canary_hash
    with pytest.raises(ConfigurationError) as caught:
        check_canary(run)
    message = str(caught.value)
    assert "must change the machine code, but they did not" in message and "opt_level=0 (`-O0`" in message
    assert "'backend': ['-O0']" in message and "'backend': []" in message  # both builds' arguments
    assert "wrapper" in message and "PATH" in message and "Fix:" in message
    assert str(tmp_path / "bin" / "ptxas") in message  # where the compiler used was found


@needs_gcc
def test_a_gcc_wrapper_that_strips_the_flags_fails_the_canary(tmp_path, monkeypatch):
    real = find_tool("gcc")
    _wrapper(tmp_path / "bin", "gcc", 'for a in "$@"; do\n  shift\n  case "$a" in\n'
             '    -O*|-f*|-m*|--param*) ;;\n    *) set -- "$@" "$a" ;;\n  esac\ndone\n'
             f'exec "{real}" "$@"\n')
    _first_on_path(monkeypatch, tmp_path / "bin", "gcc")
    run = KernelRun("dot", GCC, ["text_bytes"], measure=False, workdir=tmp_path / "w")
    with pytest.raises(ConfigurationError, match=r"did not: the baseline and the baseline plus opt_level=0 \(`-O0`"):
        check_canary(run)


@needs_cuda
def test_a_canary_build_that_does_not_compile_fails_with_the_compilers_message(tmp_path, monkeypatch):
    real = find_tool("ptxas")
    _wrapper(tmp_path / "bin", "ptxas", 'for a in "$@"; do\n  if [ "$a" = -O0 ]; then\n'
             '    echo "ptxas fatal   : -O0 is refused at this site" >&2\n    exit 1\n  fi\ndone\n'
             f'exec "{real}" "$@"\n')
    _first_on_path(monkeypatch, tmp_path / "bin", "ptxas")
    result = canary(KernelRun("reduction", PTXAS, ["registers"], measure=False, workdir=tmp_path / "w"))
    assert not result.ok and result.canary_hash is None and result.baseline_hash is not None
    assert "must compile, but it failed" in result.reason and "-O0 is refused at this site" in result.reason


@needs_cuda
def test_on_the_stand_in_gpu_the_unoptimised_build_is_measurably_slower(tmp_path, monkeypatch):
    run = KernelRun("reduction", PTXAS.select(names=["opt_level"]), ["runtime"], arch="sm_90", workdir=tmp_path,
                    gpu_backend=STANDIN_BACKEND, gpu_options=GpuOptions(budget_s=0.05))
    try:
        assert run.gpu is not None
        timed = canary(run)  # the stand-in's time is proportional to the cubin's size: -O0 code is bigger
        assert timed.ok and timed.time_differs, timed.reason
        assert timed.time_ratio is not None and timed.time_ratio > 1.2
        assert timed.baseline_time_s and timed.canary_time_s and timed.canary_time_s > timed.baseline_time_s
        assert "and the time" in timed.reason and "slower" in timed.reason
        static = canary(run, measure=False)
        assert static.ok and static.time_ratio is None

        def same_time(items, rounds=40, energy_rounds=0):  # a memory-bound kernel: the code changes, the time not
            return {"status": "ok", "checks": dict.fromkeys(items, (True, "")),
                    "samples": {k: [1e-5 * (1 + 0.001 * (i % 3)) for i in range(rounds)] for k in items}}

        monkeypatch.setattr(run.gpu, "remeasure", same_time)
        flat = canary(run)
        assert flat.ok and flat.time_differs is False and flat.time_ratio == pytest.approx(1.0)
        assert "but not the time" in flat.reason and "memory" in flat.reason
    finally:
        run.close()


@needs_cuda
def test_a_file_of_several_kernels_without_an_entry_is_said_to_be_measured_whole(tmp_path, caplog):
    softmax = Path(__file__).resolve().parents[1] / "data" / "public_kernels" / "llm.c" / "dev" / "cuda" / \
        "softmax_forward.cu"
    whole = KernelRun(str(softmax), "ptxas", ["registers"], target="static", workdir=tmp_path / "a")
    with caplog.at_level(logging.WARNING, logger="compileiq_lab.kernels.canary"):
        check_canary(whole)
    assert "softmax_forward.cu holds 5 kernels and no entry names one" in caplog.text
    assert "softmax_forward_kernel4" in caplog.text and "--entry NAME" in caplog.text
    caplog.clear()
    one = KernelRun(str(softmax), "ptxas", ["registers"], target="static", workdir=tmp_path / "b",
                    entry="softmax_forward_kernel4")
    with caplog.at_level(logging.WARNING, logger="compileiq_lab.kernels.canary"):
        check_canary(one)
    assert "holds 5 kernels" not in caplog.text


@needs_cuda
def test_a_file_with_code_only_sm_90a_builds_is_named_before_a_search_for_sm_90(tmp_path, caplog):
    (tmp_path / "feat.h").write_text("#pragma once\n__device__ __forceinline__ void fence() {\n"
                                     "#if defined(__CUDA_ARCH_FEAT_SM90_ALL)\n"
                                     "  asm volatile(\"wgmma.fence.sync.aligned;\" ::: \"memory\");\n#else\n"
                                     "  asm volatile(\"trap;\");\n#endif\n}\n")
    src = tmp_path / "wg.cu"
    src.write_text('#include "feat.h"\n__global__ void wg(float* x) { fence(); x[threadIdx.x] = 1.0f; }\n')
    plain = KernelRun(str(src), "ptxas", ["registers"], target="static", arch="sm_90", workdir=tmp_path / "a")
    with caplog.at_level(logging.WARNING, logger="compileiq_lab.kernels.canary"):
        check_canary(plain)  # a warning, not a stop (it raises nothing): the file may mean its fallback
    assert "wg.cu compiles to other code for sm_90a than for sm_90" in caplog.text
    assert "build for sm_90a (the CLI's --arch sm_90a" in caplog.text
    caplog.clear()
    variant = KernelRun(str(src), "ptxas", ["registers"], target="static", arch="sm_90a", workdir=tmp_path / "b")
    with caplog.at_level(logging.WARNING, logger="compileiq_lab.kernels.canary"):
        check_canary(variant)
    assert "compiles to other code" not in caplog.text
