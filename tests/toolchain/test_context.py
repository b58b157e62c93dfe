"""The build context: include folders, fixed defines and allowed extra arguments."""

from __future__ import annotations

from pathlib import Path

import pytest

from compileiq_lab.exceptions import ConfigurationError
from compileiq_lab.toolchain.context import BuildContext, check_extra_arg, parse_define


def test_make_resolves_folders_and_renders_argv(tmp_path: Path) -> None:
    (tmp_path / "inc").mkdir()
    ctx = BuildContext.make(["inc", "inc"], ["BLOCK=256", "FAST"], ["-std=c++17", "--expt-relaxed-constexpr"],
                            base=tmp_path)
    assert ctx.include_dirs == ((tmp_path / "inc").resolve(),)  # given twice, kept once
    assert ctx.argv() == [f"-I{(tmp_path / 'inc').resolve()}", "-DBLOCK=256", "-DFAST=1", "-std=c++17",
                          "--expt-relaxed-constexpr"]
    assert ctx.relative_to(tmp_path / "inc") == {"include_dirs": ["."], "defines": {"BLOCK": "256", "FAST": "1"},
                                                 "args": ["-std=c++17", "--expt-relaxed-constexpr"]}
    assert not BuildContext() and ctx


def test_merged_later_defines_win(tmp_path: Path) -> None:
    a = BuildContext.make([], {"N": "1", "M": "2"}, ["-std=c++17"])
    b = BuildContext.make([tmp_path], {"N": "3"}, ["-std=c++17", "-w"])
    m = a.merged(b)
    assert dict(m.defines) == {"N": "3", "M": "2"} and m.args == ("-std=c++17", "-w")
    assert m.include_dirs == (tmp_path.resolve(),)


@pytest.mark.parametrize("bad", ["-o", "-ofile", "-Wl,-rpath,x", "-fplugin=x.so", "--options-file=f", "-ccbin",
                                 "-Ifoo", "-DX=1", "-include", "a b", "-std=c++17;rm", "-Xcompiler", "foo"])
def test_refused_extra_arguments_say_why(bad: str) -> None:
    with pytest.raises(ConfigurationError, match="must hold"):
        check_extra_arg(bad)


def test_allowed_extra_arguments() -> None:
    for ok in ["-std=c++17", "--expt-relaxed-constexpr", "-Wno-deprecated-gpu-targets", "-UNDEBUG", "-w",
               "--diag-suppress=177", "-fno-strict-aliasing"]:
        assert check_extra_arg(ok) == ok


def test_bad_defines_and_missing_folders(tmp_path: Path) -> None:
    assert parse_define("X=a.b-1") == ("X", "a.b-1")
    for bad in ["1X=2", "X=$(y)", "X=a b", ""]:
        with pytest.raises(ConfigurationError, match="NAME=VALUE"):
            parse_define(bad)
    with pytest.raises(ConfigurationError, match="each include directory exists"):
        BuildContext.make(["nowhere"], base=tmp_path)
    with pytest.raises(ConfigurationError, match="each define is given once"):
        BuildContext.make([], ["A=1", "A=2"])
