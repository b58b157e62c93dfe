"""Registry of curated compiler-control catalogs (nvcc, ptxas, gcc, clang) and their introspection."""

from __future__ import annotations

from compileiq_lab.exceptions import SpaceDefinitionError, did_you_mean
from compileiq_lab.space.catalogs.base import CATEGORIES, STAGES, TIERS, Catalog, Conflict, Control
from compileiq_lab.space.catalogs.cuda import NVCC, NVCC_FRONTEND, NVRTC, PTXAS
from compileiq_lab.space.catalogs.gcc import CLANG, GCC
from compileiq_lab.space.catalogs.introspect import active, compiler_version, help_options

__all__ = [
    "CATALOGS",
    "CATEGORIES",
    "CLANG",
    "EXECUTABLES",
    "GCC",
    "NVCC",
    "NVCC_FRONTEND",
    "PTXAS",
    "STAGES",
    "TIERS",
    "Catalog",
    "Conflict",
    "Control",
    "active",
    "compiler_version",
    "get_catalog",
    "help_options",
]

#: Every curated catalog by name.
CATALOGS: dict[str, Catalog] = {
    "nvcc": NVCC,
    "nvcc_frontend": NVCC_FRONTEND,
    "ptxas": PTXAS,
    "nvrtc": NVRTC,
    "gcc": GCC,
    "clang": CLANG,
}

#: Executables each catalog is checked against (``active`` picks one per Control.stage:
#: front-end controls -> nvcc, backend controls -> ptxas, C controls -> the C compiler).
EXECUTABLES: dict[str, tuple[str, ...]] = {
    "nvcc": ("nvcc", "ptxas"),
    "nvcc_frontend": ("nvcc",),
    "ptxas": ("ptxas",),
    "nvrtc": ("nvcc", "ptxas"),  # NVRTC accepts the same spellings; checked where the toolkit exists
    "gcc": ("gcc",),
    "clang": ("clang",),
}


def get_catalog(name: str) -> Catalog:
    """The curated catalog of one compiler.

    Args:
        name: A key of CATALOGS ("nvcc", "nvcc_frontend", "ptxas", "nvrtc", "gcc", "clang").

    Raises:
        SpaceDefinitionError: For an unknown name (the valid ones are listed).
    """
    try:
        return CATALOGS[name]
    except (KeyError, TypeError):
        raise SpaceDefinitionError(f"catalog name must be one of {sorted(CATALOGS)}, but got {name!r}"
                                   f"{did_you_mean(str(name), CATALOGS)}; fix: pick one of those names") from None
