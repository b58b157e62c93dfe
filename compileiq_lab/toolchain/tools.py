"""Compiler executables: finding them (PATH, then the pinned CUDA wheels), running them safely, their versions."""

from __future__ import annotations

import functools
import os
import re
import shlex
import shutil
import signal
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from compileiq_lab.exceptions import ConfigurationError

__all__ = ["PROBE_TIMEOUT_S", "ToolResult", "cuda_include_dirs", "find_tool", "first_line", "keep_ends",
           "keep_lines", "kill_process_group", "probe_tool", "run_tool", "tool_version"]

_TAIL = 2000
#: Limit for a question to a compiler (``--version``, ``--help``, ``--list-gpu-arch``): a working one answers in
#: well under a second, 15 s covers a cold disk on a loaded machine; a hung one is killed and reported.
PROBE_TIMEOUT_S = 15.0
#: After a kill, how long to wait for the output pipes to close: a descendant that left the process group (its own
#: session) survives the kill and may hold them open.
_REAP_S = 2.0
#: Characters of a compiler's answer quoted in an error.
_QUOTE = 200


def _wheel_tool(name: str) -> str | None:
    """A CUDA tool installed from the pinned PyPI wheels (``nvidia/cu13/bin``), if any."""
    import importlib.util

    spec = importlib.util.find_spec("nvidia")
    for base in (spec.submodule_search_locations or []) if spec else []:
        candidate = Path(base) / "cu13" / "bin" / name
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    return None


def find_tool(name: str) -> str:
    """Path of a compiler executable (PATH first, then the CUDA wheels), or an error with an install hint."""
    path = shutil.which(name) or (_wheel_tool(name) if name in ("nvcc", "ptxas", "nvdisasm") else None)
    if path is None:
        hint = ("install the CUDA toolkit, or `pip install 'compileiq-lab[cuda]'` for pinned nvcc/ptxas wheels"
                if name in ("nvcc", "ptxas") else f"install {name} (e.g. apt-get install {name})")
        raise ConfigurationError(f"compiler {name!r} is not on PATH; {hint}")
    return path


def cuda_include_dirs() -> list[str]:
    """The CUDA toolkit's header folders, for compilers that do not know them (NVRTC): under ``$CUDA_HOME`` /
    ``$CUDA_PATH``, the ones nvcc itself passes (its ``--dryrun``, which sees through a wrapper script on PATH), next
    to nvcc, or in the CUDA wheels; each folder that holds ``cuda_runtime.h``, then its ``cccl`` folder (CUDA 13's
    ``cuda/std``, ``nv/target`` and CUB, which cooperative_groups.h needs), first found first."""
    import importlib.util

    env = [Path(os.environ[v]) for v in ("CUDA_HOME", "CUDA_PATH") if os.environ.get(v)]
    nvcc = shutil.which("nvcc") or _wheel_tool("nvcc")
    told = [Path(d) for d in _nvcc_include_dirs(nvcc)] if nvcc else []
    near = [Path(nvcc).resolve().parent.parent] if nvcc else []
    spec = importlib.util.find_spec("nvidia")
    wheels = [Path(b) / "cu13" for b in ((spec.submodule_search_locations or []) if spec else [])]
    found: list[str] = []
    for inc in [*_headers_of(env), *told, *_headers_of([*near, *wheels])]:
        for folder in (inc, inc / "cccl"):
            if (inc / "cuda_runtime.h").is_file() and folder.is_dir() and str(folder.resolve()) not in found:
                found.append(str(folder.resolve()))
    return found


def _headers_of(roots: Sequence[Path]) -> list[Path]:
    """The include folders a toolkit root may hold: ``include`` and ``targets/*/include``."""
    return [c for r in roots for c in [r / "include", *sorted(r.glob("targets/*/include"))]]


@functools.cache
def _nvcc_include_dirs(nvcc: str) -> tuple[str, ...]:
    """The include folders nvcc passes to its own front end (``-I`` and ``-isystem`` of its ``--dryrun``)."""
    try:
        res = subprocess.run([nvcc, "--dryrun", "-x", "cu", "-c", os.devnull, "-o", os.devnull], capture_output=True,
                             text=True, timeout=PROBE_TIMEOUT_S, check=False)
    except (OSError, subprocess.SubprocessError):
        return ()
    dirs: list[str] = []
    for line in re.findall(r"^#\$ (?:SYSTEM_)?INCLUDES=(.*)$", res.stdout + res.stderr, re.M):
        try:
            tokens = shlex.split(line)
        except ValueError:
            continue
        dirs += [t[2:] if t.startswith("-I") else t for t in tokens if t.startswith("-I") or not t.startswith("-")]
    return tuple(d for d in dirs if d)


def kill_process_group(proc: subprocess.Popen[Any]) -> None:
    """SIGKILL a child started with ``start_new_session=True`` together with everything it started."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        proc.kill()


@dataclass
class ToolResult:
    """Outcome of one compiler process."""

    returncode: int | None  # None: killed on timeout
    stdout: str
    stderr: str
    elapsed_s: float

    @property
    def timed_out(self) -> bool:
        return self.returncode is None

    def tail(self) -> str:
        """The compiler's output for an error row: whole up to ``_TAIL`` characters, else its start (the first error)
        and its end (the last one, the summary), the cut marked, each line cut first (``keep_lines``)."""
        return keep_lines((self.stderr + ("\n" + self.stdout if self.stdout.strip() else "")).strip(), _TAIL)


def keep_ends(text: str, limit: int) -> str:
    """``text`` cut to about ``limit`` characters, keeping its start and its end, with the cut marked."""
    if len(text) <= limit:
        return text
    head = limit * 2 // 3
    return f"{text[:head]} [... {len(text) - limit} characters ...] {text[-(limit - head):]}"


def keep_lines(text: str, limit: int, line_limit: int = 300) -> str:
    """``text`` cut to about ``limit`` characters as ``keep_ends`` cuts it, each line first cut to ``line_limit``
    (keeping its ends): a compiler names a C++ kernel by a symbol of thousands of characters, once per line, and the
    line that says why (``Insufficient registers ... Try ... 42 or higher``) is then kept, not cut out in the middle
    of the text."""
    if len(text) <= limit:
        return text
    return keep_ends("\n".join(keep_ends(line, line_limit) for line in text.splitlines()), limit)


def run_tool(argv: Sequence[str], timeout_s: float, cwd: str | Path | None = None) -> ToolResult:
    """Run a command (never through a shell) in its own process group; kill the group on timeout."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(list(argv), stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                            cwd=cwd, start_new_session=True, text=True, errors="replace")
    try:
        out, err = proc.communicate(timeout=timeout_s)
        return ToolResult(proc.returncode, out, err, time.perf_counter() - t0)
    except subprocess.TimeoutExpired:
        kill_process_group(proc)
        try:
            out, err = proc.communicate(timeout=_REAP_S)
        except subprocess.TimeoutExpired as late:  # a descendant in its own session holds the pipes: stop reading
            for pipe in (proc.stdout, proc.stderr):
                if pipe is not None:
                    pipe.close()
            proc.wait()
            out, err = _text(late.stdout), _text(late.stderr)
        return ToolResult(None, out, err, time.perf_counter() - t0)
    except BaseException:
        kill_process_group(proc)
        proc.wait()
        raise


def _text(data: str | bytes | None) -> str:
    return data.decode(errors="replace") if isinstance(data, bytes) else data or ""


def first_line(text: str) -> str:
    """The first non-blank line of a compiler's answer, cut to a length an error message can quote."""
    line = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    return line if len(line) <= _QUOTE else line[:_QUOTE] + "..."


def _fix(path: str) -> str:
    return f"fix: check the compiler at {path}, or put a working one first on PATH"


def probe_tool(argv: Sequence[str], timeout_s: float | None = None, cwd: str | Path | None = None) -> ToolResult:
    """Ask a compiler something (``--version``, ``--help``, a probe compile) with a short limit.

    Runs like ``run_tool`` (own process group, the whole group killed on timeout and reaped).

    Args:
        argv: The command; ``argv[0]`` is the compiler.
        timeout_s: The limit; default ``PROBE_TIMEOUT_S``.
        cwd: Folder to run in.

    Raises:
        ConfigurationError: If the compiler cannot be started or does not answer within the limit.
    """
    limit = PROBE_TIMEOUT_S if timeout_s is None else timeout_s
    path, name = str(argv[0]), os.path.basename(str(argv[0]))
    asked = " ".join([name, *argv[1:]])
    shown = asked if len(asked) <= _QUOTE else asked[:_QUOTE] + "..."
    try:
        res = run_tool(argv, limit, cwd)
    except OSError as exc:
        raise ConfigurationError(f"compiler {name!r} at {path} could not be started to answer `{shown}`: "
                                 f"{exc.strerror or exc}; {_fix(path)}") from exc
    if res.timed_out:
        raise ConfigurationError(f"compiler {name!r} at {path} must answer `{shown}` within {limit:g} s, but it hung "
                                 f"(killed with every process it started); {_fix(path)}")
    return res


_VERSION_CACHE: dict[str, str] = {}


def tool_version(exe: str) -> str:
    """The first version-looking line of ``exe --version`` (cached).

    Raises:
        ConfigurationError: If the compiler cannot be started or hangs (see ``probe_tool``).
    """
    if exe not in _VERSION_CACHE:
        res = probe_tool([exe, "--version"])
        lines = [ln for ln in (res.stdout + res.stderr).splitlines() if re.search(r"\d+\.\d+", ln)]
        _VERSION_CACHE[exe] = lines[-1].strip() if lines else "unknown"
    return _VERSION_CACHE[exe]
