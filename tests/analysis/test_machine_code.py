"""Machine-code reports: ptxas -v resources and the SASS mix of a point beside the baseline, from real compiles."""

from __future__ import annotations

import pytest

from compileiq_lab.exceptions import ConfigurationError
from compileiq_lab.measure.sass import disassembler_reason
from compileiq_lab.testing import tool_available

pytestmark = pytest.mark.skipif(not tool_available("nvcc") or not tool_available("ptxas"),
                                reason="needs nvcc and ptxas")


@pytest.fixture(scope="module")
def sgemm():  # type: ignore[no-untyped-def]
    from compileiq_lab.kernels import KernelRun

    return KernelRun("sgemm", "ptxas", ["sass_instructions", "registers"], arch="sm_90", measure=False)


def test_a_point_that_changes_the_code(sgemm) -> None:  # type: ignore[no-untyped-def]
    from compileiq_lab.analysis.machine_code import code_diff

    d = code_diff(sgemm, {"opt_level": 0})
    base, point = d.attrs["baseline"], d.attrs["point"]
    assert not d.attrs["same_code"] and base.code_hash != point.code_hash
    assert d.loc["sass_instructions", "point"] > d.loc["sass_instructions", "baseline"]  # -O0: no optimisation
    assert d.loc["registers", "baseline"] == base.resources["registers"] > 0
    assert (d["change"] == d["point"] - d["baseline"]).all()
    assert any(line.startswith("ptxas info : Used") and "registers" in line for line in point.ptxas_lines)
    assert any("bytes spill stores" in line for line in point.ptxas_lines)
    assert point.argv["backend"][:1] == ["-O0"] or "-O0" in " ".join(point.argv["backend"])
    if disassembler_reason() is None:
        mix = d[d["kind"] == "instructions"]
        assert mix["point"].sum() == d.loc["sass_instructions", "point"]
        assert mix["baseline"].sum() == d.loc["sass_instructions", "baseline"]


def test_the_baseline_against_itself(sgemm) -> None:  # type: ignore[no-untyped-def]
    from compileiq_lab.analysis.machine_code import code_diff

    d = code_diff(sgemm, {})
    assert d.attrs["same_code"] and (d["change"] == 0).all()


def test_c_kernels_and_failed_compiles_are_refused(sgemm) -> None:  # type: ignore[no-untyped-def]
    from compileiq_lab.analysis.machine_code import code_report
    from compileiq_lab.kernels import KernelRun

    if not tool_available("gcc"):
        pytest.skip("needs gcc")
    with pytest.raises(ConfigurationError, match="reads a cubin.*'dot'"):
        code_report(KernelRun("dot", "gcc", ["text_bytes"], measure=False), {})
    with pytest.raises(ConfigurationError, match="must compile to be read"):
        code_report(sgemm, {"defines": {"TILE": 64}})  # 4096 threads: the kernel's static_assert fails


def test_ptxas_lines_of_one_entry_in_a_module() -> None:
    from compileiq_lab.analysis.machine_code import _ptxas_lines

    log = """ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function 'axpy' for 'sm_90'
ptxas info    : Function properties for axpy
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 10 registers, used 0 barriers
ptxas info    : Compiling entry function 'to_int' for 'sm_90'
ptxas info    : Function properties for to_int
    8 bytes stack frame, 4 bytes spill stores, 4 bytes spill loads
ptxas info    : Used 24 registers, used 1 barriers, 512 bytes smem
ptxas info    : Compile time = 6.594 ms
"""
    mine = _ptxas_lines(log, "to_int")
    assert mine[0] == "ptxas info : Compiling entry function 'to_int' for 'sm_90'" and len(mine) == 4
    assert "Used 24 registers" in mine[-1] and not any("axpy" in line for line in mine)
    assert len(_ptxas_lines(log)) == 8 and _ptxas_lines(log, "absent") == _ptxas_lines(log)
