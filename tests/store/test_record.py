"""A stored evaluation's failure said by the line that gives its reason."""

from __future__ import annotations

import pytest

from compileiq_lab.store import EvalRecord

PTXAS = ("ptxas info    : Overriding maximum register limit 256 for 'k' with  47 of maxrregcount option\n"
         "ptxas fatal   : (C7602) Insufficient registers (47) to compile instruction at line 1025 in function k. "
         "Try to compile with register target of 58 or higher.\n"
         "ptxas fatal   : Ptx assembly aborted due to errors")


@pytest.mark.parametrize(("error", "line"), [
    (PTXAS, "ptxas fatal   : (C7602) Insufficient registers (47) to compile instruction at line 1025 in function k. "
            "Try to compile with register target of 58 or higher."),
    ("k.cu(3): warning #177-D: variable \"error\" was declared but never referenced\n\n"
     "k.cu(9): error: identifier \"y\" is undefined", "k.cu(9): error: identifier \"y\" is undefined"),
    ("Traceback (most recent call last):\n  File \"x.py\", line 1\nZeroDivisionError: division by zero",
     "ZeroDivisionError: division by zero"),
    ("\n  the output differs from the reference at 3 of 1024 elements\nmax abs diff 0.5",
     "the output differs from the reference at 3 of 1024 elements"),
    ("", ""),
])
def test_the_error_line_skips_what_precedes_the_reason(error, line):
    rec = EvalRecord(1, 0, "k", {}, "compile_error", error, None, 0.1, 0.0)
    assert rec.error_line == line


def test_a_summary_line_yields_to_the_error_it_sums_up():
    error = PTXAS.replace("ptxas fatal   : (C7602)", "ptxas error   : (C7602)").split("\n")
    rec = EvalRecord(1, 0, "k", {}, "compile_error", "\n".join([error[0], error[2], error[1]]), None, 0.1, 0.0)
    assert rec.error_line.startswith("ptxas error   : (C7602) Insufficient registers (47)")
