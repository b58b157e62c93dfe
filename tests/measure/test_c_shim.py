"""A C kernel's own function (not cil_kernel) called with kernel.toml's [launch] args through a generated call."""

from __future__ import annotations

import shutil
import struct
from pathlib import Path

import numpy as np
import pytest

from compileiq_lab.exceptions import ConfigurationError
from compileiq_lab.kernels import KernelRun, load_kernel
from compileiq_lab.kernels.baseline import baseline_stop_reason
from compileiq_lab.measure.c_shim import param_text
from compileiq_lab.space.catalogs import GCC
from compileiq_lab.store import EvalRecord

needs_gcc = pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc not installed")

# As a user has it: a function of its own with a float scalar, a static helper it calls, and a main of its own that
# calls a benchmark's timer defined in another file (PolyBench's shape), which the tuner does not link.
SOURCE = """#include <stdio.h>
extern void bench_timer_start(void);
static float half_of(float v) { return 0.5f * v; }
void saxpy(float a, const float *x, const float *y, float *out, long n) {
  for (long i = 0; i < n; i++) out[i] = a * x[i] + half_of(y[i]);
}
int main(int argc, char **argv) { bench_timer_start(); puts("a demo of saxpy"); return argc > 1 && argv[1]; }
"""
TOML = """name = "saxpy"
language = "c"
source = "saxpy.c"
entry = "saxpy"

[params]
n = 4099
a = -2.75

[[inputs]]
name = "x"
dtype = "float32"
shape = ["n"]

[[inputs]]
name = "y"
dtype = "float32"
shape = ["n"]

[[outputs]]
name = "out"
dtype = "float32"
shape = ["n"]

[[workloads]]
name = "other"
params = { n = 1000, a = 3 }

[launch]
args = {args}

[check]
reference = "reference"
rtol = 1e-6
atol = 1e-6
"""
REFERENCE = ("import numpy as np\n\ndef reference(inputs, params):\n"
             "    return {'out': (np.float32(params['a']) * inputs['x'] + np.float32(0.5) * inputs['y'])"
             ".astype(np.float32)}\n")


def _folder(tmp_path, args='["a", "x", "y", "out", "n"]', toml=TOML):
    folder = tmp_path / "saxpy"
    folder.mkdir(exist_ok=True)
    (folder / "saxpy.c").write_text(SOURCE)
    (folder / "kernel.toml").write_text(toml.replace("{args}", args))
    (folder / "reference.py").write_text(REFERENCE)
    return folder


def _baseline_stop_reason(kernel, tmp_path):
    """Why a run of ``kernel`` stops after its baseline (a compile error), as the search's baseline row says."""
    ev = KernelRun(kernel, GCC, ["runtime"], workdir=tmp_path / "run")
    try:
        m = ev({})
    finally:
        ev.close()
    assert not m.ok and m.status == "compile_error"

    row = EvalRecord(0, 0, "baseline", {}, m.status, m.error, None, 0.0, 0.0, is_baseline=True, detail=m.detail)
    return baseline_stop_reason(kernel, GCC, row)


def test_a_float_param_reaches_the_harness_as_its_doubles_bits():
    assert param_text(7) == "7" and param_text(-3) == "-3"
    assert struct.unpack("<d", struct.pack("<q", int(param_text(-2.75))))[0] == -2.75


@needs_gcc
def test_a_function_of_its_own_is_called_with_its_launch_args_and_checked(tmp_path):
    kernel = load_kernel(_folder(tmp_path))
    assert kernel.entry == "saxpy" and kernel.args == ("a", "x", "y", "out", "n") and kernel.params["a"] == -2.75
    assert kernel.with_workload("other").params["a"] == 3.0 and isinstance(kernel.with_workload("other").params["a"],
                                                                            float)  # written 3, read as a double
    ev = KernelRun(kernel, GCC, ["runtime"], workdir=tmp_path / "run")
    try:
        base, o3, o0 = ev({}), ev({"opt_level": 3}), ev({"opt_level": 0})
    finally:
        ev.close()
    # the outputs match the reference: a = -2.75 arrived as a float, the buffers in their order, main left out (also
    # at -O0, where a compiler emits every function it is not told it may drop)
    assert base.ok and o3.ok and o0.ok, (base.error, o3.error, o0.error)
    assert base.scores[0] > 0 and np.isfinite(o3.scores[0])


@needs_gcc
def test_launch_args_that_do_not_fit_the_function_stop_the_run_after_the_baseline(tmp_path):
    why = _baseline_stop_reason(load_kernel(_folder(tmp_path, args='["x", "a", "y", "out", "n"]')), tmp_path)
    assert why is not None and "kernel.toml's [launch] args do not fit the parameters of saxpy" in why, why
    assert "argument 1" in why and "saxpy(x, a, y, out, n)" in why and "order of its parameters" in why


@needs_gcc
def test_an_entry_the_source_does_not_declare_stops_the_run_naming_it(tmp_path):
    folder = _folder(tmp_path)
    (folder / "kernel.toml").write_text((folder / "kernel.toml").read_text().replace('"saxpy"\n\n', '"saxpi"\n\n'))
    kernel = load_kernel(folder)
    assert kernel.entry == "saxpi"
    why = _baseline_stop_reason(kernel, tmp_path)
    assert why is not None and why.startswith("saxpy.c declares no function 'saxpi'") and "set entry" in why, why


@needs_gcc
def test_a_source_with_a_cil_kernel_of_its_own_and_another_entry_is_told_to_choose(tmp_path):
    folder = _folder(tmp_path)
    with (folder / "saxpy.c").open("a") as f:
        f.write("void cil_kernel(void **bufs, const long *params) { (void)bufs; (void)params; }\n")
    why = _baseline_stop_reason(load_kernel(folder), tmp_path)
    assert why is not None and why.startswith("saxpy.c defines cil_kernel itself, and kernel.toml names 'saxpy'"), why


@pytest.mark.parametrize(("edit", "match"), [
    (lambda t: t.replace('[launch]\nargs = ["a", "x", "y", "out", "n"]\n', ""),
     r"or names a function of its own \(not main\) with \[launch\] args"),
    (lambda t: t.replace('entry = "saxpy"', 'entry = "main"'), r"a function of its own \(not main\)"),
    (lambda t: t.replace("[launch]\n", "[launch]\ngrid = [1]\n"), r"\[launch\] holds args alone"),
    (lambda t: t.replace('entry = "saxpy"', 'entry = "cil_kernel"'), r"whose entry is cil_kernel has no \[launch\]"),
    (lambda t: t.replace('"out", "n"]', '"out", "m"]'), r"\[launch\] args are names in"),
])
def test_a_c_functions_launch_is_checked_when_kernel_toml_is_read(tmp_path, edit, match):
    folder = _folder(tmp_path, toml=edit(TOML.replace("{args}", '["a", "x", "y", "out", "n"]')))
    with pytest.raises(ConfigurationError, match=match):
        load_kernel(folder)


def test_a_cil_kernels_params_stay_ints(tmp_path):
    toml = TOML.replace('entry = "saxpy"', 'entry = "cil_kernel"').replace('[launch]\nargs = {args}\n', "")
    with pytest.raises(ConfigurationError, match=r"a C kernel.s params are ints .*a float param is passed to it"):
        load_kernel(_folder(tmp_path, toml=toml))


@needs_gcc
def test_polybench_gemm_as_it_is_tunes_checks_exports_and_verifies(tmp_path, monkeypatch):
    """PolyBench/C's gemm.c, unchanged (a static kernel_gemm of variable-length array parameters, polybench.h's
    macros, a main that calls polybench.c's timers, which is not linked), with a kernel.toml beside it."""
    from compileiq_lab.acf import load_acf
    from compileiq_lab.cli.main import main
    from compileiq_lab.store import load_results

    folder = Path(__file__).resolve().parents[1] / "data" / "public_kernels" / "PolyBenchC" / "linear-algebra" / \
        "blas" / "gemm"
    monkeypatch.chdir(tmp_path)
    code = main(["tune", str(folder), "--objectives", "runtime", "--generations", "2", "--pool-size", "4",
                 "--validate", "0", "--store", "g.db", "--export", "g.acf", "--workers", "1"])
    assert code == 0
    res = load_results("g.db")
    assert res.status_counts() == {"ok": len(res)}  # every config computed alpha * A @ B, as the reference says
    assert load_acf(tmp_path / "g.acf").build["entry"] == "kernel_gemm"
    assert main(["verify", "g.acf"]) == 0


@needs_gcc
def test_a_function_no_file_of_the_build_defines_stops_the_run_after_the_baseline(tmp_path):
    """jtfell/c-fft's shape: the entry calls a function of another file (complex.c), which the build never links;
    every candidate failed to link, each compiled in vain."""
    folder = _folder(tmp_path)
    source = (folder / "saxpy.c").read_text()
    (folder / "saxpy.c").write_text(source.replace("static float half_of(float v) { return 0.5f * v; }",
                                                   "extern float half_of(float v);"))
    why = _baseline_stop_reason(load_kernel(folder), tmp_path)
    assert why is not None and why.startswith("the kernel does not link: it calls half_of, which no file of its "
                                              "build defines"), why
    assert "put their definitions in the file or in a header it includes" in why


def test_a_main_defined_twice_is_said_with_the_fix(tmp_path):
    from compileiq_lab.kernels.baseline import _c_link_reason

    kernel = load_kernel(_folder(tmp_path))
    ld = ("/usr/bin/ld: /tmp/ccX.o: in function `main':\nwrap.c:(.text+0x0): multiple definition of `main'; "
          "/tmp/ccY.o:harness.c:(.text+0x0): first defined here\ncollect2: error: ld returned 1 exit status")
    why = _c_link_reason(kernel, ld)
    assert why is not None and why.startswith("the kernel does not link: main is defined twice (wrap.c:(.text+0x0)")
    assert "--define main=user_main" in why
    assert _c_link_reason(kernel, "undefined reference to `saxpy'") is None  # the file defines it: not this rule


def test_wrong_output_from_an_output_the_function_is_never_given_names_it(tmp_path):
    """B-Con's rot13(char *str) works in place: a kernel.toml with an output `out` that [launch] args leaves out has
    nothing write `out`, and every config computes "wrong output"; the reason names the buffer, not the tolerances."""
    import dataclasses

    from compileiq_lab.kernels.baseline import wrong_output_stop_reason

    kernel = dataclasses.replace(load_kernel(_folder(tmp_path)), args=("a", "x", "y", "n"))
    wrong = EvalRecord(0, 0, "b", {}, "wrong_output", "saxpy: output 'out' differs", None, 0.0, 0.0, is_baseline=True)
    searched = [dataclasses.replace(wrong, eval_id=i, generation=1, is_baseline=False) for i in (1, 2)]
    why = wrong_output_stop_reason(kernel, [wrong, *searched]) or ""
    assert "saxpy is never given the output 'out': it is not among kernel.toml's [launch] args" in why, why
    whole = load_kernel(_folder(tmp_path))  # out is passed: the usual reason
    assert "is never given" not in (wrong_output_stop_reason(whole, [wrong, *searched]) or "")
