"""What an exported point's controls warn of: an optimisation level lowered below the build's default."""

from __future__ import annotations

import shlex
from typing import TYPE_CHECKING, Any

from compileiq_lab.kernels.canary import optimisation_controls

if TYPE_CHECKING:
    from compileiq_lab.kernels.run import KernelRun

__all__ = ["lowered_note", "lowered_optimisation"]

#: The optimisation level of the CUDA compilers when left at their default (ptxas -O3, NVVM -O3).
_CUDA_DEFAULT_LEVEL = 3
#: The levels of gcc and clang that optimise for size (``-Os``, clang's ``-Oz``) or debugging (``-Og``), with what
#: they favour: below their -O2 in speed, whatever static metrics say of them.
_SIZE_LEVELS = {"s": "code size", "z": "code size", "g": "debugging"}


def lowered_optimisation(run: KernelRun, controls: dict[str, Any]) -> list[str]:
    """The exported controls that lower an optimisation level (the canary's ``optimisation_controls``) below the
    build's default (the control's declared default, else the CUDA compilers' -O3) or trade code quality for compile
    time (``fast_compile``), in words."""
    levels = {c.name for c in optimisation_controls(run.catalog)}
    out = []
    for c in run.catalog.controls:
        value = controls.get(c.name)
        if value is None:
            continue
        if c.name == "fast_compile":
            out.append(f"{c.name} = {value!r}")
        elif c.name in levels:
            default = c.param.default if c.param.has_default else _CUDA_DEFAULT_LEVEL
            if value in _SIZE_LEVELS:
                out.append(f"{c.name} = {value!r}, {_SIZE_LEVELS[value]} before speed, against the default {default}")
            elif isinstance(value, int) and not isinstance(value, bool) and isinstance(default, int) \
                    and value < default:
                out.append(f"{c.name} = {value} against the default {default}")
    return out


def lowered_note(run: KernelRun, controls: dict[str, Any], path: str) -> str:
    """The note an export of ``controls`` to ``path`` carries when they lower the optimisation of a static run (whose
    metrics can favour code that unrolls or schedules less), else ""."""
    lowered = lowered_optimisation(run, controls)
    if not lowered or run.target != "static":
        return ""
    return (f"this point makes the compiler optimise less than by default ({', '.join(lowered)}); static metrics "
            f"({', '.join(run.objective_names)}) can favour code that unrolls or schedules less, so measure it before "
            f"using it ({_how_to_measure(run)}: compileiq-lab validate --acf {shlex.quote(path)})")


def _how_to_measure(run: KernelRun) -> str:
    """Where ``validate --acf`` can measure a point of this run's kernel."""
    where = "on this CPU" if run.kernel.language == "c" else "on a GPU"
    if run.kernel.spec_file is None:  # a bare file: nothing says what inputs to run it with
        return f"{where}, once it is a kernel folder whose kernel.toml gives its inputs"
    return where
