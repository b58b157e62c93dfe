"""Usage errors instead of stored failures: a command line wrong on its own (nonsense numbers, an empty or repeated
list, a name no run has) exits 2 before anything runs, one wrong only for its kernel exits 1; a crashed warm-started
run continues with the same command."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from compileiq_lab import load_results

needs_gcc = pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc not installed")


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "compileiq_lab.cli", *args], capture_output=True, text=True,
                          cwd=cwd, timeout=600)


@pytest.mark.parametrize("option,value", [("--timeout", "nan"), ("--timeout", "-1"), ("--timeout", "0"),
                                          ("--timeout", "inf"), ("--workers", "0"), ("--workers", "-3"),
                                          ("--validate", "-3"), ("--validate", "5"), ("--generations", "0"),
                                          ("--pool-size", "1"),
                                          ("--seed", "-1"), ("--workers", "two")])
def test_nonsense_numbers_are_usage_errors(tmp_path, option, value):
    out = cli("tune", "stencil_c", option, value, "--store", "x.db", cwd=tmp_path)
    assert out.returncode == 2, out.stderr
    assert option in out.stderr and "must hold" in out.stderr and "Traceback" not in out.stderr
    assert not (tmp_path / "x.db").exists()  # nothing ran, nothing was stored


@pytest.mark.parametrize("option", ["--objectives", "--controls", "--categories"])
def test_an_empty_list_is_a_usage_error_not_the_defaults(tmp_path, option):
    out = cli("tune", "stencil_c", option, " , ", "--store", "x.db", cwd=tmp_path)
    assert out.returncode == 2 and f"{option}: `a comma list of at least one name` must hold" in out.stderr
    assert "Traceback" not in out.stderr and not (tmp_path / "x.db").exists()


def test_python_api_refuses_the_same_numbers():
    from compileiq_lab import Search, SearchConfiguration
    from compileiq_lab.exceptions import ConfigurationError
    from compileiq_lab.kernels import KernelRun
    from compileiq_lab.testing import FlagProblem

    for kwargs in ({"timeout_s": float("nan")}, {"timeout_s": -1}, {"timeout_s": 0}, {"workers": 0},
                   {"workers": -3}):
        with pytest.raises(ConfigurationError, match="must hold"):
            KernelRun("stencil_c", objectives=["text_bytes"], **kwargs)
    p = FlagProblem(n_flags=6, n_levels=2, seed=0)
    search = Search(p, p.space(), SearchConfiguration(generations=1), store=":memory:")
    for workers in (0, -2, 1.5, True):
        with pytest.raises(ConfigurationError, match="workers"):
            search.start(workers=workers)


@needs_gcc
def test_a_warm_started_run_continues_with_the_same_command(tmp_path):
    base = ["tune", "stencil_c", "--objectives", "text_bytes", "--pool-size", "4"]
    assert cli(*base, "--generations", "2", "--store", "a.db", cwd=tmp_path).returncode == 0
    first = cli(*base, "--generations", "2", "--store", "b.db", cwd=tmp_path)  # warm-started from a.db
    assert first.returncode == 0 and "warm start" in first.stderr, first.stderr
    stored = load_results(str(tmp_path / "b.db")).header.config["warm_start"]
    assert stored
    again = cli(*base, "--generations", "3", "--store", "b.db", cwd=tmp_path)  # as after a crash: the same command
    assert again.returncode == 0, again.stderr
    res = load_results(str(tmp_path / "b.db"))
    assert res.header.config["warm_start"] == stored and res.header.config["generations"] == 3


def test_the_package_runs_as_the_command(tmp_path):
    out = subprocess.run([sys.executable, "-m", "compileiq_lab", "--version"], capture_output=True, text=True,
                         cwd=tmp_path, timeout=120)
    command = cli("--version", cwd=tmp_path)
    assert out.returncode == command.returncode == 0 and out.stdout == command.stdout and "compileiq-lab" in out.stdout


@needs_gcc
def test_an_unknown_pick_is_a_usage_error_before_anything_runs(tmp_path):
    out = cli("tune", "stencil_c", "--objectives", "text_bytes", "--pick", "nosuch", "--export", "out.acf",
              "--store", "x.db", cwd=tmp_path)
    assert out.returncode == 2, out.stderr
    assert "--pick" in out.stderr and "'nosuch'" in out.stderr and "must hold" in out.stderr
    assert all(name in out.stderr for name in ("text_bytes", "first", "knee", "no-regression"))  # the valid names
    assert "checking that the controls" not in out.stderr and "Traceback" not in out.stderr
    assert not (tmp_path / "x.db").exists() and not (tmp_path / "out.acf").exists()
    alone = cli("tune", "stencil_c", "--objectives", "text_bytes", "--pick", "knee", "--store", "x.db", cwd=tmp_path)
    assert alone.returncode == 2 and "--pick chooses the point --export writes" in alone.stderr
    empty = cli("tune", "stencil_c", "--objectives", "text_bytes", "--export", "", "--store", "x.db", cwd=tmp_path)
    assert empty.returncode == 2 and "--export must name a file, but got an empty name" in empty.stderr
    assert not (tmp_path / "x.db").exists()


def test_an_executor_of_no_known_form_is_a_usage_error_before_anything_runs(tmp_path):
    from compileiq_lab.cli.main import _parser

    out = cli("tune", "stencil_c", "--executor", "bogus", "--store", "x.db", cwd=tmp_path)
    assert out.returncode == 2, out.stderr
    assert "--executor" in out.stderr and "'bogus'" in out.stderr and "tcp://host:8786" in out.stderr
    assert "checking that the controls" not in out.stderr and not (tmp_path / "x.db").exists()
    for spec in ("tcp://", "Local", "host:8786", ""):
        with pytest.raises(SystemExit) as stop:
            _parser().parse_args(["tune", "stencil_c", "--executor", spec])
        assert stop.value.code == 2, spec
    for spec in ("local", "dask", "dask-cuda", "tcp://10.0.0.1:8786", "tls://host:8786"):  # nothing is reached
        assert _parser().parse_args(["tune", "stencil_c", "--executor", spec]).executor == spec


def test_a_repeated_objective_is_a_usage_error(tmp_path):
    out = cli("tune", "stencil_c", "--objectives", "runtime, text_bytes,runtime", "--store", "x.db", cwd=tmp_path)
    assert out.returncode == 2, out.stderr
    assert "--objectives" in out.stderr and "once" in out.stderr and "repeated: runtime" in out.stderr
    assert "Traceback" not in out.stderr and not (tmp_path / "x.db").exists()


@pytest.mark.parametrize("option,value,said", [
    ("--objectives", "text_bytes,regsiters", "['regsiters'] (did you mean 'registers'?)"),
    ("--space", "gcc_", "'gcc_' (did you mean 'gcc'?)"),
    ("--categories", "register_alocation", "['register_alocation'] (did you mean 'register_allocation'?)"),
    ("--controls", "maxregcount", "['maxregcount'] (did you mean 'maxrregcount'?)"),
])
def test_a_name_no_run_has_is_a_usage_error(tmp_path, option, value, said):
    out = cli("tune", "stencil_c", option, value, "--store", "x.db", cwd=tmp_path)
    assert out.returncode == 2, out.stderr
    assert option in out.stderr and said in out.stderr and "must hold" in out.stderr
    assert "Traceback" not in out.stderr and not (tmp_path / "x.db").exists()


@pytest.mark.parametrize("args,said", [
    (["validate"], "one of the two), but got neither"),
    (["tune", "stencil_c", "--block", "1,x"], "--block must be X[,Y[,Z]] ints, but got '1,x'"),
    (["tune", "stencil_c", "--num-warps", "4"], "--num-warps is a Triton kernel's option"),
    (["demo", "--generations", "0"], "argument --generations: `an integer from 1 to 1000000` must hold"),
    (["tune", "stencil_c", "--generations", "10000000"], "`an integer from 1 to 1000000` must hold"),
    (["flags", "x.acf", "--stage", "foo"], "argument --stage: invalid choice: 'foo'"),
    (["validate", "run.db", "--rounds", "9"], "argument --rounds: `an integer >= 10` must hold"),
    (["validate", "--acf", "best.acf", "--tolerance", "nan"], "argument --tolerance: `a number in [0, 1)` must hold"),
    (["tune", "stencil_c", "--define", "N=64", "--define", "N=128"], "`--define names each define once` must hold"),
    (["tune", "stencil_c", "--", "-O3"], "It sets the optimisation level, which the search sets"),
    # a Triton kernel's command line wrong whatever its file (none exists here): the form, the types, the options
    (["tune", "triton:k.py"], "a Triton kernel is named 'triton:path/to/file.py:function'"),
    (["tune", "triton:k.py:"], "the name after the last ':' is a Python function name"),
    (["tune", "triton:k.py:k", "--signature", ""], "comma-separated, none empty` must hold, but got ''"),
    (["tune", "triton:k.py:k", "--signature", "*half,i32"], "a parameter has type '*half'. Hint an aligned pointer"),
    (["tune", "triton:k.py:k", "--num-warps", "3"], "`num_warps is a power of 2 from 1 to 32` must hold, but got 3"),
    (["tune", "triton:k.py:k", "--define", "BLOCK"], "gives its value (NAME=VALUE)` must hold, but got --define BLOCK"),
])
def test_options_that_do_not_fit_together_are_usage_errors(tmp_path, args, said):
    out = cli(*args, cwd=tmp_path)
    assert out.returncode == 2 and said in out.stderr and "Traceback" not in out.stderr, out.stderr


@needs_gcc
@pytest.mark.parametrize("option,value,said", [
    ("--objectives", "registers", "objectives for a c kernel must be among"),  # a CUDA kernel's objective
    ("--space", "ptxas", "catalog 'ptxas' controls stages"),  # a CUDA kernel's catalog
    ("--controls", "maxrregcount", "gcc catalog has no controls ['maxrregcount']"),  # a CUDA catalog's control
])
def test_a_name_this_kernel_lacks_is_an_error_of_the_run(tmp_path, option, value, said):
    out = cli("tune", "stencil_c", option, value, "--store", "x.db", cwd=tmp_path)
    assert out.returncode == 1, out.stderr
    assert said in out.stderr and "Traceback" not in out.stderr and not (tmp_path / "x.db").exists()


@needs_gcc
def test_arch_for_a_c_kernel_is_refused_not_ignored(tmp_path):
    out = cli("tune", "stencil_c", "--objectives", "text_bytes", "--arch", "sm_90", "--store", "x.db", cwd=tmp_path)
    assert out.returncode == 1, out.stderr
    assert "--arch 'sm_90'" in out.stderr and "C kernel" in out.stderr and "drop --arch" in out.stderr
    assert "checking that the controls" not in out.stderr and not (tmp_path / "x.db").exists()


@needs_gcc
def test_a_continued_run_says_so_and_counts_this_sessions_compiles_apart(tmp_path):
    assert cli("tune", "stencil_c", "--objectives", "text_bytes", "--generations", "1", "--store", "s.db",
               cwd=tmp_path).returncode == 0
    more = cli("tune", "stencil_c", "--objectives", "text_bytes", "--generations", "2", "--store", "s.db", cwd=tmp_path)
    assert more.returncode == 0, more.stderr
    stored = len(load_results(str(tmp_path / "s.db")).records)
    first = stored - int(more.stdout.split("this session (")[1].split(" evaluations")[0])
    assert f"continuing the run in s.db: {first} evaluations of 1 generation(s) stored, up to generation 2" \
        in more.stderr
    assert f"{stored} evaluations, statuses" in more.stdout and "this session (" in more.stdout
    again = cli("tune", "stencil_c", "--objectives", "text_bytes", "--generations", "2", "--store", "s.db",
                cwd=tmp_path)
    assert "as many as --generations 2 asks for, so nothing new is evaluated" in again.stderr
    assert "continuing the run" not in again.stderr and len(load_results(str(tmp_path / "s.db")).records) == stored


@needs_gcc
def test_flags_with_build_rebuilds_a_c_point_with_the_dialect_it_was_tuned_with(tmp_path):
    """A build's own -std= came after the tool's -std=c11 in every tuned compile; pasted in front of it, it lost
    (M_PI is a GNU extension, undeclared under -std=c11)."""
    (tmp_path / "mpi.c").write_text('#include <math.h>\ndouble area(double r) { return M_PI * r * r; }\n')
    tuned = cli("tune", "mpi.c", "--objectives", "text_bytes", "--generations", "1", "--store", "m.db",
                "--export", "m.acf", "--", "-std=gnu11", cwd=tmp_path)
    assert tuned.returncode == 0, tuned.stderr
    assert "every compile, the baseline included, also had the build's fixed -std=gnu11" in tuned.stdout
    flags = cli("flags", "m.acf", "--with-build", cwd=tmp_path)
    argv = flags.stdout.split()
    assert argv.index("-std=gnu11") > argv.index("-std=c11"), flags.stdout
    built = subprocess.run(["gcc", *argv, "-c", "mpi.c", "-o", "mpi.o"], cwd=tmp_path, capture_output=True, text=True)
    assert built.returncode == 0, built.stderr


@needs_gcc
def test_the_warm_start_counts_only_the_configs_this_space_takes(tmp_path):
    common = ("tune", "stencil_c", "--objectives", "text_bytes", "--generations", "1")
    assert cli(*common, "--controls", "opt_level", "--store", "a.db", cwd=tmp_path).returncode == 0
    other = cli(*common, "--controls", "unroll_loops", "--store", "b.db", cwd=tmp_path)
    assert other.returncode == 0 and "it is not a point of this space" in other.stderr
    assert "warm start:" not in other.stderr  # it said "2 configs" after leaving both out
    same = cli(*common, "--controls", "opt_level", "--store", "c.db", cwd=tmp_path)
    assert "warm start: " in same.stderr and "a.db" in same.stderr


def test_a_warm_start_from_a_run_of_another_kernel_says_so(tmp_path):
    common = ("--objectives", "text_bytes", "--generations", "1", "--controls", "opt_level")
    assert cli("tune", "stencil_c", *common, "--store", "s.db", cwd=tmp_path).returncode == 0
    other = cli("tune", "dot", *common, "--store", "d.db", "--warm-start", "s.db", cwd=tmp_path)
    assert other.returncode == 0, other.stderr
    assert "note: --warm-start s.db is a run of kernel 'stencil_c', not 'dot'" in other.stderr
    same = cli("tune", "stencil_c", *common, "--store", "s2.db", "--warm-start", "s.db", cwd=tmp_path)
    assert "is a run of kernel" not in same.stderr


@pytest.mark.parametrize("given", ["missing.db", "."])
def test_a_warm_start_store_that_is_not_there_is_refused_before_anything_builds(tmp_path, given):
    out = cli("tune", "stencil_c", "--objectives", "text_bytes", "--store", "x.db", "--warm-start", given,
              cwd=tmp_path)
    assert out.returncode == 1 and "Traceback" not in out.stderr
    assert f"--warm-start takes auto, none or a run store's .db file, but got {given!r}" in out.stderr
    assert not (tmp_path / "x.db").exists()  # refused before the run's store was made
