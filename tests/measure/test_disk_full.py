"""A full disk or a file-size limit in the compile folder stops the run; nothing partial is cached or recorded."""

from __future__ import annotations

import os
import resource
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from compileiq_lab import load_results
from compileiq_lab.measure.disk import disk_fault
from compileiq_lab.testing import tool_available

needs_cuda = pytest.mark.skipif(not tool_available("nvcc"), reason="nvcc not installed")


def _can_mount_tmpfs(tmp_path: Path) -> bool:
    if shutil.which("unshare") is None:
        return False
    probe = tmp_path / "probe"
    probe.mkdir()
    res = subprocess.run(["unshare", "-rm", "sh", "-c", f"mount -t tmpfs -o size=1m tmpfs {probe}"],
                         capture_output=True, timeout=30)
    return res.returncode == 0


@needs_cuda
def test_full_compile_folder_stops_the_run_and_resume_finishes_it(tmp_path):
    if not _can_mount_tmpfs(tmp_path):
        pytest.skip("cannot mount a small tmpfs here (no user namespaces)")
    cli = f"{sys.executable} -m compileiq_lab.cli tune sgemm --space ptxas --objectives registers,sass_instructions " \
          "--generations 8 --pool-size 10 --store s.db --workdir cache --warm-start none"
    script = textwrap.dedent(f"""
        mkdir -p cache && mount -t tmpfs -o size=5m tmpfs cache || exit 90
        dd if=/dev/zero of=cache/filler bs=1k count=3900 2>/dev/null
        {cli} > first.out 2>&1; echo $? > first.rc
        find cache -type f -size 0 > empty.txt
        rm cache/filler
        {cli} > second.out 2>&1; echo $? > second.rc
    """)
    res = subprocess.run(["unshare", "-rm", "sh", "-c", script], cwd=tmp_path, capture_output=True, text=True,
                         timeout=900)
    assert res.returncode == 0, res.stderr
    first = (tmp_path / "first.out").read_text()
    assert (tmp_path / "first.rc").read_text().strip() == "1", first
    assert "is full or limited" in first and "run the same command again" in first and "Traceback" not in first
    assert (tmp_path / "empty.txt").read_text() == ""  # no zero-byte file was kept in the cache
    second = (tmp_path / "second.out").read_text()
    assert (tmp_path / "second.rc").read_text().strip() == "0", second
    res2 = load_results(str(tmp_path / "s.db"))
    assert res2.status == "finished"
    bad = [r for r in res2.records if r.status != "ok"]
    assert not bad, [(r.eval_id, r.error[:80]) for r in bad]  # none of the disk's failures became a row


BIG_KERNEL = r"""
extern "C" __global__ void big(float* out, const float* in, int n) {
  float acc = in[threadIdx.x];
  #pragma unroll
  for (int i = 0; i < 3000; ++i) acc = acc * in[(threadIdx.x + i) % n] + (float)i;
  out[threadIdx.x] = acc;
}
"""

_LIMITED = textwrap.dedent("""
    import resource, sys
    from compileiq_lab import Search
    from compileiq_lab.exceptions import EnvironmentFaultError
    from compileiq_lab.kernels import KernelRun

    limit = int(sys.argv[3])
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    run = KernelRun(sys.argv[1], "ptxas", ["registers"], workdir=sys.argv[2], timeout_s=120)
    try:
        Search.of(run, store=":memory:", generations=1, pool_size=3).start()
    except EnvironmentFaultError as exc:
        print("FAULT", exc)
        sys.exit(0)
    print("NO FAULT")
    sys.exit(1)
""")


@needs_cuda
def test_file_size_limit_is_an_environment_fault_not_a_compile_error(tmp_path):
    src = tmp_path / "big.cu"
    src.write_text(BIG_KERNEL)
    work = tmp_path / "work"
    res = subprocess.run([sys.executable, "-c", _LIMITED, str(src), str(work), str(48 * 1024)], capture_output=True,
                         text=True, timeout=600)
    assert res.returncode == 0, res.stdout + res.stderr
    assert res.stdout.startswith("FAULT") and "is full or limited" in res.stdout, res.stdout
    partial = [p for p in work.rglob("*") if p.is_file() and p.suffix in (".ptx", ".cubin")
               and not p.with_name(p.name + ".time").exists()]
    assert not partial, partial  # an output without its completion marker is never left as a cache entry


def test_disk_fault_sees_a_size_limit_through_its_probe(tmp_path):
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    code = ("import resource, sys; from pathlib import Path; from compileiq_lab.measure.disk import disk_fault; "
            "resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096)); print(disk_fault(Path(sys.argv[1])))")
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, timeout=60)
    assert "File too large" in out.stdout, out.stdout + out.stderr
    assert disk_fault(tmp_path) is None  # a healthy folder
    assert (soft, hard) == resource.getrlimit(resource.RLIMIT_FSIZE)
    assert not [p for p in os.listdir(tmp_path) if p.startswith(".space-probe")]
