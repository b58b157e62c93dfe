"""What a point's controls changed in the machine code: ptxas -v resources and the SASS mix, beside the baseline."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from compileiq_lab.exceptions import ConfigurationError
from compileiq_lab.measure.binary import inspect_elf
from compileiq_lab.measure.sass import OPCODE_CLASSES, disassembler_reason, instruction_mix

if TYPE_CHECKING:
    import pandas as pd

    from compileiq_lab.kernels.run import KernelRun

__all__ = ["RESOURCES", "CodeReport", "code_diff", "code_report"]

#: The ptxas -v resources of a report, in display order (bytes unless named otherwise).
RESOURCES = ("registers", "spill_store_bytes", "spill_load_bytes", "stack_bytes", "smem_bytes", "sass_instructions")


@dataclass(frozen=True)
class CodeReport:
    """One config's machine code, as a tuning engineer reads it.

    Attributes:
        config: The controls. argv: The compiler arguments per stage. code_hash: The machine-code hash.
        resources: ``RESOURCES`` from ``ptxas -v`` and the cubin (sass_instructions: without padding).
        ptxas_lines: What ``ptxas -v`` said about the kernel (resource lines only).
        mix: Instructions per opcode class (``OPCODE_CLASSES``), or None without a disassembler.
        mix_note: Why ``mix`` is None ("" when it is there).
    """

    config: dict[str, Any]
    argv: dict[str, list[str]]
    code_hash: str
    resources: dict[str, float]
    ptxas_lines: list[str] = field(default_factory=list)
    mix: dict[str, int] | None = None
    mix_note: str = ""


def _ptxas_lines(log: str, symbol: str | None = None) -> list[str]:
    """The resource lines of ``ptxas -v``: of the entry ``symbol`` only (its block, up to the next entry), or all."""
    keep = ("Compiling entry", "Function properties", "bytes stack frame", "Used ")
    lines = [" ".join(line.split()) for line in log.splitlines() if any(k in line for k in keep)]
    if symbol is None:
        return lines
    starts = [i for i, line in enumerate(lines) if "Compiling entry" in line]
    mine = [i for i in starts if f"'{symbol}'" in lines[i]]
    if not mine:
        return lines
    end = next((i for i in starts if i > mine[0]), len(lines))
    return lines[mine[0]:end]


def code_report(run: KernelRun, config: Mapping[str, Any]) -> CodeReport:
    """Compile ``config`` with the run's compile path (its cache) and read what the compiler made of it.

    Raises:
        ConfigurationError: The kernel is not compiled to a cubin (a C kernel), or the config does not compile.
    """
    if run.evaluator.backend.binary_kind != "cubin":
        raise ConfigurationError(f"a machine-code report reads a cubin, but {run.kernel.name!r} is compiled to "
                                 f"{run.evaluator.backend.binary_kind!r}; use it on a CUDA or PTX kernel")
    outcome = run.evaluator.compile(config)
    if not outcome.ok or outcome.path is None:
        raise ConfigurationError(f"the config must compile to be read, but it failed: {outcome.error[-300:]}")
    info = inspect_elf(outcome.path, entry=outcome.symbol)
    resources = {k: float(outcome.metrics.get(k, 0.0)) for k in RESOURCES[:-1]}
    resources["sass_instructions"] = float(info.sass_instructions)
    reason = disassembler_reason()
    mix = instruction_mix(outcome.path, outcome.symbol) if reason is None else None
    lines = _ptxas_lines(outcome.log, outcome.symbol)
    return CodeReport(dict(config), run.argv(config), info.code_hash, resources, lines, mix, reason or "")


def code_diff(run: KernelRun, config: Mapping[str, Any], baseline: Mapping[str, Any] | None = None) -> pd.DataFrame:
    """The point beside the baseline (default: the compiler defaults, ``{}``): one row per resource and per opcode
    class (the class rows only with a disassembler), columns baseline, point, change (point - baseline) and kind
    ("resource" / "instructions"); ``attrs`` holds both reports and whether the code is the same."""
    import pandas as pd

    base, point = code_report(run, baseline or {}), code_report(run, config)
    rows = [{"metric": k, "kind": "resource", "baseline": base.resources[k], "point": point.resources[k]}
            for k in RESOURCES]
    if base.mix is not None and point.mix is not None:
        rows += [{"metric": k, "kind": "instructions", "baseline": float(base.mix[k]), "point": float(point.mix[k])}
                 for k in OPCODE_CLASSES]
    df = pd.DataFrame(rows, columns=["metric", "kind", "baseline", "point"]).set_index("metric")
    df["change"] = df["point"] - df["baseline"]
    df.attrs.update(baseline=base, point=point, same_code=base.code_hash == point.code_hash,
                    mix_note=point.mix_note)
    return df
