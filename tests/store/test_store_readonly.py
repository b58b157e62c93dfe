"""Stores in read-only and unwritable places: reading works read-only; writing says where and why not."""

from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from compileiq_lab import Search, SearchConfiguration, load_results
from compileiq_lab.exceptions import StoreError
from compileiq_lab.testing import FlagProblem

PROBLEM = FlagProblem(n_flags=6, n_levels=2, seed=3)


def _finished_store(folder: Path) -> Path:
    path = folder / "run.db"
    Search(PROBLEM, PROBLEM.space(), SearchConfiguration(generations=2, pool_size=4), store=path).start()
    for leftover in folder.glob("run.db-*"):  # as copied onto read-only media: the file alone
        leftover.unlink()
    return path


def _read_only_mount_works(tmp_path: Path) -> bool:
    if shutil.which("unshare") is None:
        return False
    d = tmp_path / "probe"
    d.mkdir()
    res = subprocess.run(["unshare", "-rm", "sh", "-c", f"mount --bind {d} {d} && mount -o remount,bind,ro {d} "
                          f"&& ! touch {d}/x 2>/dev/null"], capture_output=True, timeout=30)
    return res.returncode == 0


def test_show_report_and_export_from_a_read_only_mount(tmp_path):
    if not _read_only_mount_works(tmp_path):
        pytest.skip("cannot make a read-only bind mount here (no user namespaces)")
    ro = tmp_path / "ro"
    ro.mkdir()
    store = _finished_store(ro)
    rows = len(load_results(str(store)))
    out = tmp_path / "out"
    out.mkdir()
    cli = f"{sys.executable} -m compileiq_lab.cli"
    script = textwrap.dedent(f"""
        mount --bind {ro} {ro} && mount -o remount,bind,ro {ro} || exit 90
        {cli} show {store} > {out}/show.txt 2>&1; echo $? > {out}/show.rc
        {cli} report {store} -o {out}/r.html > {out}/report.txt 2>&1; echo $? > {out}/report.rc
        {sys.executable} -c "from compileiq_lab import load_results; print(len(load_results('{store}')))" \
            > {out}/api.txt 2>&1
        {cli} demo --generations 1 --store {ro}/new.db > {out}/write.txt 2>&1; echo $? > {out}/write.rc
    """)
    res = subprocess.run(["unshare", "-rm", "sh", "-c", script], capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    show = (out / "show.txt").read_text()
    assert (out / "show.rc").read_text().strip() == "0", show
    assert f"{rows} evaluations" in show
    assert (out / "report.rc").read_text().strip() == "0", (out / "report.txt").read_text()
    assert (out / "api.txt").read_text().strip() == str(rows)
    write = (out / "write.txt").read_text()
    assert (out / "write.rc").read_text().strip() == "1", write
    assert "cannot write the run store" in write and "Traceback" not in write and str(ro) in write


def test_proc_and_a_file_in_the_way_are_one_line_errors(tmp_path):
    for store in ("/proc/compileiq-lab.db", str(tmp_path / "afile" / "x.db")):
        (tmp_path / "afile").write_text("in the way")
        out = subprocess.run([sys.executable, "-m", "compileiq_lab.cli", "demo", "--generations", "1", "--store",
                              store], capture_output=True, text=True, timeout=120, cwd=tmp_path)
        assert out.returncode == 1 and "Traceback" not in out.stderr, out.stderr
        assert out.stderr.count("\n") == 1 and "cannot write the run store" in out.stderr, out.stderr


def test_a_directory_or_missing_file_is_not_a_store(tmp_path):
    with pytest.raises(StoreError, match="is a folder; pass a .db file in it"):
        load_results(str(tmp_path))
    with pytest.raises(StoreError, match="does not exist"):
        load_results(str(tmp_path / "missing.db"))


def test_a_finished_run_is_one_file_and_reading_it_adds_none(tmp_path):
    from compileiq_lab.store.sqlite import RunStore

    path = tmp_path / "run.db"
    search = Search(PROBLEM, PROBLEM.space(), SearchConfiguration(generations=2, pool_size=4), store=path)
    live = RunStore(str(path), readonly=True)  # a dashboard reading while the run writes (WAL mode)
    search.start()
    assert len(live.records()) + live.refresh() == len(search.results)
    live.close()
    search.close()
    assert path.read_bytes()[18:20] == b"\x01\x01"  # out of WAL mode once no run writes it
    assert len(load_results(str(path))) == len(load_results(str(path))) > 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.db", "run.db.lock"]  # no -wal / -shm beside it
    again = Search(PROBLEM, PROBLEM.space(), SearchConfiguration(generations=4, pool_size=4), store=path)
    reader = RunStore(str(path), readonly=True)
    again.start()  # continued: WAL mode again while it writes, a reader keeps up
    assert len(reader.records()) + reader.refresh() == len(again.results) > len(live.records())
    reader.close()
    again.close()
