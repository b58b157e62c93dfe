"""A compiler's long output in an error row keeps its first error, whole lines and its end."""

from compileiq_lab.toolchain.tools import ToolResult, excerpt


def test_a_long_error_keeps_its_first_and_last_lines_whole():
    first = "ptxas /tmp/x.ptx, line 1944; error   : Feature '.m16n8k16' requires .target sm_80 or higher"
    lines = [first] + [f"ptxas /tmp/x.ptx, line {2000 + i}; error   : Feature '.m16n8k16' requires .target sm_80 "
                       "or higher" for i in range(300)] + ["ptxas fatal   : Ptx assembly aborted due to errors"]
    said = ToolResult(255, "", "\n".join(lines), 0.1).tail()
    out = said.splitlines()
    assert out[0] == first and out[-1] == lines[-1]
    assert len(said) <= 2000 and all(line in lines for line in out if not line.startswith("[..."))
    left_out = next(line for line in out if line.startswith("[..."))
    assert left_out == f"[... {len(lines) - len(out) + 1} line(s) left out ...]"


def test_short_output_is_kept_as_it_is_and_a_long_line_is_cut_marked():
    assert ToolResult(1, "out", "err", 0.1).tail() == "err\nout"
    cut = excerpt("x" * 5000 + "\nlast line", 100)
    assert cut.startswith("x" * 49 + "…") and cut.endswith("\nlast line") and len(cut) <= 100
