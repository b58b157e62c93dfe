"""PTX as input: a bare .ptx and a kernel folder with language = "ptx" tune with ptxas alone, export, re-apply (ptxas
takes `flags --stage ptxas` and reproduces the recorded code) and verify; bad inputs are one-line errors."""

from __future__ import annotations

import contextlib
import io
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

from compileiq_lab.acf import load_acf
from compileiq_lab.cli.main import main
from compileiq_lab.exceptions import ConfigurationError
from compileiq_lab.kernels import KernelRun, load_kernel
from compileiq_lab.measure.binary import inspect_elf
from compileiq_lab.measure.entries import ptx_header
from compileiq_lab.store import load_results
from compileiq_lab.testing import tool_available
from compileiq_lab.toolchain.tools import find_tool

pytestmark = pytest.mark.skipif(not tool_available("nvcc"), reason="needs nvcc (to make the PTX) and ptxas")

SOFTMAX = Path(__file__).resolve().parents[1] / "data" / "public_kernels" / "llm.c" / "dev" / "cuda" / \
    "softmax_forward.cu"


def _ptx(tmp_path: Path, arch: str = "sm_90a", name: str = "softmax.ptx") -> Path:
    """The PTX of a public multi-kernel file, as `nvcc -ptx` makes it."""
    out = tmp_path / name
    res = subprocess.run([find_tool("nvcc"), f"-arch={arch}", "-ptx", SOFTMAX.name, "-o", str(out)],
                         cwd=SOFTMAX.parent, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    return out


def _stdout(argv: list[str]) -> tuple[int, str]:
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        code = main(argv)
    return code, buf.getvalue()


@pytest.mark.parametrize("entry", [None, "softmax_forward_kernel4"])
def test_bare_ptx_tunes_exports_reapplies_and_verifies(tmp_path, monkeypatch, entry):
    ptx = _ptx(tmp_path)
    monkeypatch.chdir(tmp_path)
    argv = ["tune", ptx.name, "--space", "ptxas", "--objectives", "registers,sass_instructions", "--generations", "3",
            "--pool-size", "8", "--warm-start", "none", "--store", "run.db", "--export", "best.acf"]
    assert main([*argv, *(["--entry", entry] if entry else [])]) == 0
    res = load_results("run.db")
    meta = res.header.kernel
    assert meta is not None and meta.language == "ptx" and meta.arch == "sm_90a"  # the module's own target
    assert meta.extra["ptx"] == {"version": ptx_header(ptx.read_text()).version, "target": "sm_90a"}
    assert set(meta.toolchain) == {"ptxas"}  # nothing but ptxas ran
    acf = load_acf(tmp_path / "best.acf")
    assert acf.compiler == "ptxas" and acf.build["source"] == ptx.name and acf.argv["frontend"] == []
    code, flags = _stdout(["flags", "best.acf", "--stage", "ptxas"])
    assert code == 0
    cubin = tmp_path / "again.cubin"
    subprocess.run([find_tool("ptxas"), *shlex.split(flags), ptx.name, "-o", str(cubin)], check=True, timeout=300)
    symbol = "_Z23softmax_forward_kernel4PfS_ii" if entry else None
    assert inspect_elf(cubin, entry=symbol).code_hash == acf.code_hash
    assert main(["verify", "best.acf"]) == 0


def test_kernel_folder_with_language_ptx(tmp_path, monkeypatch):
    folder = tmp_path / "softmax_ptx"
    folder.mkdir()
    _ptx(folder, name="softmax.ptx")
    (folder / "kernel.toml").write_text('name = "softmax_ptx"\nlanguage = "ptx"\nsource = "softmax.ptx"\n'
                                        'entry = "_Z23softmax_forward_kernel1PfS_ii"\n')
    spec = load_kernel(folder)
    assert spec.language == "ptx" and spec.static_only
    monkeypatch.chdir(tmp_path)
    assert main(["tune", str(folder), "--objectives", "registers", "--generations", "2", "--pool-size", "6",
                 "--warm-start", "none", "--store", "f.db", "--export", "f.acf"]) == 0  # ptxas: the default catalog
    assert load_results("f.db").header.kernel.catalog == "ptxas"
    assert main(["verify", "f.acf"]) == 0


def test_ptx_bad_inputs_are_one_line_errors(tmp_path, capsys):
    ptx = _ptx(tmp_path)
    cases = {
        "arch": (["--arch", "sm_90"], "cannot be compiled for architecture 'sm_90'"),
        "front end": (["--space", "nvcc"], "a PTX kernel has none"),
        "nvrtc": (["--space", "nvrtc"], "a PTX kernel has none"),
        "define": (["--define", "X=1"], "not preprocessed"),
    }
    for name, (extra, expected) in cases.items():
        code = main(["tune", str(ptx), *extra, "--generations", "1", "--store", str(tmp_path / f"{name}.db")])
        err = capsys.readouterr().err
        assert code == 1 and expected in err and "Traceback" not in err, (name, err)
        assert "sm_90a" in err or name != "arch"  # both targets are named
    newer = tmp_path / "newer.ptx"
    newer.write_text(ptx.read_text().replace(f".version {ptx_header(ptx.read_text()).version}", ".version 99.9", 1))
    with pytest.raises(ConfigurationError, match=r"Unsupported \.version 99\.9.*newer CUDA toolkit"):
        KernelRun(newer, "ptxas", ["registers"])


def test_ptx_compiled_for_an_older_target_assembles_for_a_newer_arch(tmp_path):
    ptx = _ptx(tmp_path, arch="sm_80", name="old.ptx")
    run = KernelRun(ptx, "ptxas", ["registers"], arch="sm_90", workdir=tmp_path / "w")
    assert run.arch == "sm_90"
    path, code_hash = run.build({})
    assert path.is_file() and code_hash
    with pytest.raises(ConfigurationError, match="sm_80"):
        KernelRun(ptx, "ptxas", ["registers"], arch="sm_75")


def test_an_edited_ptx_is_a_new_cache_entry(tmp_path):
    ptx = _ptx(tmp_path)
    work = tmp_path / "w"
    first = KernelRun(ptx, "ptxas", ["registers"], workdir=work, entry="softmax_forward_kernel1").build({})[1]
    text = ptx.read_text()
    shutil.copy(ptx, tmp_path / "orig.ptx")
    start = text.index(".visible .entry _Z23softmax_forward_kernel1")
    ptx.write_text(text[:start] + text[start:].replace("ret;", "membar.gl;\n\tret;", 1))
    second = KernelRun(ptx, "ptxas", ["registers"], workdir=work, entry="softmax_forward_kernel1").build({})[1]
    assert first != second


TRITON_DATA = Path(__file__).resolve().parents[1] / "data" / "triton"


@pytest.mark.parametrize("name", ["matmul.sm_90a.ptx", "vector_add.sm_90.ptx"])
def test_recorded_triton_ptx_tunes_and_verifies_without_triton(tmp_path, monkeypatch, name):
    """Triton's PTX as recorded (tests/data/triton, made by its generate.py): a machine without Triton tunes it."""
    shutil.copy(TRITON_DATA / name, tmp_path / name)
    monkeypatch.chdir(tmp_path)
    assert main(["tune", name, "--objectives", "registers,sass_instructions", "--generations", "2", "--pool-size",
                 "6", "--warm-start", "none", "--store", "r.db", "--export", "r.acf"]) == 0
    acf = load_acf("r.acf")
    assert acf.arch == ptx_header((tmp_path / name).read_text()).target
    assert main(["verify", "r.acf"]) == 0
