"""Which compiler arguments are safe to take from a file: nothing that writes, reads or runs elsewhere."""

from __future__ import annotations

import re
from typing import Any

from compileiq_lab.exceptions import ConfigurationError

__all__ = ["DEFINE", "acf_error", "check_argument"]

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
    shown = repr(got) if len(repr(got)) <= 200 else repr(got)[:200] + "..."
    return ConfigurationError(f"ACF {where}: `{rule}` must hold, but got {shown}. {fix}")


def check_argument(where: str, tok: str) -> None:
    """Reject argument classes that would change outputs or paths, read other files, or reach a shell."""
    bad = sorted(set(tok) & _SHELL)
    if bad or not tok:
        raise acf_error(where, "arguments hold no shell metacharacters, whitespace, quotes or NUL and are non-empty",
                    tok, f"Remove {bad or 'the empty argument'}; an ACF holds plain compiler options only.")
    if tok.startswith("@"):
        raise acf_error(where, "no @file response files", tok, "Write the options themselves, not a file of them.")
    for wrapper in _WRAPPERS:  # options handed to another tool are checked like the tool's own
        if tok.startswith(wrapper) and len(tok) > len(wrapper):
            for inner in tok[len(wrapper):].split(","):
                check_argument(where, inner)
            return
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
