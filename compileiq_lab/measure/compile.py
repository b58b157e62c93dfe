"""Compiler calls that are fast and safe: argv only, timeouts that kill the process group, caches."""

from __future__ import annotations

import hashlib
import logging
import os
import re
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence

from compileiq_lab.exceptions import ConfigurationError
from compileiq_lab.toolchain.tools import find_tool, kill_process_group

__all__ = ["ToolResult", "run_tool", "find_tool", "tool_version", "CudaCompiler", "parse_ptxas_verbose",
           "CompileOutcome", "write_atomic", "build", "build_cached"]

log = logging.getLogger(__name__)
_TAIL = 2000


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
        """The last lines of the compiler's output (for error rows)."""
        text = (self.stderr + ("\n" + self.stdout if self.stdout.strip() else "")).strip()
        return text[-_TAIL:]


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
        out, err = proc.communicate()
        return ToolResult(None, out, err, time.perf_counter() - t0)
    except BaseException:
        kill_process_group(proc)
        proc.wait()
        raise


_VERSION_CACHE: dict[str, str] = {}


def tool_version(exe: str) -> str:
    """The first version-looking line of ``exe --version`` (cached)."""
    if exe not in _VERSION_CACHE:
        res = run_tool([exe, "--version"], 30)
        lines = [ln for ln in (res.stdout + res.stderr).splitlines() if re.search(r"\d+\.\d+", ln)]
        _VERSION_CACHE[exe] = lines[-1].strip() if lines else "unknown"
    return _VERSION_CACHE[exe]


_PTXAS_PATTERNS = {
    "registers": r"Used (\d+) registers",
    "stack_bytes": r"(\d+) bytes stack frame",
    "spill_store_bytes": r"(\d+) bytes spill stores",
    "spill_load_bytes": r"(\d+) bytes spill loads",
    "barriers": r"used (\d+) barriers",
    "smem_bytes": r"(\d+) bytes smem",
    "cmem_bytes": r"(\d+) bytes cmem\[0\]",
}


def parse_ptxas_verbose(text: str, entry: str | None = None) -> dict[str, float]:
    """Per-kernel metrics from ``ptxas -v`` output (of ``entry``, or the maximum over all kernels).

    Returns registers, stack/spill/smem/cmem bytes, barriers, spill_bytes (stores + loads) and
    ptxas_time_ms when present.
    """
    blocks = re.split(r"Compiling entry function '([^']+)'", text)
    per_entry: dict[str, dict[str, float]] = {}
    for name, body in zip(blocks[1::2], blocks[2::2]):
        per_entry[name] = {k: float(m.group(1)) for k, p in _PTXAS_PATTERNS.items() if (m := re.search(p, body))}
        # non-inlined device functions print their own "Function properties" block: add their spills
        for k in ("spill_store_bytes", "spill_load_bytes"):
            found = [float(x) for x in re.findall(_PTXAS_PATTERNS[k], body)]
            if found:
                per_entry[name][k] = sum(found)
        stacks = [float(x) for x in re.findall(_PTXAS_PATTERNS["stack_bytes"], body)]
        if stacks:
            per_entry[name]["stack_bytes"] = max(stacks)
    if entry is not None and per_entry and entry not in per_entry:
        log.warning("ptxas -v printed no kernel named %r (found %s); using the worst over all kernels",
                    entry, sorted(per_entry))
    chosen = [per_entry[entry]] if entry in per_entry else list(per_entry.values())
    metrics: dict[str, float] = {}
    for k in _PTXAS_PATTERNS:
        vals = [d[k] for d in chosen if k in d]
        if vals:
            metrics[k] = max(vals)
    metrics["spill_bytes"] = metrics.get("spill_store_bytes", 0.0) + metrics.get("spill_load_bytes", 0.0)
    times = [float(x) for x in re.findall(r"Compile time = ([\d.]+) ms", text)]
    if times:
        metrics["ptxas_time_ms"] = sum(times)
    return metrics


@dataclass
class CompileOutcome:
    """A compile: status ("ok", "compile_error", "compile_timeout"), output file and metrics."""

    status: str
    path: Path | None = None
    error: str = ""
    metrics: dict[str, float] = field(default_factory=dict)
    argv: list[list[str]] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """Whether the compile produced its output."""
        return self.status == "ok"


class CudaCompiler:
    """Two-stage CUDA compile: ``nvcc -ptx`` once per front-end argument set (cached on disk),
    then ``ptxas`` per back-end argument set; or a single full ``nvcc -cubin`` call.

    Args:
        arch: Target, e.g. "sm_90".
        workdir: Where PTX (cache) and cubins go.
        timeout_s: Limit per compiler process.
    """

    def __init__(self, arch: str, workdir: str | Path, timeout_s: float = 120.0) -> None:
        if not re.fullmatch(r"sm_\d+[a-z]?", arch):
            raise ConfigurationError(f"arch must look like 'sm_90', but got {arch!r}; see `nvcc --list-gpu-arch`")
        self.arch = arch
        self.nvcc, self.ptxas = find_tool("nvcc"), find_tool("ptxas")
        self.version = tool_version(self.nvcc)
        archs = supported_archs(self.nvcc)
        if archs and arch not in archs:
            raise ConfigurationError(f"this nvcc ({self.version}) cannot target {arch!r}; supported: {archs}")
        self.workdir = Path(workdir)
        (self.workdir / "ptx").mkdir(parents=True, exist_ok=True)
        (self.workdir / "cubin").mkdir(parents=True, exist_ok=True)
        self.timeout_s = timeout_s
        self._locks: dict[str, threading.Lock] = {}
        self._guard = threading.Lock()
        self.ptx_hits = self.ptx_misses = 0

    def _key(self, *parts: object) -> str:
        return hashlib.sha256("\0".join(map(str, parts)).encode()).hexdigest()[:24]

    def ptx(self, source: Path, frontend_argv: Sequence[str]) -> CompileOutcome:
        """The PTX of a source under front-end arguments, from the cache when compiled before.

        The cache key covers the source, the header files beside it, the arch, the toolchain
        version and the arguments.
        """
        key = self._key(_source_digest(source), self.arch, self.version, *frontend_argv)
        out = self.workdir / "ptx" / f"{key}.ptx"
        with self._guard:
            lock = self._locks.setdefault(key, threading.Lock())
        def argv_for(target: Path) -> list[str]:
            return [self.nvcc, f"-arch={self.arch}", "-ptx", *frontend_argv, str(source), "-o", str(target)]

        with lock:  # two threads wanting the same PTX compile it once
            outcome, hit = build_cached(argv_for, out, "frontend_time_s", self.timeout_s, cwd=source.parent)
        if hit:
            self.ptx_hits += 1
        else:
            self.ptx_misses += 1
        return outcome

    def cubin(self, ptx: Path, backend_argv: Sequence[str], entry: str | None = None) -> CompileOutcome:
        """Assemble PTX with ptxas under back-end arguments; parse ``-v`` metrics."""
        out = self.workdir / "cubin" / f"{self._key(ptx.name, *backend_argv)}.cubin"
        argv = [self.ptxas, f"-arch={self.arch}", "-v", *backend_argv, str(ptx), "-o", str(out)]
        return self._assemble(argv, out, entry, cwd=None)

    def full(self, source: Path, frontend_argv: Sequence[str], backend_argv: Sequence[str],
             entry: str | None = None) -> CompileOutcome:
        """One ``nvcc -cubin`` call (back-end arguments passed through ``-Xptxas``)."""
        key = self._key(_source_digest(source), "full", *frontend_argv, *backend_argv)
        out = self.workdir / "cubin" / f"{key}.cubin"
        xptxas = [a for tok in backend_argv for a in ("-Xptxas", tok)]
        argv = [self.nvcc, f"-arch={self.arch}", "-cubin", *frontend_argv, "-Xptxas", "-v", *xptxas,
                str(source), "-o", str(out)]
        return self._assemble(argv, out, entry, cwd=source.parent)

    def _assemble(self, argv: list[str], out: Path, entry: str | None, cwd: Path | None) -> CompileOutcome:
        """Run a compile whose argv ends in ``-o out`` (atomically, see ``build``), parse ``-v``."""
        res, outcome = build(lambda target: [*argv[:-1], str(target)], out, self.timeout_s, cwd)
        if outcome.ok:
            outcome.metrics = parse_ptxas_verbose(res.stdout + res.stderr, entry)
            outcome.metrics["backend_time_s"] = res.elapsed_s
        return outcome


def build(argv_for: Callable[[Path], list[str]], out: Path, timeout_s: float,
          cwd: Path | None = None) -> tuple[ToolResult, CompileOutcome]:
    """Run ``argv_for(temp file)``, then move the result to ``out``: a reader never sees half a file.

    Args:
        argv_for: The compiler command writing its output to the given path.
        out: The final output path.
        timeout_s: Limit of the compiler process.
        cwd: Working folder of the compiler.

    Returns:
        The compiler's result and the outcome ("ok" with ``out``, or the failure).
    """
    tmp = _tmp_name(out)
    res = run_tool(argv_for(tmp), timeout_s, cwd=cwd)
    if res.timed_out or res.returncode != 0:
        tmp.unlink(missing_ok=True)
        return res, _failed(res, timeout_s, argv_for(out))
    os.replace(tmp, out)
    return res, CompileOutcome("ok", out, argv=[argv_for(out)])


def build_cached(argv_for: Callable[[Path], list[str]], out: Path, metric: str, timeout_s: float,
                 cwd: Path | None = None) -> tuple[CompileOutcome, bool]:
    """``build`` unless an earlier build of ``out`` is complete; the build time is kept beside it.

    The ``<out>.time`` file is written last, so its presence marks a complete build; cache hits
    report the time the build took (as ``metrics[metric]``), not zero.

    Returns:
        The outcome and whether it came from the cache.
    """
    timing = out.with_name(out.name + ".time")
    if out.exists() and timing.exists():
        return CompileOutcome("ok", out, metrics={metric: float(timing.read_text())}, argv=[argv_for(out)]), True
    res, outcome = build(argv_for, out, timeout_s, cwd)
    if outcome.ok:
        write_atomic(timing, f"{res.elapsed_s:.6f}")
        outcome.metrics = {metric: res.elapsed_s}
    return outcome, False


_HEADERS = (".h", ".cuh", ".hpp", ".hh", ".inc", ".inl")


def _source_digest(source: Path) -> str:
    """sha256 of a source and of the header files in its folder (a changed header is a new key)."""
    h = hashlib.sha256(source.read_bytes())
    for f in sorted(source.parent.iterdir()):
        if f.suffix in _HEADERS and f.is_file():
            h.update(f.name.encode() + b"\0" + f.read_bytes())
    return h.hexdigest()


def _tmp_name(out: Path) -> Path:
    return out.with_name(f".{out.stem}.{os.getpid()}.{threading.get_ident()}{out.suffix}")


def write_atomic(path: Path, text: str) -> None:
    """Write a small file so that readers see the old or the new content, never a partial one."""
    tmp = _tmp_name(path)
    tmp.write_text(text)
    os.replace(tmp, path)


def supported_archs(nvcc: str) -> list[str]:
    """Real GPU targets of an nvcc (``--list-gpu-arch``, compute_XX turned into sm_XX)."""
    res = run_tool([nvcc, "--list-gpu-arch"], 30)
    return sorted({a.replace("compute_", "sm_") for a in re.findall(r"compute_\d+[a-z]?", res.stdout)})


def _failed(res: ToolResult, timeout_s: float, argv: list[str]) -> CompileOutcome:
    if res.timed_out:
        return CompileOutcome("compile_timeout", error=f"compiler exceeded {timeout_s} s: {' '.join(argv[:6])} ...",
                              argv=[argv])
    return CompileOutcome("compile_error", error=res.tail() or f"exit code {res.returncode}", argv=[argv])
