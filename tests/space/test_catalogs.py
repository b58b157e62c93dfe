"""Catalogs against the installed compilers: every control compiles, conflicts are real, help agrees."""

from __future__ import annotations

import itertools
import logging
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from compileiq_lab import space as ss
from compileiq_lab.exceptions import ConfigurationError, SpaceDefinitionError
from compileiq_lab.space.catalogs import (
    CATALOGS,
    CLANG,
    EXECUTABLES,
    GCC,
    NVCC,
    NVCC_FRONTEND,
    PTXAS,
    Catalog,
    Control,
    active,
    compiler_version,
    get_catalog,
    help_options,
    introspect,
)
from compileiq_lab.space.catalogs.gcc import cpu_flags, march_levels
from compileiq_lab.testing import tool_available
from compileiq_lab.toolchain.tools import find_tool

ARCH = "sm_90"
C_SOURCE = """#include <math.h>
void saxpy(int n, float a, const float *x, float *restrict y) {
    for (int i = 0; i < n; ++i) y[i] = a * x[i] + y[i];
}
double norm(int n, const double *x) {
    double s = 0.0;
    for (int i = 0; i < n; ++i) s += x[i] * x[i];
    return sqrt(s);
}
void matmul(int n, const float *a, const float *b, float *restrict c) {
    for (int i = 0; i < n; ++i)
        for (int j = 0; j < n; ++j)
            for (int k = 0; k < n; ++k) c[i * n + j] += a[i * n + k] * b[k * n + j];
}
"""
CU_SOURCE = """extern "C" __global__ void saxpy(int n, float a, const float *x, float *y) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + sqrtf(y[i]) / x[i];
}
"""


def needs(*exes: str) -> pytest.MarkDecorator:
    """Skip unless each compiler is found the way the package finds it (PATH, then the CUDA wheels)."""
    missing = [e for e in exes if not tool_available(e)]
    return pytest.mark.skipif(bool(missing), reason=f"{missing} not installed")


def run(argv: list[str]) -> subprocess.CompletedProcess[str]:
    """Run a compiler found through find_tool (nvcc/ptxas may live in the CUDA wheels, off PATH)."""
    return subprocess.run([find_tool(argv[0]), *argv[1:]], capture_output=True, text=True, timeout=120,
                          check=False)


def cases(catalog: Catalog) -> list[Any]:
    """One pytest case per (control, value) of a catalog."""
    return [pytest.param(c.name, v, id=f"{c.name}={v}") for c in catalog.controls for v in c.param.values]


@pytest.fixture(scope="module")
def c_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("c") / "kernel.c"
    path.write_text(C_SOURCE)
    return path


@pytest.fixture(scope="module")
def cu_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("cu") / "kernel.cu"
    path.write_text(CU_SOURCE)
    return path


@pytest.fixture(scope="module")
def ptx_file(cu_file: Path) -> Path:
    out = cu_file.with_suffix(".ptx")
    proc = run(["nvcc", "-ptx", f"-arch={ARCH}", str(cu_file), "-o", str(out)])
    assert proc.returncode == 0, proc.stderr
    return out


def compile_c(cc: str, src: Path, argv: list[str], asm: bool = False) -> subprocess.CompletedProcess[str]:
    # -O2 first so that controls act on optimised code; a later -O (opt_level, ofast) wins
    out = ["-S", "-o", "-"] if asm else ["-c", "-o", str(src.with_suffix(".o"))]
    return run([cc, "-O2", "-Werror", *argv, *out, str(src)])


def ptxas(ptx: Path, argv: list[str]) -> subprocess.CompletedProcess[str]:
    return run(["ptxas", f"-arch={ARCH}", *argv, str(ptx), "-o", str(ptx.with_suffix(".cubin"))])


# ---------------------------------------------------------------- every control compiles

@needs("gcc")
@pytest.mark.parametrize(("name", "value"), cases(GCC))
def test_gcc_control_compiles(c_file: Path, name: str, value: Any) -> None:
    proc = compile_c("gcc", c_file, GCC.argv({name: value}))
    assert proc.returncode == 0 and "warning" not in proc.stderr, proc.stderr


@needs("clang")
@pytest.mark.parametrize(("name", "value"), cases(CLANG))
def test_clang_control_compiles(c_file: Path, name: str, value: Any) -> None:
    proc = compile_c("clang", c_file, CLANG.argv({name: value}))
    assert proc.returncode == 0 and "warning" not in proc.stderr, proc.stderr


@pytest.mark.parametrize("cc", ["gcc", "clang"])
def test_all_c_controls_together_compile(c_file: Path, cc: str) -> None:
    if not tool_available(cc):
        pytest.skip(f"{cc} not installed")
    catalog = get_catalog(cc)
    for pick in (0, -1):
        config = {c.name: c.param.values[pick] for c in catalog.controls}
        proc = compile_c(cc, c_file, catalog.argv(config))
        assert proc.returncode == 0, (config, proc.stderr)


@needs("gcc")
def test_gcc_vectorizer_switch_changes_the_code(c_file: Path) -> None:
    asm = {}
    for value in GCC["tree_vectorize"].param.values:
        proc = compile_c("gcc", c_file, GCC.argv({"tree_vectorize": value}), asm=True)
        asm[value] = proc.stdout
    assert re.search(r"\bmulps\b", asm["-ftree-vectorize"])  # packed: 4 floats at a time
    assert not re.search(r"\bmulps\b", asm["-fno-tree-vectorize"])


@needs("nvcc", "ptxas")
@pytest.mark.parametrize(("name", "value"), cases(PTXAS))
def test_ptxas_control_compiles(ptx_file: Path, name: str, value: Any) -> None:
    proc = ptxas(ptx_file, PTXAS.argv({name: value}))
    assert proc.returncode == 0 and "warning" not in proc.stderr, proc.stderr


@needs("nvcc")
@pytest.mark.parametrize(("name", "value"), cases(NVCC_FRONTEND))
def test_nvcc_frontend_control_compiles(cu_file: Path, tmp_path: Path, name: str, value: Any) -> None:
    argv = NVCC_FRONTEND.argv({name: value})
    proc = run(["nvcc", "-ptx", f"-arch={ARCH}", *argv, str(cu_file), "-o", str(tmp_path / "k.ptx")])
    assert proc.returncode == 0 and "warning" not in proc.stderr, proc.stderr
    assert ".entry saxpy" in (tmp_path / "k.ptx").read_text()


# ---------------------------------------------------------------- conflicts

@needs("nvcc", "ptxas")
def test_ptxas_conflicts_match_what_ptxas_rejects(ptx_file: Path) -> None:
    domains = {name: [None, *PTXAS[name].param.values]
               for name in ("fast_compile", "opt_level", "allow_expensive_optimizations")}
    wrong = []
    for combo in itertools.product(*domains.values()):
        config = {k: v for k, v in zip(domains, combo) if v is not None}
        proc = ptxas(ptx_file, PTXAS.argv(config))
        rejected = proc.returncode != 0 and "Conflicting options" in proc.stderr
        assert rejected or proc.returncode == 0, (config, proc.stderr)
        if rejected != (PTXAS.conflict(config) is not None):
            wrong.append((config, proc.stderr.strip()))
    assert not wrong, f"Catalog.conflict disagrees with ptxas on {wrong}"


def test_conflict_reasons_name_the_options() -> None:
    assert "-O1" in PTXAS.conflict({"fast_compile": "min", "opt_level": 3})
    assert "-O0" in PTXAS.conflict({"fast_compile": "max", "opt_level": 2})
    assert "allow-expensive" in PTXAS.conflict({"fast_compile": "min", "allow_expensive_optimizations": False})
    assert PTXAS.conflict({"fast_compile": "mid", "allow_expensive_optimizations": False}) is None
    assert PTXAS.conflict({"fast_compile": "max"}) is None and PTXAS.conflict({}) is None


# ---------------------------------------------------------------- select and argv

def test_select_by_names_keeps_named_unsafe_controls() -> None:
    sub = GCC.select(names=["unroll_loops", "fast_math"])
    assert sub.names == ["unroll_loops", "fast_math"]
    assert sub.compiler == "gcc"


def test_select_by_categories_and_tiers() -> None:
    assert PTXAS.select(categories=["memory_caching"]).names == ["def_load_cache", "def_store_cache",
                                                                 "force_load_cache", "force_store_cache"]
    common = NVCC.select(tiers=["common"])
    assert common.names and all(c.tier == "common" and not c.unsafe_math for c in common.controls)
    both = GCC.select(categories=["scheduling"], tiers=["advanced"])
    assert both.names == ["schedule_insns", "sched_pressure"]


def test_unsafe_controls_are_left_out_unless_asked_for() -> None:
    for catalog in CATALOGS.values():
        unsafe = {c.name for c in catalog.controls if c.unsafe_math}
        assert unsafe, catalog.compiler
        assert not unsafe & set(catalog.select().names)
        assert unsafe <= set(catalog.select(include_unsafe=True).names)
    assert {"ofast", "fast_math", "fp_contract"} <= {c.name for c in GCC.controls if c.unsafe_math}


def test_select_keeps_conflicts_only_among_kept_controls() -> None:
    assert len(PTXAS.select(names=["fast_compile", "opt_level"]).conflicts) == 2
    assert PTXAS.select(names=["opt_level"]).conflicts == ()


@pytest.mark.parametrize(("kwargs", "bad", "valid"), [
    ({"names": ["maxrregcount", "nope"]}, "nope", "maxrregcount"),
    ({"categories": ["speed"]}, "speed", "register_allocation"),
    ({"tiers": ["rare"]}, "rare", "exotic"),
])
def test_select_errors_list_the_valid_choices(kwargs: dict[str, Any], bad: str, valid: str) -> None:
    with pytest.raises(SpaceDefinitionError) as err:
        PTXAS.select(**kwargs)
    assert bad in str(err.value) and valid in str(err.value)


def test_argv_renders_bools_flags_and_two_token_templates() -> None:
    assert PTXAS.argv({"allow_expensive_optimizations": False}) == ["--allow-expensive-optimizations=false"]
    assert PTXAS.argv({"ptxas_fmad": True}) == ["--fmad=true"]
    assert NVCC_FRONTEND.argv({"use_fast_math": "--use_fast_math"}) == ["--use_fast_math"]
    assert NVCC_FRONTEND.argv({"cicc_opt": 2}) == ["-Xcicc", "-O2"]
    assert CLANG.argv({"unroll_threshold": 400}) == ["-mllvm", "-unroll-threshold=400"]
    assert GCC.argv({"max_unroll_times": 4}) == ["--param=max-unroll-times=4"]
    assert GCC.argv({"ofast": "-Ofast", "opt_level": 2}) == ["-O2", "-Ofast"]  # -Ofast last, so it wins


def test_argv_splits_the_combined_catalog_by_stage() -> None:
    config = {"cicc_opt": 1, "maxrregcount": 64, "ftz": True}
    assert NVCC.argv(config, stage="frontend") == ["--ftz=true", "-Xcicc", "-O1"]
    assert NVCC.argv(config, stage="backend") == ["--maxrregcount=64"]
    with pytest.raises(SpaceDefinitionError, match="nope"):
        NVCC.argv({"nope": 1})


def test_registry() -> None:
    assert set(CATALOGS) == set(EXECUTABLES) == {"nvcc", "nvcc_frontend", "ptxas", "nvrtc", "gcc", "clang"}
    assert set(get_catalog("nvrtc").names) == set(NVCC.names) - {"cicc_opt"}  # NVRTC has no -Xcicc
    assert get_catalog("clang") is CLANG
    assert set(NVCC.names) == set(NVCC_FRONTEND.names) | set(PTXAS.names)
    assert all(c.stage == "c" for c in GCC.controls + CLANG.controls)
    with pytest.raises(SpaceDefinitionError) as err:
        get_catalog("icc")
    assert "icc" in str(err.value) and "'gcc'" in str(err.value)


def test_import_runs_no_subprocess() -> None:
    code = ("import subprocess\n"
            "def boom(*a, **k): raise SystemExit('subprocess at import')\n"
            "subprocess.Popen.__init__ = boom\n"
            "import compileiq_lab.space.catalogs\n")
    proc = run([sys.executable, "-c", code])
    assert proc.returncode == 0, proc.stderr


# ---------------------------------------------------------------- -march levels

def test_march_levels_follow_the_cpu_flags() -> None:
    v3 = {"cx16", "lahf_lm", "popcnt", "sse4_1", "sse4_2", "ssse3",
          "avx", "avx2", "bmi1", "bmi2", "f16c", "fma", "abm", "movbe", "xsave"}
    v4 = v3 | {"avx512f", "avx512bw", "avx512cd", "avx512dq", "avx512vl"}
    assert march_levels(v3, "x86_64") == ["x86-64", "x86-64-v2", "x86-64-v3"]
    assert march_levels(v4, "x86_64")[-1] == "x86-64-v4"
    assert march_levels(v4 - {"avx2"}, "x86_64") == ["x86-64", "x86-64-v2"]
    assert march_levels(v4, "aarch64") == []
    assert cpu_flags("/no/such/cpuinfo") == frozenset()


def test_march_control_offers_only_levels_this_cpu_runs() -> None:
    levels = march_levels()
    if len(levels) < 2:
        assert "march" not in GCC.names
        return
    assert list(GCC["march"].param.values) == levels == list(CLANG["march"].param.values)
    assert ("x86-64-v4" in levels) == ("avx512f" in cpu_flags())


# ---------------------------------------------------------------- introspection

@pytest.mark.parametrize("name", sorted(CATALOGS))
def test_introspection_finds_every_curated_control(name: str) -> None:
    if not all(tool_available(e) for e in EXECUTABLES[name]):
        pytest.skip(f"{EXECUTABLES[name]} not all installed")
    catalog = get_catalog(name)
    kept, left_out = active(catalog)
    assert left_out == []
    assert kept.names == catalog.names and kept.conflicts == catalog.conflicts


@needs("ptxas")
def test_introspection_leaves_out_unknown_and_too_new_controls(caplog: pytest.LogCaptureFixture) -> None:
    fake = Control("fake", "--no-such-option", ss.flag("--no-such-option"), "{value}", "backend",
                   "code_generation", "does not exist")
    future = Control("future", "--maxrregcount", ss.range(32, 64), "--maxrregcount={value}", "backend",
                     "register_allocation", "needs a future ptxas", since="99.0")
    catalog = Catalog("ptxas", (PTXAS["maxrregcount"], fake, future))
    with caplog.at_level(logging.INFO, logger="compileiq_lab.space.catalogs.introspect"):
        kept, left_out = active(catalog)
    assert kept.names == ["maxrregcount"]
    reasons = dict(left_out)
    assert "--no-such-option" in reasons["fake"]
    assert "99.0" in reasons["future"] and compiler_version("ptxas") in reasons["future"]
    assert "fake" in caplog.text and "future" in caplog.text


@needs("gcc", "clang")
def test_introspection_tells_gcc_and_clang_apart() -> None:
    _, left_out = active(GCC, exe="clang")
    assert {"prefetch_loop_arrays", "vect_cost_model", "max_unroll_times", "ipa_pta"} <= dict(left_out).keys()
    assert "unroll_loops" not in dict(left_out)
    _, left_out = active(CLANG, exe="gcc")
    assert {"vectorize", "unroll_threshold"} <= dict(left_out).keys()


@needs("nvcc", "ptxas")
def test_help_options_parse_long_and_short_forms() -> None:
    opts = help_options("ptxas")
    assert {"--maxrregcount", "-maxrregcount", "--def-load-cache", "-dlcm", "--opt-level", "-O"} <= opts
    assert {"--force-load-cache", "-flcm", "--force-store-cache", "-fscm", "--maxntid"} <= opts
    nvcc = help_options("nvcc")
    assert {"--use_fast_math", "--ftz", "-Xptxas", "-Xcicc"} <= nvcc  # -Xcicc: undocumented, probed
    assert {"--jump-table-density", "-jtd"} <= nvcc
    assert "--no-such-option" not in nvcc


@needs("gcc")
def test_help_options_are_cached() -> None:
    help_options("gcc")
    before = introspect._cached_options.cache_info()
    opts = help_options("gcc")
    after = introspect._cached_options.cache_info()
    assert after.hits == before.hits + 1 and after.misses == before.misses
    assert {"--param=max-unroll-times", "-fvect-cost-model=", "-march=", "-O", "-fmath-errno"} <= opts


def test_missing_compiler_raises_with_install_hint() -> None:
    with pytest.raises(ConfigurationError, match="install"):
        active(GCC, exe="no-such-cc-4711")
    with pytest.raises(ConfigurationError, match="no-such-cc-4711"):
        help_options("no-such-cc-4711")
    assert compiler_version("no-such-cc-4711") is None


def test_multi_stage_catalog_needs_one_executable_per_stage() -> None:
    with pytest.raises(ConfigurationError, match="backend"):
        active(NVCC, exe="nvcc")


@needs("nvcc", "ptxas")
def test_multi_stage_catalog_accepts_a_stage_mapping() -> None:
    kept, left_out = active(NVCC, exe={"frontend": "nvcc", "backend": find_tool("ptxas")})
    assert left_out == [] and kept.names == NVCC.names


@pytest.mark.parametrize(("exe", "argv", "pattern"), [
    ("nvcc", ["--version"], r"release (\d+\.\d+)"),
    ("ptxas", ["--version"], r"release (\d+\.\d+)"),
    ("gcc", ["-dumpfullversion"], r"^(\d+\.\d+)"),
    ("clang", ["--version"], r"clang version (\d+\.\d+)"),
])
def test_compiler_version_parses_the_installed_version(exe: str, argv: list[str], pattern: str) -> None:
    if not tool_available(exe):
        pytest.skip(f"{exe} not installed")
    expected = re.search(pattern, run([exe, *argv]).stdout).group(1)
    assert compiler_version(exe) == expected
