"""A compiler's long output in an error row keeps its first error and its end."""

from compileiq_lab.toolchain.tools import ToolResult


def test_a_long_error_keeps_its_first_error_and_its_end():
    first = "ptxas /tmp/x.ptx, line 1944; error   : Feature '.m16n8k16' requires .target sm_80 or higher"
    lines = [first] + [f"ptxas /tmp/x.ptx, line {2000 + i}; error   : Feature '.m16n8k16' requires .target sm_80 "
                       "or higher" for i in range(300)] + ["ptxas fatal   : Ptx assembly aborted due to errors"]
    said = ToolResult(255, "", "\n".join(lines), 0.1).tail()
    assert said.startswith(first) and said.endswith(lines[-1]) and "characters ...]" in said
    assert len(said) < 2100
    assert ToolResult(1, "out", "err", 0.1).tail() == "err\nout"
