"""Which compiler arguments are safe to take from a file: nothing that writes, reads or runs elsewhere."""

from __future__ import annotations

import re
import reprlib
from typing import Any

from compileiq_lab.exceptions import ConfigurationError

__all__ = ["DEFINE", "MAX_ARG_CHARS", "acf_error", "check_argument"]

#: The longest argument an ACF may hold: the longest a catalog renders is 40 characters
#: ("--param=max-completely-peeled-insns=1600"); the bound keeps the checks of a crafted one short.
MAX_ARG_CHARS = 4096

#: A -D knob as an ACF may hold it: NAME=VALUE, identifier name, plain value.
DEFINE = re.compile(r"-D[A-Za-z_][A-Za-z0-9_]*=[A-Za-z0-9_.+-]*\Z")
_SHELL = set(";|&$`<>(){}*?!~\"'\\") | {"\n", "\r", "\t", " ", "\x00"}
# options that change outputs, paths, the host compiler/linker, or pull in other files
_PATH_EXACT = {"-run", "-run-args", "-ccbin", "-Xlinker", "--linker-options", "-Xcompiler", "--compiler-options",
               "-keep", "--keep", "-keep-dir", "--dependency-output", "-MF", "-MT", "-MQ", "-MD", "-MMD",
               "-Xclang", "-Xnvlink", "-Xcudafe", "-Xarchive", "-E", "-aux-info", "-fstack-usage", "-time"}
_PATH_PREFIX = ("-o", "--output-", "--run", "--options-file", "--compiler-bindir", "-Wl,", "-B", "--sysroot",
                "-isysroot", "-include", "-imacros", "-specs", "--pre-include", "--keep-dir", "-save-temps",
                "-fplugin", "-fpass-plugin", "-fprofile-", "-fdump-", "-time=", "--time", "--fdevice-time-trace",
                "-fdevice-time-trace", "-ftime-trace", "-aux-info", "-Wa,", "-Wp,", "-Xclang", "-Xnvlink")
_WRAPPERS = ("-Xptxas=", "--ptxas-options=")
_DIR_PREFIX = ("-I", "-isystem", "-iquote", "-idirafter", "-iprefix", "-iwithprefix", "-L", "--include-path",
               "--library-path", "--system-include")


def acf_error(where: str, rule: str, got: Any, fix: str) -> ConfigurationError:
    """A ConfigurationError naming the ACF entry, the rule, the value received and the fix."""
    try:
        shown = repr(got[:201] if isinstance(got, str) else got)
    except RecursionError:  # data nested past the recursion limit (parsed JSON never is: the parser refuses it)
        shown = reprlib.repr(got)
    if len(shown) > 200:
        shown = shown[:200] + "..."
    return ConfigurationError(f"ACF {where}: `{rule}` must hold, but got {shown}. {fix}")


def _unwrapped(tok: str) -> str:
    """``tok`` without its leading -Xptxas=/--ptxas-options= wrappers (linear however many there are)."""
    start = 0
    while True:
        wrapper = next((w for w in _WRAPPERS if tok.startswith(w, start) and len(tok) - start > len(w)), None)
        if wrapper is None:
            return tok[start:]
        start += len(wrapper)


def check_argument(where: str, tok: str) -> None:
    """Reject argument classes that would change outputs or paths, read other files, or reach a shell.

    Options handed to another tool (-Xptxas=A,B) are checked like the tool's own: each of A and B, unwrapped.
    """
    if len(tok) > MAX_ARG_CHARS:
        raise acf_error(where, f"an argument is at most MAX_ARG_CHARS = {MAX_ARG_CHARS} characters", tok,
                        f"It holds {len(tok)} characters; an ACF holds plain compiler options.")
    _check_plain(where, tok)
    inner = _unwrapped(tok)
    if len(inner) == len(tok):  # not handed to another tool
        _check_option(where, tok)
        return
    for part in inner.split(","):  # once split, no part holds a comma: unwrapping it again is all that is left
        leaf = _unwrapped(part)
        _check_plain(where, leaf)
        _check_option(where, leaf)


def _check_plain(where: str, tok: str) -> None:
    bad = sorted(set(tok) & _SHELL)
    if bad or not tok:
        raise acf_error(where, "arguments hold no shell metacharacters, whitespace, quotes or NUL and are non-empty",
                    tok, f"Remove {bad or 'the empty argument'}; an ACF holds plain compiler options only.")
    if tok.startswith("@"):
        raise acf_error(where, "no @file response files", tok, "Write the options themselves, not a file of them.")


def _check_option(where: str, tok: str) -> None:
    name = tok.split("=", 1)[0]
    if name in _PATH_EXACT or tok.startswith(_PATH_PREFIX):
        raise acf_error(where, "no option that changes outputs, paths, the host compiler/linker or reads other files",
                    tok, "Remove it; the output path and tools are chosen by whoever compiles.")
    if tok.startswith(_DIR_PREFIX):
        raise acf_error(where, "no -I/-isystem/-L search paths (a compile from an ACF uses the kernel folder only)",
                    tok, "Remove it.")
    if tok.startswith("-D") and not DEFINE.match(tok):
        raise acf_error(where, "-D arguments are -DNAME=VALUE with NAME an identifier and VALUE of [A-Za-z0-9_.+-]",
                    tok, "Fix the knob name or value.")
