"""CUDA's libraries a kernel file may include (CCCL, cuBLAS, cuDNN, NCCL, ...): which one a header is of, and how to
get one that fits the nvcc."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import PurePath

__all__ = ["LIBRARIES", "CudaLibrary", "cuda_version", "library_header_note", "library_of", "missing_library_note"]


@dataclass(frozen=True)
class CudaLibrary:
    """A library whose headers nvcc does not ship: its name, its headers, and its CUDA 13 PyPI wheel (None: not
    NVIDIA's, or no wheel puts its headers where the nvcc wheel looks)."""

    name: str
    headers: re.Pattern[str]
    wheel: str | None


#: Headers a kernel file includes for its host code (a benchmark's cuBLAS reference, a trainer's NCCL and MPI) that a
#: CUDA toolkit installs with the library, and the PyPI toolchain (the ``cuda`` extra) only with the library's wheel,
#: which puts them in the nvcc wheel's own include folder (nvidia/cu13/include), where that nvcc finds them.
LIBRARIES: tuple[CudaLibrary, ...] = (
    CudaLibrary("cuBLAS", re.compile(r"cublas(Lt|Xt|_v2|_api|Lt_api)?\.h"), "nvidia-cublas"),
    CudaLibrary("cuDNN", re.compile(r"cudnn(_\w+)?\.h"), "nvidia-cudnn-cu13"),
    CudaLibrary("NCCL", re.compile(r"nccl(_net|_device)?\.h"), "nvidia-nccl-cu13"),
    CudaLibrary("cuRAND", re.compile(r"curand(_\w+)?\.h"), "nvidia-curand"),
    CudaLibrary("cuFFT", re.compile(r"cufft(Xt|w|_\w+)?\.h"), "nvidia-cufft"),
    CudaLibrary("cuSPARSE", re.compile(r"cusparse(Lt|_\w+)?\.h"), "nvidia-cusparse"),
    CudaLibrary("cuSOLVER", re.compile(r"cusolver(Dn|Sp|Rf|Mg|_\w+)?\.h"), "nvidia-cusolver"),
    CudaLibrary("NVSHMEM", re.compile(r"nvshmemx?(_\w+)?\.h"), "nvidia-nvshmem-cu13"),
    CudaLibrary("cuTENSOR", re.compile(r"cutensor(Mg)?(_\w+)?\.h"), "cutensor-cu13"),
    CudaLibrary("CUPTI", re.compile(r"cupti(_\w+)?\.h"), "nvidia-cuda-cupti"),
    CudaLibrary("NVTX", re.compile(r"nvToolsExt\w*\.h|nvtx3\.hpp"), "nvidia-nvtx"),
    CudaLibrary("the CUDA profiler API", re.compile(r"cuda_profiler_api\.h"), "nvidia-cuda-profiler-api"),
    CudaLibrary("MPI", re.compile(r"mpi\.h"), None),
)

#: A header of CCCL (CUB, Thrust, libcu++, ``nv/target``), which a CUDA toolkit's nvcc finds by itself and the PyPI
#: toolchain has only with its ``nvidia-cuda-cccl`` wheel (which the ``cuda`` extra pins).
_CCCL = re.compile(r"""["<'\s(](?:cub|thrust|cuda/std|cuda|nv)/[\w./]+""")
#: The file a compiler message names: nvcc/cicc's ``fatal error: NAME: No such file`` / ``cannot open source file
#: "NAME"`` (the header asked for), or a diagnostic's ``PATH(LINE): error`` (the header the error is in).
_ASKED = re.compile(r"""fatal error: (?P<a>[^:\n]+): No such file|cannot open source file "(?P<b>[^"\n]+)"|"""
                    r"""'(?P<c>[^'\n]+)' file not found""")
_IN = re.compile(r"^(?P<path>[^\n(]+)\(\d+\): (catastrophic )?error", re.MULTILINE)
_VERSION = re.compile(r"cuda_(\d+\.\d+)|release (\d+\.\d+)")


def library_of(header: str) -> CudaLibrary | None:
    """The library a header (a path or an include's name) is of, or None."""
    name = PurePath(header.strip()).name
    return next((lib for lib in LIBRARIES if lib.headers.fullmatch(name)), None)


def cuda_version(toolchain: dict[str, str]) -> str | None:
    """The CUDA release of the run's nvcc (``13.0``) from ``KernelRun.toolchain()``, or None (no nvcc)."""
    m = _VERSION.search(toolchain.get("nvcc", ""))
    return (m[1] or m[2]) if m else None


def _install(lib: CudaLibrary, version: str | None) -> str:
    release = f"CUDA {version}" if version else "the nvcc's CUDA release (nvcc --version)"
    wheel = (f"; on the PyPI toolchain (the cuda extra), pip install the {lib.wheel} release that came with {release}, "
             "which puts its headers where that nvcc looks (a newer release's headers need a newer nvcc)"
             if lib.wheel else "")
    return f"install {lib.name} for {release} (with a CUDA toolkit, its development package){wheel}"


def missing_library_note(missing: str, version: str | None) -> str | None:
    """For a compiler message that a header is missing: which library it is of (CCCL's, or one of ``LIBRARIES``) and
    how to install it, or None."""
    if _CCCL.search(missing):
        return ("it is part of CCCL (CUB, Thrust, libcu++), which a CUDA toolkit's nvcc finds by itself and the PyPI "
                "toolchain has only with its CCCL wheel: pip install 'compileiq-lab[cuda]' (it pins nvidia-cuda-cccl "
                "to the nvcc), or nvidia-cuda-cccl of the nvcc's CUDA version, or use a CUDA toolkit")
    m = _ASKED.search(missing)
    lib = library_of(next(g for g in m.groups() if g)) if m else None
    if lib is None:
        return None
    if lib.wheel is None:
        return (f"it is {lib.name}'s header, which the kernel file's host code includes: install {lib.name}'s "
                "development files and give their include folder with -I/--include-dir, or tune a file that holds "
                "the kernels without that host code")
    return (f"it is {lib.name}'s header, a CUDA library nvcc does not come with, which the kernel file includes: "
            f"{_install(lib, version)}; or give its include folder with -I/--include-dir")


def library_header_note(error: str, version: str | None) -> str:
    """For a front-end error inside a CUDA library's header: that its headers must be of the nvcc's CUDA release (a
    newer release's declare what an older nvcc lacks), or ""."""
    for m in _IN.finditer(error):
        lib = library_of(m["path"])
        if lib is not None:
            return (f"; the error is in {lib.name}'s header {PurePath(m['path'].strip()).name}, whose release must "
                    f"fit the nvcc's ({'CUDA ' + version if version else 'nvcc --version'}): a later release's headers "
                    f"use what this nvcc's lack; {_install(lib, version)}")
    return ""
