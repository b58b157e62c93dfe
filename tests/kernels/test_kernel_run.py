"""KernelRun, the one composition of a kernel run: defaults, rebuilding from a header, build-only runs, resume rules."""

from __future__ import annotations

import math
import os
import shutil
import subprocess
import sys

import pytest

from compileiq_lab import Search, load_results
from compileiq_lab.exceptions import ConfigurationError, StoreMismatchError
from compileiq_lab.kernels import KernelRun, kernels_root, load_kernel, offered_catalog
from compileiq_lab.testing import tool_available

needs_cuda = pytest.mark.skipif(not (tool_available("nvcc") or tool_available("ptxas")),
                                reason="nvcc/ptxas not installed")
needs_gcc = pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc not installed")


@needs_gcc
def test_one_set_of_defaults_for_c_kernels(tmp_path):
    timed = KernelRun("dot", workdir=tmp_path / "a")
    assert timed.catalog_name == "gcc" and timed.objective_names == ["runtime"] and timed.target == "cpu"
    assert timed.workers == 1 and timed.arch is None  # timed CPU runs do not share the CPU
    counted = KernelRun("dot", objectives=["instructions"], workdir=tmp_path / "b")
    assert counted.workers == 1
    static = KernelRun("dot", objectives=["text_bytes"], workdir=tmp_path / "c")
    assert static.target == "static" and static.workers == (os.cpu_count() or 1)
    timed_builds = KernelRun("dot", objectives=["text_bytes", "compile_time"], workdir=tmp_path / "f")
    assert timed_builds.workers == 1  # compile times are timed alone: overlapping compiles slow each other
    assert KernelRun("dot", objectives=["compile_time"], workers=2, workdir=tmp_path / "g").workers == 2  # as asked
    with pytest.raises(ConfigurationError, match="objectives for a c kernel must be among"):
        KernelRun("dot", objectives=[], workdir=tmp_path / "d")
    with pytest.raises(ConfigurationError, match="a static target measures no runs"):
        KernelRun("dot", objectives=["runtime"], target="static", workdir=tmp_path / "e")


@needs_cuda
def test_a_bare_file_is_rebuilt_as_the_bare_file_it_was(tmp_path):
    bare = kernels_root() / "reduction" / "reduction.cu"  # beside a kernel.toml, with -D knobs
    run = KernelRun(bare, "ptxas", ["registers"], workdir=tmp_path / "w")
    assert run.metadata()["kernel_path"] == str(bare) and "defines" not in run.search_space()
    results = Search.of(run, store=str(tmp_path / "bare.db"), generations=1, pool_size=2).start()
    again = KernelRun.from_header(results.header, measure=False)
    assert again.kernel.spec_file is None and again.search_space().keys() == run.search_space().keys()
    bundled = KernelRun("reduction", "ptxas", ["registers"], workdir=tmp_path / "w2")
    assert "kernel_path" not in bundled.metadata() and "defines" in bundled.search_space()


@needs_cuda
def test_resume_compares_what_makes_runs_comparable(tmp_path):
    folder = tmp_path / "first" / "reduction"
    shutil.copytree(kernels_root() / "reduction", folder)
    store = str(tmp_path / "run.db")
    Search.of(KernelRun(folder, "ptxas", ["registers"], workdir=tmp_path / "w"), store=store, generations=1,
              pool_size=2).start()
    moved = tmp_path / "second" / "reduction"  # the same source elsewhere: the same run
    shutil.copytree(folder, moved)
    again = Search.of(KernelRun(moved, "ptxas", ["registers"], workdir=tmp_path / "w"), store=store, generations=2,
                      pool_size=2)
    again.close()
    src = moved / "reduction.cu"
    src.write_text(src.read_text() + "\n// edited\n")
    with pytest.raises(StoreMismatchError, match="the kernel source changed since the run was stored"):
        Search.of(KernelRun(moved, "ptxas", ["registers"], workdir=tmp_path / "w"), store=store, generations=2,
                  pool_size=2)


@needs_gcc
def test_exporting_a_stored_run_needs_no_compiler(tmp_path, monkeypatch):
    store = str(tmp_path / "c.db")
    run = KernelRun("dot", "gcc", ["text_bytes"], workdir=tmp_path / "w")
    Search.of(run, store=store, generations=1, pool_size=3).start()
    empty = tmp_path / "empty-path"
    empty.mkdir()
    env = {**os.environ, "PATH": str(empty)}
    out = subprocess.run([sys.executable, "-m", "compileiq_lab.cli", "export", store, "-o", "p.acf"],
                         capture_output=True, text=True, cwd=tmp_path, env=env)
    assert out.returncode == 0, out.stderr
    assert (tmp_path / "p.acf").is_file()
    monkeypatch.setenv("PATH", str(empty))
    build_only = KernelRun.from_header(load_results(store).header, measure=False)
    assert build_only.argv({"opt_level": 3})["c"][-2:] == ["-O2", "-O3"]  # arguments need no compiler
    with pytest.raises(ConfigurationError, match="compiler 'gcc' is not on PATH"):  # building does
        build_only.build({})


def test_a_form_offers_the_curated_controls_when_the_compiler_is_missing(tmp_path, monkeypatch):
    from compileiq_lab.kernels.choices import active_catalog

    empty = tmp_path / "empty-path"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    active_catalog.cache_clear()
    try:
        offered = offered_catalog("gcc")
    finally:
        active_catalog.cache_clear()
    assert offered.catalog.controls and "'gcc' must be installed" in offered.note and "not on PATH" in offered.note


@needs_cuda
def test_from_header_refuses_a_python_objective_run(tmp_path):
    from compileiq_lab import SearchConfiguration
    from compileiq_lab.testing import toy_objective, toy_space

    results = Search(toy_objective, toy_space(), SearchConfiguration(generations=1), store=":memory:").start()
    with pytest.raises(ConfigurationError, match="not made by `compileiq-lab tune`"):
        KernelRun.from_header(results.header)
    assert load_kernel("reduction").spec_file == kernels_root() / "reduction" / "kernel.toml"


def _failed(error: str, stage: str, status: str = "compile_error"):
    from compileiq_lab.store.sqlite import EvalRecord

    return EvalRecord(eval_id=0, generation=0, config_key="b", params={}, status=status, error=error, scores=None,
                      elapsed_s=0.0, started_at=0.0, is_baseline=True, detail={"failed_stage": stage})


@needs_cuda
def test_baseline_verdict_stops_only_where_no_searched_control_can_help(tmp_path):
    bare = tmp_path / "k.cu"  # no -D knobs: under a ptxas-only space nothing reaches the front end
    bare.write_text('extern "C" __global__ void k(float* x) { x[threadIdx.x] = 1.0f; }\n')
    ptxas_only = KernelRun(str(bare), "ptxas", ["registers"], workdir=tmp_path, measure=False)
    front = KernelRun(str(bare), "nvcc", ["registers"], workdir=tmp_path, measure=False)
    knobs = KernelRun("reduction", "ptxas", ["registers"], workdir=tmp_path, measure=False)
    syntax = _failed('k.cu(3): error: identifier "oops" is undefined', "frontend")
    header = _failed("k.cu:1:10: fatal error: missing.cuh: No such file or directory", "frontend")
    backend = _failed("ptxas error   : Entry function uses too much shared data", "backend")
    assert "cannot change that" in (ptxas_only.baseline_verdict(syntax) or "")
    # the C++ front end's verdict on the source: no searched nvcc control changes the macros it reads
    assert "no searched control changes that" in (front.baseline_verdict(syntax) or "")
    unknown = _failed("nvcc fatal   : Unknown option '-march=native'", "frontend")  # a fixed argument nvcc rejects
    assert "no searched control changes that" in (front.baseline_verdict(unknown) or "")
    value = _failed("nvcc fatal   : Value 'c++99' is not defined for option 'std'", "frontend")  # a fixed -std=c++99
    assert "no searched control changes that" in (front.baseline_verdict(value) or "")
    asm = _failed("ptxas k.ptx (nvcc -ptx of k.cu), line 27; error   : Unknown modifier '.instr'\nptxas k.ptx (nvcc "
                  "-ptx of k.cu), line 27; error   : Not a name of any known instruction: 'bogus'", "frontend")
    assert "no searched control changes that" in (front.baseline_verdict(asm) or "")  # inline PTX that does not parse
    target = _failed("ptxas /tmp/k.ptx, line 9; error   : Feature '.m16n8k16' requires .target sm_80 or higher\n"
                     "ptxas fatal   : Ptx assembly aborted due to errors", "backend")  # inline PTX of a newer GPU
    assert all("--arch" in (run.baseline_verdict(target) or "") for run in (ptxas_only, front))
    directive = _failed("k.cu:2:2: error: #error needs BLOCK", "frontend")  # the preprocessor's, which macros decide
    assert front.baseline_verdict(directive) is None
    assert knobs.baseline_verdict(syntax) is None  # the -D knobs (BLOCK) go to the front end: search on
    assert "include" in (front.baseline_verdict(header) or "")  # no control brings a header back
    assert "CCCL" not in (front.baseline_verdict(header) or "")
    extern = _failed("ptxas fatal   : Unresolved extern function '_Z6helperf'", "backend")  # defined in another file
    for run in (ptxas_only, front):
        why = run.baseline_verdict(extern) or ""
        assert "another file defines (helper(float))" in why or "another file defines (_Z6helperf)" in why, why
    for cccl in ("k.cu:1:10: fatal error: cub/block/block_reduce.cuh: No such file or directory",
                 'k.cu(2): catastrophic error: cannot open source file "cuda/std/atomic"'):
        why = front.baseline_verdict(_failed(cccl, "frontend")) or ""
        assert "part of CCCL (CUB, Thrust, libcu++)" in why and "pip install 'compileiq-lab[cuda]'" in why, why
    assert ptxas_only.baseline_verdict(backend) is None and front.baseline_verdict(backend) is None
    entry = _failed("CUDA_ERROR_NOT_FOUND: named symbol not found", "", status="run_error")
    assert "entry 'reduce_sum'" in (knobs.baseline_verdict(entry) or "")
    ok = _failed("", "", status="ok")
    assert front.baseline_verdict(ok) is None


@needs_cuda
def test_compile_time_runs_warm_the_compiler_up_outside_the_run_cache(tmp_path):
    run = KernelRun("reduction", "ptxas", ["compile_time", "registers"], target="static", workdir=tmp_path)
    try:
        m = run({})  # the first evaluation (the baseline) comes after the warm-up
        assert m.status == "ok"
        cc = run.backend.cc  # type: ignore[attr-defined]
        assert cc.ptx_misses == 1 and cc.ptx_hits == 0  # the warm-up did not fill the run's PTX cache
        assert not list(tmp_path.glob("scratch-*"))  # and left nothing behind
        assert run.warm_up() is None  # once per run
    finally:
        run.close()
    cold = KernelRun("reduction", "ptxas", ["registers"], target="static", workdir=tmp_path / "other")
    try:
        assert cold._warmed  # no compile_time objective: nothing to warm up
    finally:
        cold.close()


def test_counting_instructions_never_searches_the_avx512_level_valgrind_cannot_run():
    from compileiq_lab import space as ss
    from compileiq_lab.kernels.choices import without_avx512
    from compileiq_lab.space.catalogs import GCC, Catalog, Control

    levels = Control("march", "-march=", ss.choice(["x86-64", "x86-64-v3", "x86-64-v4"], knockout_prob=0.3),
                     "-march={value}", "c", "code_generation", "target ISA level")
    catalog = Catalog("gcc", (GCC["opt_level"], levels))  # a CPU with AVX-512 (the curated one offers what runs here)
    kept, note = without_avx512(catalog)
    assert list(kept["march"].param.values) == ["x86-64", "x86-64-v3"] and kept["march"].param.knockout_prob == 0.3
    assert note == (("march=x86-64-v4", "instructions are counted under valgrind, which cannot run AVX-512 code"),)
    assert kept["opt_level"] is catalog["opt_level"]
    assert without_avx512(Catalog("gcc", (GCC["opt_level"],))) == (Catalog("gcc", (GCC["opt_level"],)), ())
    run = KernelRun("matmul_c", "gcc", ["instructions"], measure=False)
    assert "x86-64-v4" not in (run.search_space().get("march").values if "march" in run.search_space() else [])


def test_a_bare_file_searching_maxntid_without_its_block_gets_a_note(tmp_path):
    bare = tmp_path / "k.cu"
    bare.write_text('extern "C" __global__ void __launch_bounds__(256) k(float* x) { x[threadIdx.x] = 1.0f; }\n')
    unbounded = KernelRun(str(bare), "ptxas", ["registers"], workdir=tmp_path, measure=False)
    assert "--maxntid is searched without the kernel's launch block" in unbounded.catalog_note
    bounded = KernelRun(str(bare), "ptxas", ["registers"], workdir=tmp_path, measure=False, block=[256])
    assert "--maxntid" not in bounded.catalog_note
    threads = [math.prod(int(n) for n in str(v).split(",")) for v in bounded.search_space()["maxntid"].values]
    assert min(threads) >= 256  # and the values below it are not offered
    without = KernelRun(str(bare), "ptxas", ["registers"], workdir=tmp_path, measure=False,
                        controls=["opt_level", "maxrregcount"])
    assert "--maxntid" not in without.catalog_note


def test_the_first_generation_verdict_stops_only_where_every_output_so_far_was_wrong():
    import dataclasses

    from compileiq_lab.kernels.baseline import wrong_output_stop_reason

    kernel = load_kernel("dot")
    wrong = _failed("dot: output 'out' differs beyond rtol=1e-09, atol=1e-09; worst out[0]: got 1, expected 2", "",
                    "wrong_output")
    searched = [dataclasses.replace(wrong, eval_id=i, generation=1, is_baseline=False) for i in (1, 2, 3)]
    why = wrong_output_stop_reason(kernel, [wrong, *searched]) or ""
    assert why.startswith("the baseline and all 3 configs of the first generation computed wrong output (baseline: "
                          "dot: output 'out' differs") and "dot's reference" in why and "remove [check]" not in why
    ok = dataclasses.replace(searched[0], status="ok", error="")
    crashed = dataclasses.replace(searched[0], status="run_error", error="exit code 1")
    assert wrong_output_stop_reason(kernel, [wrong, ok, *searched[1:]]) is None  # one config computed it
    assert wrong_output_stop_reason(kernel, [wrong, crashed, *searched[1:]]) is None  # not every one ran and was wrong
    assert wrong_output_stop_reason(kernel, [wrong]) is None  # the baseline alone says nothing of the controls
    writes = [dataclasses.replace(r, error=r.error + "; the kernel writes its input buffer 'x', but the harness ...")
              for r in (wrong, *searched)]
    why = wrong_output_stop_reason(kernel, writes) or ""
    assert "fix the kernel so that it leaves its inputs as they are" in why and "reference" not in why


@needs_gcc
def test_a_reopened_kernel_run_keeps_its_objectives_units_and_noise(tmp_path):
    from compileiq_lab import Search

    kr = KernelRun("dot", objectives=["text_bytes", "compile_time"], workdir=tmp_path / "w")
    Search.of(kr, store=str(tmp_path / "r.db"), generations=1, pool_size=2).start()
    again = Search.open(str(tmp_path / "r.db"), kr)  # as the lab's runs list and Dashboard.open reopen it
    assert [(o.unit, o.noise) for o in again.objectives] == [("bytes", 0.0), ("s", 0.10)]
    kr.close()
