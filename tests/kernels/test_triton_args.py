"""The command line of a Triton kernel checked by its form: its reference, its signature, its launch options."""

from __future__ import annotations

import pytest

from compileiq_lab.kernels.triton_args import (
    TRITON_PREFIX,
    check_signature_text,
    parse_signature,
    parse_triton_ref,
    triton_usage_error,
)


def test_parse_triton_ref_resolves_the_file_relative_to_the_current_folder(tmp_path):
    (tmp_path / "kernels").mkdir()
    (tmp_path / "kernels" / "my_mod.py").write_text("X = 1\n")
    assert parse_triton_ref("triton:kernels/my_mod.py:matmul_kernel") == (
        (tmp_path / "kernels" / "my_mod.py").resolve(), "matmul_kernel")
    absolute = (tmp_path / "kernels" / "my_mod.py").resolve()
    assert parse_triton_ref(f"{TRITON_PREFIX}{absolute}:f") == (absolute, "f")


@pytest.mark.parametrize(("ref", "said"), [
    ("my_mod.py:f", "a Triton kernel is named 'triton:path/to/file.py:function'"),
    ("triton:my_mod.py", "Add ':' and the @triton.jit function's name"),
    ("triton:my_mod.py:", "is a Python function name"),
    ("triton:my_mod.py:1f", "is a Python function name"),
    ("triton:my_mod.py:class", "is a Python function name"),
    ("triton:notes.txt:f", "the file is a Python file (.py)"),
    ("triton:missing.py:f", "the file exists"),
])
def test_parse_triton_ref_errors_say_the_rule_the_value_and_the_fix(tmp_path, ref, said, one_line_error):
    (tmp_path / "my_mod.py").write_text("X = 1\n")
    (tmp_path / "notes.txt").write_text("")
    text = one_line_error(parse_triton_ref, ref)
    assert said in text and text.startswith("Triton kernel: ")
    assert "e.g. triton:" in text or "Check the path" in text


def test_parse_signature_positional_and_named():
    params = ["x_ptr", "y_ptr", "n"]
    assert parse_signature("*fp32, *fp16, i32", params) == {"x_ptr": "*fp32", "y_ptr": "*fp16", "n": "i32"}
    named = parse_signature("n=i64, y_ptr=*kbf16:16, x_ptr=*fp8e4nv", params)
    assert named == {"x_ptr": "*fp8e4nv", "y_ptr": "*kbf16:16", "n": "i64"}
    assert list(named) == params  # the function's order, whatever the text's
    assert parse_signature("i32:16", ["n"]) == {"n": "i32:16"}
    assert parse_signature("", []) == {}


@pytest.mark.parametrize(("text", "said"), [
    ("*fp32,i32", "one type per runtime parameter of the function (x_ptr, y_ptr, n), in order"),
    ("*fp32,*fp32,i32,i32", "It has 3 runtime parameter(s) and the signature 4 type(s)"),
    ("*fp32,*float,i32", "y_ptr has type '*float'"),
    ("*fp32,*fp32,fp32:16", "':16' hints a pointer or an integer only"),
    ("x_ptr=*fp32,*fp32,n=i32", "all types are given in order or all as name=type"),
    ("x_ptr=*fp32,y=*fp32,n=i32", "every name is a runtime parameter of the function (x_ptr, y_ptr, n)"),
    ("x_ptr=*fp32,x_ptr=*fp32,n=i32", "every parameter is named once"),
    ("x_ptr=*fp32,n=i32", "Add y_ptr=<type>"),
])
def test_parse_signature_errors_name_the_functions_parameters(text, said, one_line_error):
    message = one_line_error(parse_signature, text, ["x_ptr", "y_ptr", "n"])
    assert said in message and message.startswith("signature: ")


@pytest.mark.parametrize(("text", "said"), [
    ("*fp32,,i32", "none empty"),
    ("", "none empty"),
    ("*fp32,*float", "a parameter has type '*float'"),
    ("x=*fp32,n=f32", "n has type 'f32'"),
    ("x=*fp32,i32", "all types are given in order or all as name=type"),
    ("*fp32,fp32:16", "':16' hints a pointer or an integer only"),
])
def test_a_signature_no_kernel_takes_is_refused_without_its_function(text, said, one_line_error):
    message = one_line_error(check_signature_text, text)
    assert said in message and message.startswith("signature: ")


def test_a_signature_any_kernel_might_take_passes_without_its_function():
    check_signature_text("*fp32:16, *kbf16, i32:16, fp8e5")
    check_signature_text("x=*fp32, n=i64")


@pytest.mark.parametrize(("ref", "signature", "num_warps", "said"), [
    ("triton:k.py", None, None, "Add ':' and the @triton.jit function's name"),
    ("triton:k.py:f", "*fp32,,i32", None, "none empty"),
    ("triton:k.py:f", None, 3, "num_warps is a power of 2 from 1 to 32"),
    ("triton:k.py:f", None, 64, "num_warps is a power of 2 from 1 to 32"),
])
def test_a_triton_command_line_wrong_whatever_its_file_is_said(ref, signature, num_warps, said):
    message = triton_usage_error(ref, signature, num_warps)
    assert message is not None and said in message


def test_a_triton_command_line_is_checked_by_its_form_only(tmp_path):
    # the file need not exist here: whether it does is the kernel's question, not the command line's
    assert triton_usage_error(f"triton:{tmp_path / 'absent.py'}:f", "*fp32,i32", 8) is None
