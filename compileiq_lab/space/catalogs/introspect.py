"""Check a catalog against the installed compiler: its version and the options its help lists."""

from __future__ import annotations

import functools
import logging
import os
import re
from collections.abc import Mapping

from compileiq_lab.exceptions import ConfigurationError
from compileiq_lab.space.catalogs.base import Catalog, Control
from compileiq_lab.toolchain.tools import ToolResult, first_line, probe_tool

__all__ = ["STAGE_EXECUTABLES", "active", "compiler_version", "help_options"]

log = logging.getLogger(__name__)

#: Executable that runs each CUDA stage; "c" controls go to the catalog's own compiler.
STAGE_EXECUTABLES = {"frontend": "nvcc", "backend": "ptxas"}

_INSTALL_HINTS = {
    "nvcc": "install the CUDA toolkit and put its bin/ on PATH",
    "ptxas": "install the CUDA toolkit and put its bin/ on PATH",
    "gcc": "install gcc (e.g. `apt-get install gcc`)",
    "clang": "install clang (e.g. `apt-get install clang`)",
}
_HELP_ARGS = {
    "nvcc": (("--help",),),
    "ptxas": (("--help",),),
    "gcc": (("--help",), ("--help=optimizers",), ("--help=params",), ("--help=target",), ("--help=common",)),
    # clang --help leaves out -O, -march and more; --autocomplete=- lists the whole driver table
    "clang": (("--help",), ("--autocomplete=-",)),
}
_LLVM_HELP_ARGS = ("-mllvm", "--help-hidden", "-c", "-x", "c", os.devnull, "-o", os.devnull)
#: Options a driver accepts but its --help does not list, with a probe argv checked by a dry run.
_UNDOCUMENTED = {"nvcc": {"-Xcicc": ("-Xcicc", "-O3")}}
_NVCC_DRYRUN = ("--dryrun", "-ptx", "-x", "cu", os.devnull, "-o", os.devnull)

# "--long-name <arg>   (-short)" (nvcc, ptxas) or "  -fname=[a|b]  Text" (gcc, clang)
_OPTION_RE = re.compile(r"^ {0,2}(-{1,2}[A-Za-z0-9#][^\s,]*)")
_SHORT_RE = re.compile(r"\s\((-[A-Za-z0-9][^\s)]*)\)\s*$")
_LLVM_RE = re.compile(r"^\s+-{1,2}([A-Za-z0-9][\w.\-]*)")


def _resolve(exe: str) -> str | None:
    from compileiq_lab.exceptions import ConfigurationError
    from compileiq_lab.toolchain.tools import find_tool

    try:
        path = find_tool(exe)  # PATH, then the pinned CUDA wheels
    except ConfigurationError:
        return None
    return os.path.realpath(path)


def _run(argv: list[str]) -> ToolResult:
    """Ask the compiler (limit ``PROBE_TIMEOUT_S``; a hang or a compiler that cannot start raises
    ConfigurationError)."""
    return probe_tool(argv)


@functools.lru_cache(maxsize=64)
def _version_text(path: str, mtime: float) -> str:
    proc = _run([path, "--version"])
    return proc.stdout + proc.stderr


def _family(path: str, mtime: float) -> str:
    """Which compiler an executable is: "nvcc", "ptxas", "clang", "gcc" or "unknown"."""
    text = _version_text(path, mtime)
    if "clang version" in text:
        return "clang"
    if "Ptx optimizing assembler" in text:
        return "ptxas"
    if "Cuda compiler driver" in text:
        return "nvcc"
    if "Free Software Foundation" in text or re.search(r"\bgcc\b", text):
        return "gcc"
    return "unknown"


def _stat(exe: str) -> tuple[str, float] | None:
    path = _resolve(exe)
    if path is None:
        return None
    try:
        return path, os.stat(path).st_mtime
    except OSError:
        return None


def compiler_version(exe: str) -> str | None:
    """The installed compiler's version as "major.minor" (e.g. "13.0" for nvcc, "12.2" for gcc).

    Args:
        exe: Executable name or path.

    Returns:
        The version, or None when the executable is missing or prints no version.
    """
    found = _stat(exe)
    if found is None:
        return None
    return _cached_version(*found)


@functools.lru_cache(maxsize=64)
def _cached_version(path: str, mtime: float) -> str | None:
    family = _family(path, mtime)
    text = _version_text(path, mtime)
    if family == "gcc":
        proc = _run([path, "-dumpfullversion"])
        if proc.returncode == 0:
            text = proc.stdout
    patterns = {"clang": r"clang version (\d+)\.(\d+)", "nvcc": r"release (\d+)\.(\d+)",
                "ptxas": r"release (\d+)\.(\d+)"}
    m = re.search(patterns.get(family, r"(\d+)\.(\d+)"), text)
    return f"{int(m.group(1))}.{int(m.group(2))}" if m else None


def help_options(exe: str) -> set[str]:
    """Option names the installed compiler documents (long and short forms, both as typed).

    gcc adds ``--help=optimizers|params|target|common``; parameters read ``--param=NAME``.
    clang adds its driver table and ``-mllvm -NAME`` for each LLVM option. ``-fno-X`` forms
    are not listed separately: ``active`` looks ``-fX`` up for them.

    Args:
        exe: Executable name or path.

    Raises:
        ConfigurationError: If the executable is not installed, cannot be started, hangs, or lists no option
            this parser recognises (a broken compiler must not become an empty catalog).
    """
    found = _stat(exe)
    if found is None:
        raise _missing(exe)
    return set(_cached_options(*found))


@functools.lru_cache(maxsize=64)
def _cached_options(path: str, mtime: float) -> frozenset[str]:
    family = _family(path, mtime)
    opts: set[str] = set()
    answers: list[tuple[tuple[str, ...], ToolResult]] = []
    for args in _HELP_ARGS.get(family, (("--help",),)):
        proc = _run([path, *args])
        answers.append((args, proc))
        opts |= _parse_help(proc.stdout + "\n" + proc.stderr)
    if not opts:
        raise _no_options(path, answers[0][0], answers[0][1])
    if family == "clang":
        opts |= _llvm_options(path)
    for option, probe in _UNDOCUMENTED.get(family, {}).items():
        if option not in opts and _nvcc_accepts(path, probe):
            opts.add(option)
    log.debug("%s (%s): %d options", path, family, len(opts))
    return frozenset(opts)


def _parse_help(text: str) -> set[str]:
    out: set[str] = set()
    for line in text.splitlines():
        m = _OPTION_RE.match(line)
        if m is None:
            continue
        names = [m.group(1)] + _SHORT_RE.findall(line)  # nvcc/ptxas: "(-short)" ends the line
        for name in names:
            out.update(_spellings(name))
    return out


def _spellings(name: str) -> set[str]:
    """``--param=max-unroll-times=<0,65536>`` -> {itself, ``...times=``, ``...times``}."""
    stem = re.split(r"[<\[{]", name, maxsplit=1)[0]
    out = {name, stem, stem[:-1] if stem.endswith("=") else stem}
    return {s for s in out if len(s) > 1}


def _llvm_options(path: str) -> set[str]:
    proc = _run([path, *_LLVM_HELP_ARGS])
    if proc.returncode != 0:
        log.info("%s: cannot list LLVM options (-mllvm --help-hidden); -mllvm controls go unchecked", path)
        return {"-mllvm -*"}
    return {f"-mllvm -{m.group(1)}" for m in map(_LLVM_RE.match, proc.stdout.splitlines()) if m}


def _nvcc_accepts(path: str, probe: tuple[str, ...]) -> bool:
    proc = _run([path, *_NVCC_DRYRUN, *probe])
    return proc.returncode == 0 and "Unknown option" not in proc.stderr


def _no_options(path: str, args: tuple[str, ...], proc: ToolResult) -> ConfigurationError:
    said = first_line(proc.stdout + "\n" + proc.stderr)
    printed = f"printed {said!r}" if said else "printed nothing"
    return ConfigurationError(
        f"the compiler at {path} must list its options in `{os.path.basename(path)} {' '.join(args)}`, but it "
        f"printed no options this check recognises (exit code {proc.returncode}; {printed}), so none of its "
        f"controls can be checked; fix: check the compiler at {path}, or put a working one first on PATH")


def _missing(exe: str) -> ConfigurationError:
    hint = _INSTALL_HINTS.get(os.path.basename(exe), f"install {exe} or pass its full path")
    return ConfigurationError(f"compiler {exe!r} must be installed to check a catalog against it, "
                              f"but it is not on PATH; fix: {hint}")


def _version_tuple(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", version))


def _executables(catalog: Catalog, exe: str | Mapping[str, str] | None) -> dict[str, str]:
    stages = sorted({c.stage for c in catalog.controls})
    if isinstance(exe, str):
        if len(stages) > 1:
            raise ConfigurationError(
                f"exe must name one compiler per stage for catalog {catalog.compiler!r}, which spans "
                f"stages {stages}, but got the single executable {exe!r}; fix: pass a mapping such as "
                f"{ {s: STAGE_EXECUTABLES.get(s, catalog.compiler) for s in stages} }")
        return dict.fromkeys(stages, exe)
    given = dict(exe or {})
    return {s: given.get(s) or STAGE_EXECUTABLES.get(s) or catalog.compiler for s in stages}


def _reason(control: Control, exe: str, options: set[str], version: str | None) -> str | None:
    option = control.option
    candidates = {option, option.replace("-fno-", "-f", 1), option.replace("-mno-", "-m", 1)}
    if option.startswith("-mllvm ") and "-mllvm -*" in options:
        candidates.add("-mllvm -*")
    if not candidates & options:
        return f"{exe} does not list option {option} in its help (the installed compiler lacks it)"
    if control.since is not None:
        if version is None:
            return f"needs {exe} >= {control.since}, but the installed version is unknown"
        if _version_tuple(version) < _version_tuple(control.since):
            return f"needs {exe} >= {control.since}, installed {version}"
    return None


def active(catalog: Catalog, exe: str | Mapping[str, str] | None = None,
           ) -> tuple[Catalog, list[tuple[str, str]]]:
    """The catalog restricted to the controls the installed compiler supports.

    A control is kept when its ``option`` is in the compiler's help and its ``since`` is not newer
    than the installed version.

    Args:
        catalog: The catalog to check.
        exe: Executable (name or path) for a one-stage catalog, or a mapping {stage: executable};
            by default "frontend" -> nvcc, "backend" -> ptxas, "c" -> ``catalog.compiler``.

    Returns:
        The restricted catalog (conflicts among kept controls only) and (control name, reason)
        for each control left out.

    Raises:
        ConfigurationError: If a needed compiler is not installed.
    """
    exes = _executables(catalog, exe)
    facts = {stage: (e, help_options(e), compiler_version(e)) for stage, e in exes.items()}
    left_out: list[tuple[str, str]] = []
    for control in catalog.controls:
        reason = _reason(control, *facts[control.stage])
        if reason is not None:
            left_out.append((control.name, reason))
            log.info("%s catalog: leaving out %r: %s", catalog.compiler, control.name, reason)
    dropped = {name for name, _ in left_out}
    kept = [c.name for c in catalog.controls if c.name not in dropped]
    return catalog.select(names=kept, include_unsafe=True), left_out
