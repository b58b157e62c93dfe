"""nvcc runs its own steps through a shell: a path or define it is given that the shell would act on is refused."""

from __future__ import annotations

import pytest

from compileiq_lab.exceptions import ConfigurationError
from compileiq_lab.measure.nvcc import CudaCompiler
from compileiq_lab.testing import tool_available

needs_nvcc = pytest.mark.skipif(not (tool_available("nvcc") and tool_available("ptxas")),
                                reason="nvcc/ptxas not found (PATH or the CUDA wheels)")

KERNEL = 'extern "C" __global__ void scale(float* y, float a) { y[threadIdx.x] *= a; }\n'


@needs_nvcc
@pytest.mark.parametrize("name", ["k$(touch PWN).cu", "k`touch PWN`.cu", 'k"; touch PWN; ".cu'])
def test_a_path_nvcc_s_shell_steps_would_act_on_is_refused_and_runs_nothing(tmp_path, monkeypatch, name):
    monkeypatch.chdir(tmp_path)  # (where the command would write)
    source = tmp_path / name
    source.write_text(KERNEL)
    cc = CudaCompiler("sm_90", tmp_path / "w")
    for compile_it in (lambda: cc.ptx(source, []), lambda: cc.full(source, [], [], "scale")):
        with pytest.raises(ConfigurationError, match=r"must hold none of \$ ` \" \\.* but got '.*k.*touch PWN"):
            compile_it()
    assert not (tmp_path / "PWN").exists() and not (source.parent / "PWN").exists()
    plain = tmp_path / "plain.cu"
    plain.write_text(KERNEL)
    with pytest.raises(ConfigurationError, match="work folder"):  # the outputs' folder too
        CudaCompiler("sm_90", tmp_path / "w$(touch PWN)").ptx(plain, [])
    for define in ("-DMSG=$(touch PWN)", '-DMSG=a\\";touch PWN;#'):  # nvcc escapes a define's quotes, not these
        with pytest.raises(ConfigurationError, match="a define: none of"):
            cc.ptx(plain, [define])
    assert not (tmp_path / "PWN").exists()
    assert cc.ptx(plain, ['-DMSG="a b"']).ok  # a string define: nvcc quotes it itself
