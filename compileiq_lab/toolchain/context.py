"""The fixed build context of a kernel: include directories, -D defines and extra arguments (never searched)."""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from compileiq_lab.exceptions import ConfigurationError

__all__ = ["CUDA_ARG_PREFIXES", "DEFINE_VALUE", "EXTRA_ARG_PREFIXES", "BuildContext", "check_extra_arg",
           "parse_define"]

#: The CUDA compilers' own switches among the extra arguments below (a C kernel's compiler does not take them).
CUDA_ARG_PREFIXES = ("--expt-relaxed-constexpr", "--expt-extended-lambda", "--extended-lambda", "--disable-warnings",
                     "--diag-suppress=", "-diag-suppress=", "--diag-warn=", "--diag-error=", "--default-stream=",
                     "--use_fast_math", "-use_fast_math", "--ftz=", "--prec-div=",
                     "-prec-div=", "--prec-sqrt=", "-prec-sqrt=", "--fmad=", "--extra-device-vectorization",
                     "-extra-device-vectorization", "--restrict", "-restrict", "--jump-table-density=",
                     "-jump-table-density=")
#: Extra fixed arguments a build context may carry: language dialect, warnings and front-end switches that change
#: how the source is read or compiled (a C compiler's -f and -m, CUDA's math and vectorisation switches such as
#: --use_fast_math, which a CUDA run then leaves out of its search), never where outputs go or which other files or
#: tools are used.
EXTRA_ARG_PREFIXES = ("-std=", "--std=", "-U", "-w", "-W", "-f", "-m", "--Werror=", "-fpermissive",
                      "-Wno-deprecated-gpu-targets", *CUDA_ARG_PREFIXES)
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
#: What a define's value may hold (an ACF takes the same): nothing a shell or a compiler's own quoting acts on.
DEFINE_VALUE = _VALUE = re.compile(r"[A-Za-z0-9_.+-]*\Z")
_ARG = re.compile(r"[A-Za-z0-9_.+=,:-]+\Z")
#: Never in a build context: they write elsewhere, read other files or pick other tools.
_REFUSED = ("-o", "-Wl,", "-Wa,", "-Wp,", "-fplugin", "-fpass-plugin", "-fprofile-", "-fdump-", "-MF", "-MD", "-MMD",
            "-ftime-trace", "-fstack-usage", "-fsave-", "-fdebug-prefix-map", "-ffile-prefix-map")


def _fail(where: str, rule: str, got: Any, fix: str) -> ConfigurationError:
    return ConfigurationError(f"{where}: `{rule}` must hold, but got {got!r}. {fix}")


def check_extra_arg(tok: str, where: str = "build args") -> str:
    """Return ``tok`` if it is an allowed extra fixed argument, else raise.

    Raises:
        ConfigurationError: The argument is not on the allow-list (``EXTRA_ARG_PREFIXES``), or writes, reads or
            runs elsewhere (the message says what to use instead).
    """
    if not isinstance(tok, str) or not _ARG.match(tok):
        raise _fail(where, "an extra argument is one plain option of [A-Za-z0-9_.+=,:-]", tok,
                    "Pass one option per argument, without spaces, quotes or shell characters.")
    if tok.startswith(("-I", "-D")):
        raise _fail(where, "include directories and defines go in their own fields", tok,
                    "Use -I/--include-dir and --define NAME=VALUE (kernel.toml: [build] include_dirs, defines).")
    if tok.startswith(_REFUSED) or not tok.startswith(EXTRA_ARG_PREFIXES):
        raise _fail(where, f"an extra argument starts with one of {' '.join(EXTRA_ARG_PREFIXES)}", tok,
                    "Use a dialect, warning or front-end switch (e.g. -std=c++17, --expt-relaxed-constexpr); "
                    "searched controls belong in the search space, outputs and paths are chosen by the tool.")
    return tok


def parse_define(text: str, where: str = "--define", example: str = "--define BLOCK=256") -> tuple[str, str]:
    """``"NAME=VALUE"`` (or ``"NAME"``, meaning ``NAME=1``) as (name, value); ``where`` and ``example`` name the
    field it came from and how to fill it, for the error.

    Raises:
        ConfigurationError: The name is not an identifier or the value holds other than ``[A-Za-z0-9_.+-]``.
    """
    name, _, value = str(text).partition("=")
    value = value if "=" in str(text) else "1"
    if not _NAME.match(name) or not _VALUE.match(value):
        raise _fail(where, "a define is NAME=VALUE with NAME an identifier and VALUE of [A-Za-z0-9_.+-]", text,
                    f"Write e.g. {example}.")
    return name, value


@dataclass(frozen=True)
class BuildContext:
    """What every compile of a kernel gets, whatever the searched controls: include directories (absolute, resolved),
    fixed -D defines and extra arguments from an allow-list. Empty for a kernel that needs nothing.

    Attributes:
        include_dirs: Folders searched for headers, in order.
        defines: (NAME, VALUE) pairs, in order.
        args: Extra fixed arguments (see ``EXTRA_ARG_PREFIXES``).
    """

    include_dirs: tuple[Path, ...] = ()
    defines: tuple[tuple[str, str], ...] = ()
    args: tuple[str, ...] = ()

    @classmethod
    def make(cls, include_dirs: Iterable[str | os.PathLike[str]] = (), defines: Iterable[str] | Mapping[str, Any] = (),
             args: Sequence[str] = (), base: Path | None = None, where: str = "build") -> BuildContext:
        """A checked context: include directories resolved against ``base`` (default: the working folder) and
        existing; defines as ``NAME=VALUE`` strings or a mapping; args from the allow-list.

        Raises:
            ConfigurationError: A folder that does not exist, a malformed define, a refused argument.
        """
        dirs = []
        for d in include_dirs:
            path = Path(d).expanduser()
            path = (base / path if base is not None and not path.is_absolute() else path).resolve()
            if not path.is_dir():
                raise _fail(f"{where} include_dirs", "each include directory exists", os.fspath(d),
                            "Fix the path (relative paths are taken from the kernel's folder in kernel.toml, "
                            "from the working folder on the command line).")
            dirs.append(path)
        items = defines.items() if isinstance(defines, Mapping) else [parse_define(t, f"{where} defines")
                                                                     for t in defines]
        pairs = [parse_define(f"{k}={v}", f"{where} defines") for k, v in items]
        names = [n for n, _ in pairs]
        if len(set(names)) != len(names):
            raise _fail(f"{where} defines", "each define is given once", sorted({n for n in names
                                                                                  if names.count(n) > 1}),
                        "Keep one value per name.")
        return cls(tuple(dict.fromkeys(dirs)), tuple(pairs), tuple(check_extra_arg(a, f"{where} args") for a in args))

    def __bool__(self) -> bool:
        return bool(self.include_dirs or self.defines or self.args)

    def merged(self, other: BuildContext) -> BuildContext:
        """This context followed by ``other`` (its defines win over this one's of the same name)."""
        defines = dict(self.defines)
        defines.update(dict(other.defines))
        return BuildContext(tuple(dict.fromkeys(self.include_dirs + other.include_dirs)), tuple(defines.items()),
                            self.args + tuple(a for a in other.args if a not in self.args))

    def argv(self) -> list[str]:
        """The compiler arguments: ``-I<dir>`` each, ``-DNAME=VALUE`` each, then the extra arguments."""
        return [*(f"-I{d}" for d in self.include_dirs), *(f"-D{n}={v}" for n, v in self.defines), *self.args]

    def define_names(self) -> set[str]:
        """The names this context defines."""
        return {n for n, _ in self.defines}

    def relative_to(self, root: Path) -> dict[str, Any]:
        """The context as plain data with include directories relative to ``root`` (for an ACF or a run header).

        Raises:
            ConfigurationError: An include directory that is not inside ``root``.
        """
        rel = []
        for d in self.include_dirs:
            try:
                rel.append(Path(os.path.relpath(d, root)).as_posix())
            except ValueError:  # another drive
                raise _fail("build include_dirs", f"include directories lie under {root}", str(d),
                            "Keep the headers inside the kernel's project.") from None
        return {"include_dirs": rel, "defines": dict(self.defines), "args": list(self.args)}

    def key(self) -> str:
        """A stable text of the context (for cache keys and run matching)."""
        return "\0".join(self.argv())
