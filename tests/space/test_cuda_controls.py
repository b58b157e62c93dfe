"""The CUDA controls taken from ptxas/nvcc 13.0 --help: rendering, every build accepts them, measured limits."""

from __future__ import annotations

import hashlib
import struct
import subprocess
from pathlib import Path
from typing import Any

import pytest

from compileiq_lab.space.catalogs import CATALOGS, NVCC, NVCC_FRONTEND, NVRTC, PTXAS, active
from compileiq_lab.testing import tool_available
from compileiq_lab.toolchain.tools import find_tool

ARCH = "sm_90"
needs_cuda = pytest.mark.skipif(not (tool_available("nvcc") and tool_available("ptxas")),
                                reason="nvcc and ptxas not installed")

#: Controls added or widened from the 13.0 help (maxntid: block shapes).
NEW_BACKEND = ("force_load_cache", "force_store_cache", "maxntid")
NEW_FRONTEND = ("jump_table_density",)

# mod: only loads and stores with their own cache modifiers; sw: plain loads and a dense switch
CU_SOURCE = """extern "C" __global__ void mod(int n, const float *x, float *y) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) __stcs(y + i, __ldcs(x + i) + __ldcg(x + i + n) + __ldg(x + i + 2 * n));
}
extern "C" __global__ void sw(int n, const float *x, float *y, const int *mode) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float v = x[i];
    switch (mode[i]) {
        case 0: v = v * 2.f; break;
        case 1: v = sqrtf(v); break;
        case 2: v = v + 1.f; break;
        case 3: v = v - 3.f; break;
        case 4: v = v * v; break;
        case 5: v = -v; break;
        case 6: v = v / 3.f; break;
        case 7: v = v * 7.f + 1.f; break;
        default: v = 0.f;
    }
    y[i] = v;
}
"""


def run(argv: list[str]) -> subprocess.CompletedProcess[str]:
    """Run a CUDA tool found through find_tool (in CI it lives in the CUDA wheels, off PATH)."""
    return subprocess.run([find_tool(argv[0]), *argv[1:]], capture_output=True, text=True, timeout=120, check=False)


def cases(names: tuple[str, ...]) -> list[Any]:
    """One pytest case per (control, value) of the named NVCC controls."""
    return [pytest.param(n, v, id=f"{n}={v}") for n in names for v in NVCC[n].param.values]


def code_sections(cubin: Path) -> dict[str, str]:
    """sha256 of each ``.text.*`` (machine code) and ``.nv.info.*`` (launch bounds) section of a cubin."""
    data = cubin.read_bytes()
    shoff = struct.unpack_from("<Q", data, 0x28)[0]
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    headers = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]
    strtab = headers[shstrndx][4]

    def name(offset: int) -> str:
        start = strtab + offset
        return data[start:data.index(b"\0", start)].decode()

    return {name(h[0]): hashlib.sha256(data[h[4]:h[4] + h[5]]).hexdigest() for h in headers
            if name(h[0]).startswith((".text.", ".nv.info."))}


@pytest.fixture(scope="module")
def cu_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("cuda_controls") / "k.cu"
    path.write_text(CU_SOURCE)
    return path


@pytest.fixture(scope="module")
def ptx_file(cu_file: Path) -> Path:
    out = cu_file.with_suffix(".ptx")
    proc = run(["nvcc", f"-arch={ARCH}", "-ptx", str(cu_file), "-o", str(out)])
    assert proc.returncode == 0, proc.stderr
    return out


def ptxas(ptx: Path, argv: list[str], out: Path) -> subprocess.CompletedProcess[str]:
    """The two-stage build's back end."""
    return run(["ptxas", f"-arch={ARCH}", "-v", *argv, str(ptx), "-o", str(out)])


def full(cu: Path, frontend: list[str], backend: list[str], out: Path) -> subprocess.CompletedProcess[str]:
    """The full build: one nvcc -cubin, each ptxas token through -Xptxas."""
    xptxas = [a for tok in backend for a in ("-Xptxas", tok)]
    return run(["nvcc", f"-arch={ARCH}", "-cubin", *frontend, "-Xptxas", "-v", *xptxas, str(cu), "-o", str(out)])


# ---------------------------------------------------------------- rendering

def test_new_controls_render_as_the_help_spells_them() -> None:
    assert PTXAS.argv({"force_load_cache": "cv"}) == ["-flcm=cv"]
    assert PTXAS.argv({"force_store_cache": "wt"}) == ["-fscm=wt"]
    assert PTXAS.argv({"maxntid": 128}) == ["--maxntid=128"]
    assert PTXAS.argv({"maxntid": "16,16"}) == ["--maxntid=16", "--maxntid=16"]
    assert PTXAS.argv({"maxntid": "8,8,4"}) == ["--maxntid=8", "--maxntid=8", "--maxntid=4"]
    assert NVCC_FRONTEND.argv({"jump_table_density": 0}) == ["--jump-table-density=0"]
    config = {"jump_table_density": 50, "maxntid": "32,8", "force_load_cache": "cg"}
    assert NVCC.argv(config, stage="frontend") == ["--jump-table-density=50"]
    assert NVCC.argv(config, stage="backend") == ["-flcm=cg", "--maxntid=32", "--maxntid=8"]
    assert NVRTC.argv(config, stage="backend") == NVCC.argv(config, stage="backend")
    options = {name: PTXAS[name].option for name in NEW_BACKEND}
    assert options == {"force_load_cache": "--force-load-cache", "force_store_cache": "--force-store-cache",
                       "maxntid": "--maxntid"}
    assert NVCC_FRONTEND["jump_table_density"].option == "--jump-table-density"


def test_new_controls_metadata() -> None:
    assert (PTXAS["force_load_cache"].tier, PTXAS["force_store_cache"].tier) == ("advanced", "exotic")
    assert {PTXAS["force_load_cache"].category, PTXAS["force_store_cache"].category} == {"memory_caching"}
    assert NVCC_FRONTEND["jump_table_density"].tier == "advanced"
    for name in (*NEW_BACKEND, *NEW_FRONTEND):
        control = NVCC[name]
        assert control.doc and "\n" not in control.doc and not control.unsafe_math, name
        assert control.param.knockout_prob is not None and 0.5 <= control.param.knockout_prob <= 0.8, name
    assert set(NVCC_FRONTEND["jump_table_density"].param.values) <= set(range(102))  # nvcc: 0..101


def test_maxrregcount_keeps_the_grid_stored_runs_and_acfs_hold() -> None:
    param = PTXAS["maxrregcount"].param
    assert param.kind == "log_sampling" and param.values[0] == 32 and param.values[-1] == 255
    assert len(param.values) == 12


def test_maxntid_keeps_its_integer_values_first() -> None:
    param = PTXAS["maxntid"].param
    assert list(param.values[:5]) == [64, 128, 256, 512, 1024]  # as stored ACFs and runs hold them
    assert param.index_of(128) == 1
    shapes = [v for v in param.values if isinstance(v, str)]
    assert shapes and all(1 < len(v.split(",")) <= 3 for v in shapes)
    for shape in shapes:
        threads = 1
        for dim in shape.split(","):
            threads *= int(dim)
        assert threads <= 1024, shape


def test_no_ptxas_token_holds_a_comma() -> None:
    # nvcc splits an -Xptxas argument at commas: "-Xptxas --maxntid=16,16" hands ptxas a file named "16"
    for name in ("nvcc", "ptxas", "nvrtc"):
        catalog = CATALOGS[name]
        for control in catalog.controls:
            if control.stage == "backend":
                for value in control.param.values:
                    assert not any("," in tok for tok in control.argv(value)), (name, control.name, value)


# ---------------------------------------------------------------- every build accepts them

@needs_cuda
@pytest.mark.parametrize(("name", "value"), cases(NEW_BACKEND))
def test_new_backend_value_compiles_in_both_builds(cu_file: Path, ptx_file: Path, tmp_path: Path, name: str,
                                                    value: Any) -> None:
    argv = PTXAS.argv({name: value})
    proc = ptxas(ptx_file, argv, tmp_path / "two.cubin")
    assert proc.returncode == 0 and "warning" not in proc.stderr, proc.stderr
    proc = full(cu_file, [], argv, tmp_path / "full.cubin")
    assert proc.returncode == 0 and "warning" not in proc.stderr, proc.stderr
    assert code_sections(tmp_path / "two.cubin") == code_sections(tmp_path / "full.cubin")


@needs_cuda
@pytest.mark.parametrize(("name", "value"), cases(NEW_FRONTEND))
def test_new_frontend_value_compiles_in_both_builds(cu_file: Path, tmp_path: Path, name: str, value: Any) -> None:
    argv = NVCC_FRONTEND.argv({name: value})
    proc = run(["nvcc", f"-arch={ARCH}", "-ptx", *argv, str(cu_file), "-o", str(tmp_path / "k.ptx")])
    assert proc.returncode == 0 and "warning" not in proc.stderr, proc.stderr
    proc = ptxas(tmp_path / "k.ptx", [], tmp_path / "two.cubin")
    assert proc.returncode == 0, proc.stderr
    proc = full(cu_file, argv, [], tmp_path / "full.cubin")
    assert proc.returncode == 0 and "warning" not in proc.stderr, proc.stderr


@pytest.fixture(scope="module")
def nvrtc() -> Any:
    nv = pytest.importorskip("cuda.bindings.nvrtc")
    try:
        nv.nvrtcVersion()
    except (RuntimeError, OSError) as exc:  # the bindings without the NVRTC library
        pytest.skip(f"NVRTC library not loadable: {exc}")
    return nv


@pytest.mark.parametrize(("name", "value"), cases(NEW_BACKEND + NEW_FRONTEND))
def test_new_value_compiles_with_nvrtc(nvrtc: Any, name: str, value: Any) -> None:
    stages = NVRTC.stage_argv({name: value})
    options = [f"-arch={ARCH}", "-Xptxas=-v", *stages["frontend"], *(f"-Xptxas={tok}" for tok in stages["backend"])]
    _, prog = nvrtc.nvrtcCreateProgram(CU_SOURCE.encode(), b"k.cu", 0, [], [])
    try:
        (err,) = nvrtc.nvrtcCompileProgram(prog, len(options), [o.encode() for o in options])
        _, size = nvrtc.nvrtcGetProgramLogSize(prog)
        log = b" " * size
        nvrtc.nvrtcGetProgramLog(prog, log)
        text = log.rstrip(b"\0 ").decode(errors="replace")
        _, cubin_size = nvrtc.nvrtcGetCUBINSize(prog)
    finally:
        nvrtc.nvrtcDestroyProgram(prog)
    assert err == nvrtc.nvrtcResult.NVRTC_SUCCESS and "warning" not in text, (options, text)
    assert cubin_size > 0


@pytest.mark.parametrize("name", ["nvcc", "ptxas", "nvrtc"])
def test_introspection_keeps_the_new_controls(name: str) -> None:
    if not (tool_available("nvcc") and tool_available("ptxas")):
        pytest.skip("nvcc and ptxas not installed")
    kept, left_out = active(CATALOGS[name])
    new = set(NEW_BACKEND) | (set(NEW_FRONTEND) if name != "ptxas" else set())
    assert left_out == [] and new <= set(kept.names)


# ---------------------------------------------------------------- what they do

@needs_cuda
def test_maxntid_shape_is_the_comma_form_of_ptxas(ptx_file: Path, tmp_path: Path) -> None:
    for shape in ("16,16", "8,8,4"):
        proc = ptxas(ptx_file, [f"--maxntid={shape}"], tmp_path / "comma.cubin")
        assert proc.returncode == 0, proc.stderr
        proc = ptxas(ptx_file, PTXAS.argv({"maxntid": shape}), tmp_path / "repeated.cubin")
        assert proc.returncode == 0, proc.stderr
        assert code_sections(tmp_path / "comma.cubin") == code_sections(tmp_path / "repeated.cubin")
    ptxas(ptx_file, ["--maxntid=256"], tmp_path / "flat.cubin")
    assert code_sections(tmp_path / "flat.cubin") != code_sections(tmp_path / "repeated.cubin")


@needs_cuda
def test_nvcc_splits_a_comma_in_xptxas(cu_file: Path, tmp_path: Path) -> None:
    # why maxntid renders "16,16" as --maxntid=16 --maxntid=16
    proc = run(["nvcc", f"-arch={ARCH}", "-cubin", "-Xptxas", "--maxntid=16,16", str(cu_file),
                "-o", str(tmp_path / "k.cubin")])
    assert proc.returncode != 0 and "'16'" in proc.stderr, proc.stderr


@needs_cuda
@pytest.mark.parametrize(("force", "default", "value"), [
    ("force_load_cache", "def_load_cache", "cg"),
    ("force_store_cache", "def_store_cache", "wt"),
])
def test_force_cache_overrides_the_code_s_own_modifiers(ptx_file: Path, tmp_path: Path, force: str, default: str,
                                                         value: str) -> None:
    def mod_code(config: dict[str, Any]) -> str:
        out = tmp_path / "k.cubin"
        proc = ptxas(ptx_file, PTXAS.argv(config), out)
        assert proc.returncode == 0, proc.stderr
        return code_sections(out)[".text.mod"]

    base = mod_code({})
    assert mod_code({default: value}) == base  # __ldcs/__ldcg/__ldg/__stcs keep their modifiers
    assert mod_code({force: value}) != base


@needs_cuda
def test_jump_table_density_builds_jump_tables(cu_file: Path, tmp_path: Path) -> None:
    def jump_tables(argv: list[str]) -> int:
        out = tmp_path / "k.ptx"
        proc = run(["nvcc", f"-arch={ARCH}", "-ptx", *argv, str(cu_file), "-o", str(out)])
        assert proc.returncode == 0, proc.stderr
        return out.read_text().count("brx.idx")

    assert jump_tables([]) == 0  # default 101: never
    assert jump_tables(NVCC_FRONTEND.argv({"jump_table_density": 0})) >= 1
    assert jump_tables(NVCC_FRONTEND.argv({"jump_table_density": 100})) >= 1  # the switch is dense


# ---------------------------------------------------------------- measured warnings and left-out values

#: Combinations ptxas 13.0 accepts with an "ignoring" warning (not Conflicts: the compile succeeds).
WARNINGS = [
    ({"force_load_cache": "cg", "def_load_cache": "ca"},
     "Conflicting options force-load-cache and def-load-cache specified, ignoring def-load-cache option"),
    ({"force_store_cache": "wt", "def_store_cache": "cs"},
     "Conflicting options force-store-cache and def-store-cache specified, ignoring def-store-cache option"),
    ({"maxrregcount": 64, "maxntid": "16,16"},
     "Conflicting options -maxrregcount and -maxntid specified, ignoring -maxntid option"),
    ({"maxrregcount": 64, "minnctapersm": 2},
     "Conflicting options -maxrregcount and -minnctapersm specified, ignoring -minnctapersm option"),
    ({"minnctapersm": 3, "maxntid": "32,32"},  # 3 x 1024 threads > 2048 per SM on sm_90
     "Value of threads per SM for entry mod is out of range. .minnctapersm will be ignored"),
    ({"opt_level": 0, "register_usage_level": 5},
     "Conflicting options '-O0' and '--register-usage-level' specified, ignoring '--register-usage-level' option"),
]


@needs_cuda
@pytest.mark.parametrize(("config", "warning"), WARNINGS, ids=[" ".join(sorted(c)) for c, _ in WARNINGS])
def test_ptxas_warns_and_ignores(ptx_file: Path, tmp_path: Path, config: dict[str, Any], warning: str) -> None:
    proc = ptxas(ptx_file, PTXAS.argv(config), tmp_path / "k.cubin")
    assert proc.returncode == 0 and f"ptxas warning : {warning}" in proc.stderr, proc.stderr
    assert PTXAS.conflict(config) is None


@needs_cuda
@pytest.mark.parametrize(("argv", "expected"), [
    (["--maxrregcount=23"], "adjusting per thread register count of 23 to lower bound of 24"),
    (["--device-function-maxrregcount=32"],
     "Command line option 'device-function-maxrregcount' not supported for 'whole program compilation', "
     "will be ignored"),
], ids=["maxrregcount-below-24", "device-function-maxrregcount"])
def test_ptxas_ignores_the_values_left_out(ptx_file: Path, tmp_path: Path, argv: list[str], expected: str) -> None:
    proc = ptxas(ptx_file, argv, tmp_path / "k.cubin")
    assert proc.returncode == 0 and expected in proc.stderr, proc.stderr


@needs_cuda
@pytest.mark.parametrize("argv", [["-flcm=wb"], ["-flcm=wt"], ["-fscm=ca"], ["-fscm=lu"]])
def test_ptxas_refuses_cache_modifiers_of_the_other_direction(ptx_file: Path, tmp_path: Path,
                                                               argv: list[str]) -> None:
    proc = ptxas(ptx_file, argv, tmp_path / "k.cubin")
    assert proc.returncode != 0 and "Invalid default cache modifier" in proc.stderr, proc.stderr


@needs_cuda
@pytest.mark.parametrize(("mode", "argv", "expected"), [
    ("-ptx", ["-dlto"], "'-dlto' is not compatible with '-ptx'"),
    ("-ptx", ["-rdc=true", "-dlto"], "'-dlto' is not compatible with '-ptx'"),
    ("-cubin", ["-dlto"], "cannot generate '--cubin'"),
    ("-cubin", ["-rdc=true", "-dlto"], "cannot generate '--cubin'"),
    ("-ptx", ["-dopt=off"], "not defined for option 'dopt'"),
])
def test_nvcc_refuses_the_device_link_modes(cu_file: Path, tmp_path: Path, mode: str, argv: list[str],
                                             expected: str) -> None:
    proc = run(["nvcc", f"-arch={ARCH}", mode, *argv, str(cu_file), "-o", str(tmp_path / "out")])
    assert proc.returncode != 0 and expected in proc.stderr, proc.stderr


@needs_cuda
def test_rdc_gives_a_relocatable_cubin(cu_file: Path, tmp_path: Path) -> None:
    # why -rdc=true is not offered: the cubin needs a device link before a module load
    out = tmp_path / "k.cubin"
    proc = run(["nvcc", f"-arch={ARCH}", "-cubin", "-rdc=true", str(cu_file), "-o", str(out)])
    assert proc.returncode == 0, proc.stderr
    assert struct.unpack_from("<H", out.read_bytes(), 16)[0] == 1  # ET_REL
    out = tmp_path / "whole.cubin"
    assert run(["nvcc", f"-arch={ARCH}", "-cubin", str(cu_file), "-o", str(out)]).returncode == 0
    assert struct.unpack_from("<H", out.read_bytes(), 16)[0] == 2  # ET_EXEC
    assert not {"rdc", "device_link_mode", "dopt", "device_function_maxrregcount"} & set(NVCC.names)


def test_a_base_argument_the_config_repeats_is_given_once():
    from compileiq_lab.space.catalogs import GCC
    assert GCC.stage_argv({"opt_level": 2}) == {"c": ["-O2"]}  # not -O2 -O2
    assert GCC.stage_argv({"opt_level": 3}) == {"c": ["-O2", "-O3"]}  # the base, then the config's, which wins
    assert GCC.stage_argv({}, ["-DN=4"]) == {"c": ["-DN=4", "-O2"]}
