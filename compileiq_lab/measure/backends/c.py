"""C kernels through gcc or clang: the kernel alone (an object file) or linked with the timing harness."""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Mapping, Sequence
from importlib import resources
from pathlib import Path

from compileiq_lab.measure.backends.base import HOST_METRICS
from compileiq_lab.measure.build import CompileOutcome, build_cached, write_atomic
from compileiq_lab.measure.c_shim import SHIM_PREFIX, calls_own_function, shim_source
from compileiq_lab.measure.kernel import Kernel
from compileiq_lab.toolchain.context import BuildContext
from compileiq_lab.toolchain.tools import find_tool, tool_version

__all__ = ["CHost"]


class CHost:
    """Build one C kernel under candidate flags; cached by argument set.

    Args:
        kernel: The kernel spec (language "c"): its ``cil_kernel``, or a function of its own called with its
            ``[launch] args`` by a generated ``cil_kernel`` (``c_shim``).
        workdir: Scratch folder for the harness and binaries.
        compiler: "gcc" or "clang".
        timeout_s: Limit per compile.
        link_harness: Link an executable with the timing harness (to run it); else only the kernel's object file.
        context: Include directories, fixed defines and extra arguments of every compile.
    """

    name: str = "c"
    stages: tuple[str, ...] = ("c",)
    binary_kind: str = "host"

    def __init__(self, kernel: Kernel, workdir: Path, compiler: str = "gcc", timeout_s: float = 60.0,
                 link_harness: bool = True, context: BuildContext | None = None) -> None:
        self.kernel, self.compiler, self.timeout_s, self.link = kernel, compiler, timeout_s, link_harness
        self.context = context or BuildContext()
        self.cc = find_tool(compiler)
        self.workdir = Path(workdir)
        (self.workdir / "bin").mkdir(parents=True, exist_ok=True)
        self.harness = self.workdir / "harness.c"
        if link_harness:
            self.harness.write_text(resources.files("compileiq_lab.measure").joinpath("harness.c").read_text())
        self.source, self.shim = kernel.source_path, ""
        if calls_own_function(kernel):  # the user's function, as written
            buffers = [b.name for b in (*kernel.inputs, *kernel.outputs)]
            self.shim = shim_source(kernel.source_path, str(kernel.entry), kernel.args or (), kernel.params, buffers)
            digest = hashlib.sha256(self.shim.encode()).hexdigest()[:16]
            self.source = self.workdir / f"{SHIM_PREFIX}{digest}.c"
            if not self.source.exists():
                write_atomic(self.source, self.shim)

    def compile(self, argv: Mapping[str, Sequence[str]]) -> CompileOutcome:
        flags = [*self.context.argv(), *argv["c"]]
        harness = hashlib.sha256(self.harness.read_bytes()).hexdigest() if self.link else ""
        key = hashlib.sha256("\0".join([self.kernel.source_sha256(), harness, self.shim, self.compiler,
                                        str(self.link), *flags]).encode())
        out = self.workdir / "bin" / (f"k-{key.hexdigest()[:20]}" + ("" if self.link else ".o"))
        source = str(self.source)

        def argv_for(target: Path) -> list[str]:
            if self.link:
                return [self.cc, "-std=c11", *flags, source, str(self.harness), "-o", str(target), "-lm"]
            return [self.cc, "-std=c11", *flags, "-c", source, "-o", str(target)]

        outcome = build_cached(argv_for, out, "compile_time_s", self.timeout_s, cwd=self.workdir)[0]
        return outcome if outcome.ok else dataclasses.replace(outcome, stage="c")

    def metrics(self) -> frozenset[str]:
        return HOST_METRICS

    def toolchain(self) -> dict[str, str]:
        return {self.compiler: tool_version(self.cc)}
