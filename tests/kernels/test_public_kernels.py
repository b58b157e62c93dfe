"""Users' own CUDA kernels, written elsewhere (tests/data/public_kernels, see its SOURCES.md): tune, export, re-apply
with the real compiler, verify; the exported ACFs are minimal and carry no ignored control."""

from __future__ import annotations

import contextlib
import io
import json
import os
import shlex
import subprocess
from pathlib import Path

import pytest

from compileiq_lab.acf import load_acf
from compileiq_lab.cli.main import main
from compileiq_lab.kernels import KernelRun
from compileiq_lab.measure.binary import inspect_elf
from compileiq_lab.measure.nvcc import parse_ptxas_verbose
from compileiq_lab.store import load_results
from compileiq_lab.testing import tool_available
from compileiq_lab.toolchain.tools import find_tool

pytestmark = [pytest.mark.slow, pytest.mark.skipif(not tool_available("nvcc"), reason="needs nvcc")]

DATA = Path(__file__).resolve().parents[1] / "data" / "public_kernels"
SAMPLES = DATA / "cuda-samples" / "Samples"

#: (id, the .cu file or kernel folder, -I folders relative to it, --entry, the symbol it must resolve to)
CASES = [
    # a header outside the folder (Common/), a template instantiated 12 times, host code with main()
    ("headers-templates", SAMPLES / "6_Performance/alignedTypes/alignedTypes.cu", ["../../../Common"],
     "testKernel<unsigned char>", "_Z10testKernelIhEvPT_S1_i"),
    # five kernels in one file, picked by its plain C++ name
    ("multi-kernel", DATA / "llm.c/dev/cuda/softmax_forward.cu", [], "softmax_forward_kernel4",
     "_Z23softmax_forward_kernel4PfS_ii"),
    # templates and host wrappers; the sibling header includes from Common/
    ("templates-host", SAMPLES / "5_Domain_Specific/Mandelbrot/Mandelbrot_cuda.cu", ["../../../Common"],
     "Mandelbrot1<float>", "_Z11Mandelbrot1IfEvP6uchar4iiiT_S2_S2_S2_S2_S0_iiiib"),
]


def _tune(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, kernel: Path, includes: list[str],
          entry: str | None) -> tuple[int, Path, Path]:
    monkeypatch.chdir(kernel.parent if kernel.is_file() else kernel)
    store, acf = tmp_path / "run.db", tmp_path / "best.acf"
    argv = ["tune", str(kernel), *(a for inc in includes for a in ("-I", inc)), "--space", "ptxas",
            "--objectives", "registers,sass_instructions", "--generations", "3", "--pool-size", "10", "--seed", "1",
            "--warm-start", "none", "--store", str(store), "--export", str(acf), "--workdir", str(tmp_path / "w")]
    if entry:
        argv += ["--entry", entry]
    return main(argv), store, acf


def _reapply(acf_path: Path, source: Path, symbol: str, tmp_path: Path) -> tuple[str, float]:
    """Compile with what `flags --with-build` prints, as a user would; (the entry's code hash, its registers)."""
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert main(["flags", str(acf_path), "--with-build"]) == 0
    flags = shlex.split(buf.getvalue())
    cubin = tmp_path / "reapplied.cubin"
    res = subprocess.run([find_tool("nvcc"), "-cubin", *flags, "-Xptxas", "-v", source.name, "-o", str(cubin)],
                         cwd=source.parent, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    return inspect_elf(cubin, entry=symbol).code_hash, parse_ptxas_verbose(res.stdout + res.stderr, symbol)["registers"]


def _assert_minimal_and_honest(acf_path: Path, store: Path, tmp_path: Path) -> None:
    acf = load_acf(acf_path)
    run = KernelRun.from_acf(acf, workdir=tmp_path / "minimal")
    kept = [k for k in acf.controls if k != "defines"]
    assert not set(kept) & set(acf.dropped), acf.dropped
    for name in kept:  # every control left in the ACF changes the code
        reduced = {k: v for k, v in acf.controls.items() if k != name}
        if run.constraint(reduced) is None:
            assert run.build(reduced)[1] != acf.code_hash, f"{name} has no effect but was exported"
    res = load_results(str(store))
    # a combination the compiler ignored is a constraint for the rest of the run once its result is in: it is seen
    # again only among the candidates of its own generation (asked together, before any result), never after. The
    # combination is each rule's condition at the row's values ("threads per SM out of range": the block and the
    # count of blocks together)
    first: dict[str, int] = {}
    for r in res.records:
        if r.detail.get("ignored_rules"):
            key = json.dumps(sorted((rule["control"], rule["message"], rule["when"])
                                    for rule in r.detail["ignored_rules"]), sort_keys=True, default=str)
            assert first.setdefault(key, r.generation) == r.generation, (key, first[key], r.generation)
    point = res.record(acf.run["eval_id"])
    assert point is not None and not set(kept) & set(point.detail.get("ignored_controls") or {})


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_public_cu_file_tunes_exports_reapplies_and_verifies(case: tuple, monkeypatch: pytest.MonkeyPatch,
                                                             tmp_path: Path) -> None:
    _, source, includes, entry, symbol = case
    code, store, acf_path = _tune(monkeypatch, tmp_path, source, includes, entry)
    assert code == 0
    acf = load_acf(acf_path)
    assert acf.format == "compileiq-lab-acf/2"
    assert acf.build["entry"] == entry and acf.build["include_dirs"] == includes
    # relative to the ACF's own folder (here far from the kernel's), never absolute
    assert acf.build["source"] == Path(os.path.relpath(source, acf_path.resolve().parent)).as_posix()
    res = load_results(str(store))
    ok = [r for r in res.records if r.status == "ok"]
    assert ok and all(r.detail.get("entry_symbol") == symbol for r in ok)
    # the entry's own metrics: the baseline's registers are that kernel's, not the worst kernel's of the file
    base = res.baseline_record
    assert base is not None and base.scores is not None
    assert base.scores[0] == parse_ptxas_verbose(_ptxas_log(source, includes), symbol)["registers"]
    code_hash, registers = _reapply(acf_path, source, symbol, tmp_path)
    assert code_hash == acf.code_hash
    assert registers == acf.objectives["registers"]
    assert main(["verify", str(acf_path)]) == 0
    assert main(["verify", str(acf_path), "--full-nvcc"]) == 0
    _assert_minimal_and_honest(acf_path, store, tmp_path)


def _ptxas_log(source: Path, includes: list[str]) -> str:
    res = subprocess.run([find_tool("nvcc"), "-arch=sm_90", "-cubin", *(f"-I{i}" for i in includes), "-Xptxas", "-v",
                          source.name, "-o", "/dev/null"], cwd=source.parent, capture_output=True, text=True,
                         timeout=300)
    return res.stdout + res.stderr


def test_public_kernel_folder_with_build_table(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    folder = DATA / "folder_kernel" / "vector_add"
    code, store, acf_path = _tune(monkeypatch, tmp_path, folder, [], None)
    assert code == 0
    acf = load_acf(acf_path)
    assert acf.build["include_dirs"] == ["../include"] and acf.build["args"] == ["-std=c++17"]
    assert acf.build["defines"] == {"EXIT_WAIVED": "2"}
    header = load_results(str(store)).header.kernel
    assert header is not None and header.extra["build"]["args"] == ["-std=c++17"]
    assert main(["verify", str(acf_path)]) == 0
    _assert_minimal_and_honest(acf_path, store, tmp_path)


def test_missing_include_ends_the_run_with_the_fix(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    source = SAMPLES / "6_Performance/alignedTypes/alignedTypes.cu"
    code, store, _ = _tune(monkeypatch, tmp_path, source, [], None)
    assert code == 1
    err = capsys.readouterr().err
    assert "helper_cuda.h" in err and "-I/--include-dir" in err
    assert len(load_results(str(store))) == 1  # the baseline only: no ptxas control can fix a front-end error


def test_unknown_and_ambiguous_entries_list_the_kernels(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    source = DATA / "llm.c/dev/cuda/softmax_forward.cu"
    assert _tune(monkeypatch, tmp_path, source, [], "softmax_forward_kernel9")[0] == 1
    err = capsys.readouterr().err
    assert "softmax_forward_kernel9" in err and "_Z23softmax_forward_kernel4PfS_ii" in err
    mandel = SAMPLES / "5_Domain_Specific/Mandelbrot/Mandelbrot_cuda.cu"
    (tmp_path / "b").mkdir()
    assert _tune(monkeypatch, tmp_path / "b", mandel, ["../../../Common"], "Mandelbrot0")[0] == 1
    err = capsys.readouterr().err
    assert "Mandelbrot0<float>" in err and "Mandelbrot0<double>" in err
