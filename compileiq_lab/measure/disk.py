"""Telling a full disk from a bad candidate: a compile that failed for want of space stops the run."""

from __future__ import annotations

import errno
import os
import signal
import tempfile
import uuid
from pathlib import Path

from compileiq_lab.exceptions import EnvironmentFaultError
from compileiq_lab.toolchain.tools import ToolResult

__all__ = ["DISK_ERRNOS", "MIN_FREE_BYTES", "check_disk", "disk_fault", "fault_error", "is_disk_error"]

#: errno values that mean "the disk, not the file": no space, quota, file-size limit.
DISK_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG})

#: Below this many free bytes on the compile cache's disk a compiler's output may have been cut short.
MIN_FREE_BYTES = 1 << 20

_PROBE_BYTES = 64 * 1024
_MESSAGES = ("no space left on device", "disk quota exceeded", "file too large", "file size limit exceeded",
             "not enough space on the disk")


def is_disk_error(exc: BaseException) -> bool:
    """Whether an OSError says the disk is full (or a quota or file-size limit was hit)."""
    return isinstance(exc, OSError) and exc.errno in DISK_ERRNOS


def disk_fault(folder: Path, res: ToolResult | None = None, probe: bool = True) -> str | None:
    """Why the disk of ``folder`` (rather than the config compiled) explains a compile's result; None if healthy.

    Looks at what the compiler said and how it ended (``res``), then at the free space there and in the temporary
    folder (where compilers keep their intermediate files), then (with ``probe``)
    writes and removes a small file, which also meets quotas and ``ulimit -f`` limits the free space does not show.
    """
    if res is not None:
        if res.returncode is not None and res.returncode == -signal.SIGXFSZ:
            return "the compiler was killed for exceeding the file-size limit (SIGXFSZ; see `ulimit -f`)"
        said = (res.stderr + res.stdout).lower()
        for message in _MESSAGES:
            if message in said:
                return f"the compiler reported {message!r}"
    for place in dict.fromkeys([folder, Path(tempfile.gettempdir())]):  # compilers keep intermediates in TMPDIR
        try:
            st = os.statvfs(place)
        except OSError:
            continue  # a folder that cannot be examined is not known to be full; the compile's own error stands
        free = st.f_bavail * st.f_frsize
        if free < MIN_FREE_BYTES:
            return f"{free} bytes free in {place}, at least {MIN_FREE_BYTES} needed"
    if not probe:
        return None
    path = folder / f".space-probe-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    try:
        with open(path, "wb") as f:
            f.write(b"\0" * _PROBE_BYTES)
            f.flush()
    except OSError as exc:
        if is_disk_error(exc):
            return f"writing {_PROBE_BYTES} bytes to {folder} failed: {exc.strerror}"
    finally:
        path.unlink(missing_ok=True)
    return None


def fault_error(folder: Path, why: str) -> EnvironmentFaultError:
    """The error that stops a run whose compile cache ran out of space."""
    return EnvironmentFaultError(
        f"the disk of the compile folder {folder} (or the temporary folder) is full or limited ({why}); the "
        "candidate was not recorded and nothing partial was cached. Free space there, lift the limit (`ulimit -f`), "
        "or pass --workdir / workdir= (TMPDIR for the temporary folder) on another disk, and run the same command "
        "again: it continues from the last stored evaluation")


def check_disk(folder: Path, res: ToolResult | None = None) -> None:
    """Raise ``fault_error`` when ``disk_fault`` finds the disk at fault."""
    why = disk_fault(folder, res)
    if why is not None:
        raise fault_error(folder, why)
