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


def test_a_line_that_names_a_long_symbol_keeps_its_reason():
    """cutlass' wgmma example: ptxas names the kernel by a symbol of 1,500 characters in each line, so the line that
    says why (the register target) sat in the cut of the whole text; each line is cut first now."""
    symbol = "_Z11gemm_device" + "NS0_6LayoutINS1_IJNS1_IJNS3_ILi8EEENS3_ILi16EEEEEE" * 30
    err = (f"ptxas info    : Overriding maximum register limit 256 for '{symbol}' with  39 of maxrregcount option\n"
           f"ptxas fatal   : (C7602) Insufficient registers (39) to compile instruction at line 1025 in function "
           f"{symbol}. Try to compile with register target of 42 or higher.\n"
           "ptxas fatal   : Ptx assembly aborted due to errors")
    said = ToolResult(255, "", err, 0.1).tail()
    assert len(said) < 2100 and "Insufficient registers (39)" in said and "register target of 42 or higher" in said
    assert said.endswith("ptxas fatal   : Ptx assembly aborted due to errors") and "maxrregcount option" in said
