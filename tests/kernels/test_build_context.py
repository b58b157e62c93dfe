"""A kernel's build context (kernel.toml [build], the command line), arch variants and launch-aware controls."""

from __future__ import annotations

import math
import shutil
from pathlib import Path

import pytest

from compileiq_lab.cli.main import main
from compileiq_lab.exceptions import ConfigurationError
from compileiq_lab.kernels import BuildContext, KernelRun, load_kernel
from compileiq_lab.testing import tool_available

needs_nvcc = pytest.mark.skipif(not tool_available("nvcc"), reason="needs nvcc")
DATA = Path(__file__).resolve().parents[1] / "data" / "public_kernels"
KERNEL = "#include \"k.h\"\n__global__ void k(float *x) { x[threadIdx.x] *= SCALE; }\n"


def _folder(tmp_path: Path, build: str) -> Path:
    shutil.copytree(DATA / "folder_kernel", tmp_path / "fk")
    toml = tmp_path / "fk" / "vector_add" / "kernel.toml"
    text = toml.read_text()
    start = text.index("[build]")
    end = text.find("\n[", start + 1)
    toml.write_text(text[:start] + build + (text[end:] if end >= 0 else "\n"))
    return toml.parent


def _threads(value: object) -> int:
    return math.prod(int(p) for p in str(value).split(","))


def test_build_table_is_read_and_checked(tmp_path: Path) -> None:
    spec = load_kernel(DATA / "folder_kernel" / "vector_add")
    assert [d.name for d in spec.build.include_dirs] == ["include"] and spec.build.args == ("-std=c++17",)
    for build, match in [('[build]\ninclude_dirs = ["/usr/include"]\n', "relative to the kernel folder"),
                         ('[build]\ninclude_dirs = ["../nowhere"]\n', "each include directory exists"),
                         ('[build]\nargs = ["-o", "x"]\n', "must hold"),
                         ('[build]\nlibs = ["m"]\n', "build keys are in")]:
        with pytest.raises(ConfigurationError, match=match):
            load_kernel(_folder(tmp_path / str(abs(hash(build))), build))


@pytest.mark.parametrize(("arg", "why"), [
    ("-maxrregcount=16", "sets the ptxas control 'maxrregcount': fixed arguments reach only the front end"),
    ("-flcm=ca", "sets the ptxas control 'force_load_cache'"),
    ("-fatbin", "chooses what nvcc writes"),
])
def test_a_cuda_builds_fixed_arguments_are_never_ptxas_controls_or_outputs(tmp_path: Path, arg: str, why: str) -> None:
    src = tmp_path / "k.cu"
    src.write_text(KERNEL.replace('#include "k.h"\n', ""))
    with pytest.raises(ConfigurationError, match="neither a ptxas control nor an output choice") as err:
        load_kernel(src, build=BuildContext.make(args=[arg]))
    assert why in str(err.value) and repr(arg) in str(err.value) and "--controls NAME" in str(err.value)
    assert load_kernel(src, build=BuildContext.make(args=["-std=c++17", "-ftemplate-depth=2000"])).build.args
    # a front-end control is the build's as the user has it (the run leaves it out of the search)
    fast = ["--use_fast_math", "-ftz=true", "--prec-div=false", "--extra-device-vectorization"]
    assert load_kernel(src, build=BuildContext.make(args=fast)).build.args == tuple(fast)
    c = tmp_path / "lib.c"
    c.write_text("int f(int x) { return x + 1; }\nint main(void) { return f(0); }\n")
    assert load_kernel(c, build=BuildContext.make(args=["-fno-strict-aliasing"])).build.args  # a C compiler's -f
    with pytest.raises(ConfigurationError, match="a C kernel's fixed arguments are ones its compiler takes"):
        load_kernel(c, build=BuildContext.make(args=["--use_fast_math"]))  # a CUDA switch gcc would refuse each time


def test_entry_and_block_are_for_bare_files(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="kernel.toml"):
        load_kernel("reduction", entry="other")
    with pytest.raises(ConfigurationError, match="--block is for bare source files"):
        load_kernel("reduction", block=[128])
    src = tmp_path / "k.cu"
    src.write_text(KERNEL)
    with pytest.raises(ConfigurationError, match="1 to 3 ints"):
        load_kernel(src, block=[2048])
    for too_many in ([32, 32, 2], [1, 1, 65]):  # 2,048 threads; a z above CUDA's 64
        with pytest.raises(ConfigurationError, match="at most 1024, as CUDA allows"):
            load_kernel(src, block=too_many)
    assert load_kernel(src, block=[16, 16]).block_threads() == 256
    c = tmp_path / "lib.c"
    c.write_text("int f(int x) { return x + 1; }\n")
    with pytest.raises(ConfigurationError, match="--block is for CUDA and PTX files"):  # a C kernel is called
        load_kernel(c, block=[256])


def test_a_selection_that_leaves_no_control_says_which(tmp_path: Path) -> None:
    c = tmp_path / "lib.c"
    c.write_text("int f(int x) { return x + 1; }\n")
    with pytest.raises(ConfigurationError, match=r"searches at least one control.*catalog 'gcc' with controls "
                                                 r"\['unroll_loops'\], categories \['math_precision'\] leaves none"):
        KernelRun(c, "gcc", ["text_bytes"], controls=["unroll_loops"], categories=["math_precision"],
                  workdir=tmp_path / "w")


@needs_nvcc
def test_maxntid_below_the_launch_block_is_not_offered(tmp_path: Path) -> None:
    src = tmp_path / "k.cu"
    src.write_text(KERNEL)
    run = KernelRun(src, "ptxas", ["registers"], block=[512], workdir=tmp_path / "w",
                    build=BuildContext.make([tmp_path]))
    (tmp_path / "k.h").write_text("#define SCALE 2.0f\n")
    values = run.search_space()["maxntid"].values
    every = KernelRun(src, "ptxas", ["registers"], measure=False).search_space()["maxntid"].values
    assert values and all(_threads(v) >= 512 for v in values)
    assert set(values) == {v for v in every if _threads(v) >= 512} and len(values) < len(every)
    spec = load_kernel("softmax")  # a kernel folder: the block of its [launch]
    bounded = KernelRun(spec, "ptxas", ["registers"], measure=False).search_space()
    assert "maxntid" not in bounded or all(_threads(v) >= (spec.block_threads() or 0)
                                           for v in bounded["maxntid"].values)


@needs_nvcc
def test_arch_variants_are_asked_of_the_tools(tmp_path: Path) -> None:
    src = tmp_path / "k.cu"
    src.write_text(KERNEL.replace('#include "k.h"\n', "#define SCALE 2.0f\n"))
    run = KernelRun(src, "ptxas", ["registers"], arch="sm_90a", workdir=tmp_path / "w")
    assert run(run.search_space() and {}).status == "ok"
    with pytest.raises(ConfigurationError, match="cannot target 'sm_91'"):
        KernelRun(src, "ptxas", ["registers"], arch="sm_91", workdir=tmp_path / "w2")


@needs_nvcc
def test_every_header_read_is_part_of_the_ptx_cache_key(tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    (tmp_path / "inc").mkdir()
    src = tmp_path / "src" / "k.cu"
    src.write_text(KERNEL)
    header = tmp_path / "inc" / "k.h"  # outside the source's folder
    header.write_text("#define SCALE 2.0f\n")
    run = KernelRun(src, "ptxas", ["sass_instructions"], workdir=tmp_path / "w",
                    build=BuildContext.make([tmp_path / "inc"]))
    first = run({})
    assert first.status == "ok"
    header.write_text("#define SCALE (2.0f / (x[0] + 1.0f))\n")
    second = run({})
    assert second.status == "ok" and second.detail["code_hash"] != first.detail["code_hash"]


@needs_nvcc
def test_cli_define_and_extra_arguments_reach_the_compiler(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    src = tmp_path / "k.cu"
    src.write_text("#if __cplusplus < 201703L\n#error needs c++17\n#endif\n" + KERNEL.replace('#include "k.h"\n', ""))
    monkeypatch.chdir(tmp_path)
    base = ["tune", "k.cu", "--space", "ptxas", "--objectives", "registers", "--generations", "1", "--pool-size",
            "4", "--warm-start", "none"]
    assert main([*base, "--define", "SCALE=3.0f", "--store", "a.db", "--", "-std=c++17"]) == 0
    assert main([*base, "--define", "SCALE=3.0f", "--store", "b.db", "--", "-std=c++14"]) == 1
    assert "needs c++17" in capsys.readouterr().err
    assert main([*base, "--store", "c.db", "--", "-o", "x"]) == 2  # refused for any kernel: a usage error
    assert "must hold" in capsys.readouterr().err


def test_controls_a_build_fixes_are_left_out_of_the_search() -> None:
    """A C build's -funroll-loops, -fno-tree-vectorize or -march=native, as a CUDA build's --use_fast_math, is the
    build's: the search leaves those controls alone (each named), and naming one in --controls as well is refused."""
    from compileiq_lab.kernels.choices import run_catalog

    _, chosen, left_out, _ = run_catalog("c", "gcc", None, None, None, None, False,
                                         ["-funroll-loops", "-fno-tree-vectorize", "-march=native", "-std=gnu11"])
    assert dict(left_out) == {"unroll_loops": "the build fixes it (-funroll-loops)",
                              "tree_vectorize": "the build fixes it (-fno-tree-vectorize)",
                              "march": "the build fixes it (-march=native)"}
    assert not {"unroll_loops", "tree_vectorize", "march"} & set(chosen.names) and "opt_level" in chosen.names
    _, cuda, cuda_out, _ = run_catalog("cuda", "nvcc", None, None, None, None, True, ["--use_fast_math"])
    assert {n for n, _ in cuda_out} == {"use_fast_math", "ftz", "prec_div", "prec_sqrt", "fmad"}
    assert "cicc_opt" in cuda.names and "ftz" not in cuda.names
    with pytest.raises(ConfigurationError, match="a control is searched or fixed, not both"):
        run_catalog("c", "gcc", None, ["unroll_loops"], None, None, False, ["-funroll-loops"])


def test_a_fixed_define_of_a_searched_knob_is_refused_naming_the_knob() -> None:
    """dot's kernel.toml searches ACCUMULATORS; a --define of it would be overridden by every config's -D and
    recorded as a build context the run never had."""
    with pytest.raises(ConfigurationError, match=r"a fixed --define names no -D knob the search sets.*"
                                                 r"ACCUMULATORS over \[4, 1, 2, 8\]"):
        load_kernel("dot", build=BuildContext(defines=(("ACCUMULATORS", "2"),)))
    assert load_kernel("dot", build=BuildContext(defines=(("EXTRA", "1"),))).build.defines == (("EXTRA", "1"),)


@pytest.mark.skipif(not tool_available("gcc"), reason="gcc not installed")
def test_a_precision_changing_control_named_without_unsafe_math_is_searched_and_said() -> None:
    named = KernelRun("dot", "gcc", ["text_bytes"], controls=["opt_level", "fast_math"])
    assert "fast_math" in named.catalog.names
    assert "fast_math may change floating-point results: searched because named" in named.catalog_note
    assert "fast_math" not in KernelRun("dot", "gcc", ["text_bytes"]).catalog.names  # unnamed: left out
    from compileiq_lab.space.catalogs import get_catalog

    whole = KernelRun("dot", get_catalog("gcc"), ["text_bytes"])  # a catalog given whole names nothing
    assert "fast_math" in whole.catalog.names and "searched because named" not in whole.catalog_note
    assert "floating-point" not in KernelRun("dot", "gcc", ["text_bytes"], controls=["opt_level", "fast_math"],
                                             unsafe_math=True).catalog_note


@pytest.mark.skipif(not tool_available("gcc"), reason="gcc not installed")
def test_a_run_recorded_with_a_define_of_a_knob_still_reopens_as_it_built(tmp_path: Path) -> None:
    """Runs made before such a --define was refused recorded it; every build's knob -D came after it and won, so the
    run reopens without it rather than be refused for a flag its user can no longer drop."""
    from compileiq_lab import Search
    from compileiq_lab.store import RunStore, load_results

    run = KernelRun("dot", "gcc", ["text_bytes"], controls=["opt_level"], workdir=tmp_path / "w",
                    build=BuildContext(defines=(("EXTRA", "1"),)))
    Search.of(run, store=str(tmp_path / "a.db"), generations=1, pool_size=2).start()
    store = RunStore(str(tmp_path / "a.db"))
    store.acquire()
    header = store.header()
    assert header is not None and header.metadata["build"]["defines"] == {"EXTRA": "1"}
    build = {"include_dirs": [], "defines": {"EXTRA": "1", "ACCUMULATORS": "2"}, "args": []}
    store.update_header(metadata={**header.metadata, "build": build})  # as an earlier version recorded it
    store.close()
    reopened = KernelRun.from_header(load_results(str(tmp_path / "a.db")).header, measure=False)
    assert reopened.kernel.build.defines == (("EXTRA", "1"),)
