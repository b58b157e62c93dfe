"""Regenerates the recorded PTX of this folder from its Triton kernels, as compileiq-lab compiles them (no GPU needed).

Made with Triton 3.6.0 (``pip install triton==3.6.0``); run from anywhere: ``python tests/data/triton/generate.py``.
It refuses another Triton version unless given ``--any-triton`` (the files then differ, and TRITON_VERSION and
SOURCES.md must be updated with them). Line info is left out (``TRITON_DISABLE_LINE_INFO=1``) so that no path of the
machine that made them ends up in the PTX. The tests read RECORDED: each file must assemble with the installed
ptxas and carry the ``.target`` and ``.version`` given here.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any, NamedTuple

HERE = Path(__file__).resolve().parent
#: The Triton the recorded files were made with.
TRITON_VERSION = "3.6.0"
#: Where the manifest of the recorded files (what triton_ptx returned for each, less the path) is written.
MANIFEST = "recorded.json"


class Recorded(NamedTuple):
    """One recorded PTX file and how it is made."""

    name: str
    source: str
    function: str
    signature: str
    constexprs: dict[str, Any]
    arch: str
    ptx_version: str
    num_warps: int
    num_stages: int


# What Triton's JIT itself compiles for a launch on 16-byte-aligned tensors whose sizes are multiples of 16 (its
# default specialisation): ':16' on the pointers and on the integers divisible by 16, and the strides equal to 1
# turned into constants (vector_add: n_elements = 98432; matmul: contiguous 4096 x 4096 fp16 matrices).
_ADD = ("vector_add.py", "add_kernel", "*fp32:16,*fp32:16,*fp32:16,i32:16", {"BLOCK_SIZE": 1024})
_MATMUL = ("matmul.py", "matmul_kernel",
           "a_ptr=*fp16:16,b_ptr=*fp16:16,c_ptr=*fp16:16,M=i32:16,N=i32:16,K=i32:16,stride_am=i32:16,"
           "stride_bk=i32:16,stride_cm=i32:16",
           {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "GROUP_M": 8, "stride_ak": 1, "stride_bn": 1,
            "stride_cn": 1})
#: PTX ISA 8.7 (Triton 3.6.0's own choice up to sm_90a) is read by ptxas 12.8 and later.
RECORDED = (
    Recorded("vector_add.sm_90a.ptx", *_ADD, arch="sm_90a", ptx_version="8.7", num_warps=4, num_stages=3),
    Recorded("vector_add.sm_90.ptx", *_ADD, arch="sm_90", ptx_version="8.7", num_warps=4, num_stages=3),
    Recorded("matmul.sm_90a.ptx", *_MATMUL, arch="sm_90a", ptx_version="8.7", num_warps=8, num_stages=3),
    Recorded("matmul.sm_90.ptx", *_MATMUL, arch="sm_90", ptx_version="8.7", num_warps=8, num_stages=3),
)


def generate(out_dir: Path, any_triton: bool = False) -> dict[str, dict[str, Any]]:
    """Compile every RECORDED file into ``out_dir``; return the manifest (file name -> what triton_ptx said)."""
    from compileiq_lab.kernels.triton_src import installed_triton_version, triton_ptx

    version = installed_triton_version()
    if version != TRITON_VERSION and not any_triton:
        raise SystemExit(f"these files are made with Triton {TRITON_VERSION}, but {version} is installed: install "
                         f"triton=={TRITON_VERSION}, or pass --any-triton and update TRITON_VERSION and SOURCES.md")
    os.environ["TRITON_DISABLE_LINE_INFO"] = "1"
    manifest: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory() as work:
        for rec in RECORDED:
            got = triton_ptx(HERE / rec.source, rec.function, rec.signature, rec.constexprs, rec.arch, Path(work),
                             ptx_version=rec.ptx_version, num_warps=rec.num_warps, num_stages=rec.num_stages)
            if (got.target, got.ptx_version) != (rec.arch, rec.ptx_version):
                raise SystemExit(f"{rec.name}: Triton made .target {got.target} .version {got.ptx_version}, not "
                                 f"{rec.arch} {rec.ptx_version}")
            text = got.path.read_text(encoding="utf-8")
            if str(HERE) in text or str(Path(work)) in text:
                raise SystemExit(f"{rec.name}: the PTX holds a path of this machine")
            (out_dir / rec.name).write_text(text, encoding="utf-8")
            manifest[rec.name] = {"source": rec.source, "function": rec.function, "arch": rec.arch,
                                  "entry": got.entry, "target": got.target, "ptx_version": got.ptx_version,
                                  "triton_version": got.triton_version, "signature": got.signature,
                                  "constexprs": got.constexprs, "num_warps": got.num_warps,
                                  "num_stages": got.num_stages, "shared_bytes": got.shared_bytes,
                                  "params": list(got.params), "global_scratch_bytes": got.global_scratch_bytes}
    (out_dir / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n", encoding="utf-8")
    return manifest


if __name__ == "__main__":
    for name, entry in generate(HERE, any_triton="--any-triton" in sys.argv[1:]).items():
        print(f"{name}: .target {entry['target']} .version {entry['ptx_version']}, {entry['num_warps']} warps, "
              f"{entry['shared_bytes']} bytes of shared memory")
