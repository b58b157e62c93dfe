"""Builds a reader never sees half of: a compile into a temporary file renamed into place, cached by its output."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from compileiq_lab.measure.disk import check_disk, disk_fault, fault_error, is_disk_error
from compileiq_lab.toolchain.tools import ToolResult, run_tool

__all__ = ["CompileOutcome", "build", "build_cached", "write_atomic"]


@dataclass
class CompileOutcome:
    """A compile: status ("ok", "compile_error", "compile_timeout"), output file and metrics; for a failure, the
    argument stage whose compiler failed ("frontend", "backend", "c", "entry"; "" when one call spans several).
    ``log`` holds what the compilers printed (warnings included) and ``symbol`` the entry's symbol in the binary
    when the kernel run names an entry."""

    status: str
    path: Path | None = None
    error: str = ""
    metrics: dict[str, float] = field(default_factory=dict)
    argv: list[list[str]] = field(default_factory=list)
    stage: str = ""
    log: str = ""
    symbol: str | None = None

    @property
    def ok(self) -> bool:
        """Whether the compile produced its output."""
        return self.status == "ok"


def build(argv_for: Callable[[Path], list[str]], out: Path, timeout_s: float,
          cwd: Path | None = None, shown: Mapping[str, str] | None = None) -> tuple[ToolResult, CompileOutcome]:
    """Run ``argv_for(temp file)``, then move the result to ``out``: a reader never sees half a file.

    Args:
        argv_for: The compiler command writing its output to the given path.
        out: The final output path.
        timeout_s: Limit of the compiler process.
        cwd: Working folder of the compiler.
        shown: Scratch paths a failure's message names, each with what to call it instead (``out`` as the compiler
            wrote it is always one: the temporary file is gone when the message is read; default: ``out``'s name).

    Returns:
        The compiler's result and the outcome ("ok" with ``out``, or the failure).
    """
    tmp = _tmp_name(out)
    with _writing(tmp):
        res = run_tool(argv_for(tmp), timeout_s, cwd=cwd)
        if res.timed_out or res.returncode != 0:
            tmp.unlink(missing_ok=True)
            check_disk(out.parent, res)  # a compiler that failed for want of space says nothing of the config
            failed = _failed(res, timeout_s, argv_for(out))
            subs = {str(tmp): (shown or {}).get(str(out), out.name), **(shown or {})}
            for path, name in subs.items():
                failed.error = failed.error.replace(path, name)
            return res, failed
        empty = not tmp.is_file() or tmp.stat().st_size == 0
        why = disk_fault(out.parent, res, probe=empty)  # with little space left the output may be cut short
        if why is not None:  # the output is never cached: _writing removes it
            raise fault_error(out.parent, why)
        if empty:
            tmp.unlink(missing_ok=True)
            return res, CompileOutcome("compile_error", error="the compiler exited 0 but wrote no output file",
                                       argv=[argv_for(out)])
        os.replace(tmp, out)
    return res, CompileOutcome("ok", out, argv=[argv_for(out)], log=(res.stderr + res.stdout)[-20000:])


def build_cached(argv_for: Callable[[Path], list[str]], out: Path, metric: str, timeout_s: float,
                 cwd: Path | None = None, shown: Mapping[str, str] | None = None) -> tuple[CompileOutcome, bool]:
    """``build`` unless an earlier build of ``out`` is complete; the build time is kept beside it.

    The ``<out>.time`` file is written last, so its presence marks a complete build; cache hits
    report the time the build took (as ``metrics[metric]``), not zero, and what the compiler printed
    (``<out>.log``).

    Returns:
        The outcome and whether it came from the cache.
    """
    timing, log = out.with_name(out.name + ".time"), out.with_name(out.name + ".log")
    if out.exists() and timing.exists():
        text = log.read_text(errors="replace") if log.exists() else ""
        return CompileOutcome("ok", out, metrics={metric: float(timing.read_text())}, argv=[argv_for(out)],
                              log=text), True
    res, outcome = build(argv_for, out, timeout_s, cwd, shown)
    if outcome.ok:
        if outcome.log.strip():  # the compiler's warnings come back with every cache hit
            write_atomic(log, outcome.log)
        write_atomic(timing, f"{res.elapsed_s:.6f}")  # without this marker the output is not a cache entry
        outcome.metrics = {metric: res.elapsed_s}
    return outcome, False


def _tmp_name(out: Path) -> Path:
    return out.with_name(f".{out.stem}.{os.getpid()}.{threading.get_ident()}{out.suffix}")


def write_atomic(path: Path, data: str | bytes) -> None:
    """Write a file so that readers see the old or the new content, never a partial one; a full disk raises
    EnvironmentFaultError and leaves nothing behind."""
    tmp = _tmp_name(path)
    with _writing(tmp):
        if isinstance(data, bytes):
            tmp.write_bytes(data)
        else:
            tmp.write_text(data)
        os.replace(tmp, path)


@contextmanager
def _writing(tmp: Path) -> Iterator[None]:
    """Around a write through ``tmp``: on any failure the temporary file is removed, and a full disk is raised as the
    EnvironmentFaultError that stops the run."""
    try:
        yield
    except BaseException as exc:
        tmp.unlink(missing_ok=True)
        if is_disk_error(exc):
            why = f"{getattr(exc, 'strerror', exc)}: {getattr(exc, 'filename', None) or tmp}"
            raise fault_error(tmp.parent, why) from exc
        raise


def _failed(res: ToolResult, timeout_s: float, argv: list[str]) -> CompileOutcome:
    if res.timed_out:
        return CompileOutcome("compile_timeout", error=f"compiler exceeded {timeout_s} s: {' '.join(argv[:6])} ...",
                              argv=[argv])
    return CompileOutcome("compile_error", error=res.tail() or f"exit code {res.returncode}", argv=[argv])
