"""Scratch folders: a killed run's folder is removed by a later one, a live or recent one's never."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import textwrap
import time

import pytest

from compileiq_lab.kernels import scratch
from compileiq_lab.kernels.run import KernelRun


def later() -> float:
    """A moment when what is written now has been quiet for longer than the sweep waits (taken when asked: a test of
    a long suite runs minutes after its module was imported)."""
    return time.time() + scratch.STALE_AFTER_S + 60


def _dead_pid() -> int:
    proc = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True,
                          check=True)
    return int(proc.stdout)


def test_a_run_killed_before_its_exit_handlers_leaves_a_folder_the_next_run_removes(tmp_path, monkeypatch):
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    code = textwrap.dedent("""
        import os, signal
        from compileiq_lab.kernels.run import KernelRun
        run = KernelRun("dot", objectives=["text_bytes"])
        (run.workdir / "candidate.o").write_bytes(b"x" * 1000)
        print(run.workdir, flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
    """)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert proc.returncode == -9, proc.stderr
    left = tmp_path / os.path.basename(proc.stdout.strip())
    assert (left / "candidate.o").exists()  # atexit never ran
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    when = later()
    monkeypatch.setattr(scratch.time, "time", lambda: when)
    run = KernelRun("dot", objectives=["text_bytes"])
    assert not left.exists()
    assert run.workdir.parent == tmp_path and run.workdir.exists()
    assert run.workdir.name.startswith(f"{scratch.PREFIX}{os.getpid()}-")


def test_only_dead_processes_quiet_folders_of_this_user_are_removed(tmp_path):
    dead = _dead_pid()
    stale = tmp_path / f"{scratch.PREFIX}{dead}-abc123"
    live = tmp_path / f"{scratch.PREFIX}{os.getpid()}-abc123"
    other_name = tmp_path / f"{scratch.PREFIX}k2oe8obq"  # an older version's name: no process id
    not_ours = tmp_path / f"{dead}-abc123"
    for folder in (stale, live, other_name, not_ours):
        (folder / "cubin").mkdir(parents=True)
        (folder / "cubin" / "a.cubin").write_bytes(b"x")
    target = tmp_path / "precious"
    target.mkdir()
    (target / "keep").write_text("k")
    link = tmp_path / f"{scratch.PREFIX}{dead}-link"
    link.symlink_to(target)

    assert scratch.sweep_stale(tmp_path, now=time.time()) == []  # nothing quiet for long enough yet
    assert stale.exists()
    assert scratch.sweep_stale(tmp_path, now=later()) == [stale]
    assert not stale.exists()
    for kept in (live, other_name, not_ours, link):
        assert kept.exists()
    assert (target / "keep").read_text() == "k"


def test_a_folder_written_lately_is_kept_even_when_its_process_is_gone(tmp_path):
    folder = tmp_path / f"{scratch.PREFIX}{_dead_pid()}-xyz"
    (folder / "ptx").mkdir(parents=True)
    now = later()
    old = now - 2 * scratch.STALE_AFTER_S
    os.utime(folder, (old, old))
    # the top folder is old, but a compile wrote into ptx/ a moment before "now"
    os.utime(folder / "ptx", (now - 1, now - 1))
    assert scratch.sweep_stale(tmp_path, now=now) == []
    os.utime(folder / "ptx", (old, old))
    assert scratch.sweep_stale(tmp_path, now=now) == [folder]


@pytest.mark.skipif(not hasattr(os, "getuid") or os.getuid() != 0, reason="needs root to give a folder away")
def test_another_users_folder_is_never_removed(tmp_path):
    folder = tmp_path / f"{scratch.PREFIX}{_dead_pid()}-other"
    folder.mkdir()
    os.chown(folder, 12345, 12345)
    assert scratch.sweep_stale(tmp_path, now=later()) == []
    assert folder.exists()


def test_a_missing_temporary_folder_is_no_error(tmp_path):
    assert scratch.sweep_stale(tmp_path / "absent", now=later()) == []
