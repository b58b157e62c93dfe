"""Put the ptxas of one nvidia-cuda-nvcc wheel from PyPI into a folder (not on PATH): a second toolkit version to test
with, e.g. 13.5, whose ptxas takes --apply-controls (NVIDIA's control files) while the project builds with 13.0."""

from __future__ import annotations

import argparse
import stat
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("version", help="nvidia-cuda-nvcc version, e.g. 13.5.37")
    ap.add_argument("folder", help="where ptxas goes")
    args = ap.parse_args()
    out = Path(args.folder) / "ptxas"
    if out.is_file():
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "-d", tmp,
                        f"nvidia-cuda-nvcc=={args.version}"], check=True)
        wheel = next(Path(tmp).glob("nvidia_cuda_nvcc-*.whl"))
        with zipfile.ZipFile(wheel) as z:
            member = next(n for n in z.namelist() if n.endswith("/bin/ptxas"))
            out.parent.mkdir(parents=True, exist_ok=True)
            tmp_out = out.with_suffix(".part")
            tmp_out.write_bytes(z.read(member))
    tmp_out.chmod(tmp_out.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    tmp_out.replace(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
