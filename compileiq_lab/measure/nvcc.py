"""nvcc and ptxas: the two-stage CUDA compile (PTX cached once per front-end set, then ptxas), ptxas -v metrics."""

from __future__ import annotations

import contextlib
import hashlib
import logging
import re
import tempfile
import threading
from collections.abc import Sequence
from pathlib import Path

from compileiq_lab.exceptions import ConfigurationError
from compileiq_lab.measure.binding import DevicePart, device_part
from compileiq_lab.measure.build import CompileOutcome, build, build_cached, write_atomic
from compileiq_lab.measure.deps import scan_deps
from compileiq_lab.toolchain.context import BuildContext
from compileiq_lab.toolchain.tools import find_tool, first_line, probe_tool, tool_version

__all__ = [
    "ARCH_PROBE_TIMEOUT_S",
    "BINDING_PRE_INCLUDES",
    "DEPS_TIMEOUT_S",
    "CudaCompiler",
    "arch_problem",
    "header_deps",
    "nvcc_input",
    "parse_ptxas_verbose",
    "ptx_problem",
    "supported_archs",
]

log = logging.getLogger(__name__)

#: What a PyTorch extension's headers brought its device code, included first in its device part: half and bfloat16
#: types and intrinsics, and the fixed-width integers (uint32_t) of <cstdint>.
BINDING_PRE_INCLUDES = ("-include", "cuda_fp16.h", "-include", "cuda_bf16.h", "-include", "cstdint")
#: The device parts whose left-out lines were said (once per process, however many compilers build the file).
_SAID: set[str] = set()
_SAID_LOCK = threading.Lock()

#: Limit for the one-line probe compile that asks whether the tools build for an arch: nvcc and ptxas start and
#: build it in a few seconds; 30 s covers a cold start on a loaded machine.
ARCH_PROBE_TIMEOUT_S = 30.0
#: Limit for the ``nvcc -MM`` header scan (the preprocessor alone): seconds even for large template libraries; the
#: compile limit applies when it is shorter.
DEPS_TIMEOUT_S = 60.0


_PTXAS_PATTERNS = {
    "registers": r"Used (\d+) registers",
    "stack_bytes": r"(\d+) bytes stack frame",
    "spill_store_bytes": r"(\d+) bytes spill stores",
    "spill_load_bytes": r"(\d+) bytes spill loads",
    "barriers": r"used (\d+) barriers",
    "smem_bytes": r"(\d+) bytes smem",
    "cmem_bytes": r"(\d+) bytes cmem\[0\]",
}


def parse_ptxas_verbose(text: str, entry: str | None = None) -> dict[str, float]:
    """Per-kernel metrics from ``ptxas -v`` output (of ``entry``, or the maximum over all kernels).

    Returns registers, stack/spill/smem/cmem bytes, barriers, spill_bytes (stores + loads) and
    ptxas_time_ms when present.
    """
    blocks = re.split(r"Compiling entry function '([^']+)'", text)
    per_entry: dict[str, dict[str, float]] = {}
    for name, body in zip(blocks[1::2], blocks[2::2]):
        per_entry[name] = {k: float(m.group(1)) for k, p in _PTXAS_PATTERNS.items() if (m := re.search(p, body))}
        # non-inlined device functions print their own "Function properties" block: add their spills
        for k in ("spill_store_bytes", "spill_load_bytes"):
            found = [float(x) for x in re.findall(_PTXAS_PATTERNS[k], body)]
            if found:
                per_entry[name][k] = sum(found)
        stacks = [float(x) for x in re.findall(_PTXAS_PATTERNS["stack_bytes"], body)]
        if stacks:
            per_entry[name]["stack_bytes"] = max(stacks)
    if entry is not None and per_entry and entry not in per_entry:
        log.warning("ptxas -v printed no kernel named %r (found %s); using the worst over all kernels",
                    entry, sorted(per_entry))
    chosen = [per_entry[entry]] if entry in per_entry else list(per_entry.values())
    metrics: dict[str, float] = {}
    for k in _PTXAS_PATTERNS:
        vals = [d[k] for d in chosen if k in d]
        if vals:
            metrics[k] = max(vals)
    metrics["spill_bytes"] = metrics.get("spill_store_bytes", 0.0) + metrics.get("spill_load_bytes", 0.0)
    times = [float(x) for x in re.findall(r"Compile time = ([\d.]+) ms", text)]
    if times:
        metrics["ptxas_time_ms"] = sum(times)
    return metrics


class CudaCompiler:
    """Two-stage CUDA compile: ``nvcc -ptx`` once per front-end argument set (cached on disk),
    then ``ptxas`` per back-end argument set; or a single full ``nvcc -cubin`` call.

    Args:
        arch: Target, e.g. "sm_90", "sm_90a", "sm_100f" (checked by asking the installed tools).
        workdir: Where PTX (cache) and cubins go.
        timeout_s: Limit per compiler process.
        context: Include directories, fixed defines and extra arguments every front-end call gets.
    """

    def __init__(self, arch: str, workdir: str | Path, timeout_s: float = 120.0,
                 context: BuildContext | None = None, *, front_end: bool = True) -> None:
        if not re.fullmatch(r"sm_\d+[a-z]?", arch):
            instead = f" ({arch.replace('compute_', 'sm_', 1)} for {arch})" if arch.startswith("compute_") else ""
            raise ConfigurationError(f"arch must look like 'sm_90' (or a variant such as 'sm_90a'), but got {arch!r}; "
                                     f"write a real GPU target{instead}, as `nvcc --list-gpu-code` lists them")
        self.arch = arch
        self.ptxas = find_tool("ptxas")
        if front_end:
            self.nvcc = find_tool("nvcc")
            self.version = tool_version(self.nvcc)
            problem = arch_problem(self.nvcc, arch)
            if problem:
                raise ConfigurationError(problem)
        else:  # PTX in, ptxas alone: its arch is checked against the module (see ``ptx_problem``)
            self.nvcc, self.version = "", tool_version(self.ptxas)
        self.context = context or BuildContext()
        self._deps: dict[tuple[str, ...], tuple[Path, ...]] = {}
        self.workdir = Path(workdir)
        (self.workdir / "ptx").mkdir(parents=True, exist_ok=True)
        (self.workdir / "cubin").mkdir(parents=True, exist_ok=True)
        self.timeout_s = timeout_s
        self._locks: dict[str, threading.Lock] = {}
        self._guard = threading.Lock()
        self.ptx_hits = self.ptx_misses = 0
        self._views: dict[tuple[Path, str], tuple[Path, list[str]]] = {}  # (source, its sha256) -> nvcc's input

    def _key(self, *parts: object) -> str:
        return hashlib.sha256("\0".join(map(str, parts)).encode()).hexdigest()[:24]

    def ptx(self, source: Path, frontend_argv: Sequence[str]) -> CompileOutcome:
        """The PTX of a source under front-end arguments, from the cache when compiled before.

        The cache key covers the source, every header the front end reads outside the toolchain (``nvcc -MM``,
        once per include-changing argument set), the arch, the toolchain version, the build context and the
        arguments.
        """
        compiled, extra = self.compiled(source)
        key = self._key(self._digest(source, frontend_argv), self.arch, self.version, self.context.key(),
                        *frontend_argv)
        out = self.workdir / "ptx" / f"{key}.ptx"
        with self._guard:
            lock = self._locks.setdefault(key, threading.Lock())

        def argv_for(target: Path) -> list[str]:
            return [self.nvcc, f"-arch={self.arch}", "-ptx", *self.context.argv(), *extra, *frontend_argv,
                    str(compiled), "-o", str(target)]

        shell_safe(argv_for(out))
        # nvcc -ptx checks its PTX with ptxas, whose errors name the (scratch) output file by line
        shown = {str(out): _ptx_of(source), str(compiled): str(source)}
        with lock:  # two threads wanting the same PTX compile it once
            outcome, hit = build_cached(argv_for, out, "frontend_time_s", self.timeout_s, cwd=source.parent,
                                        shown=shown)
        if hit:
            self.ptx_hits += 1
        else:
            self.ptx_misses += 1
        return outcome

    def cubin(self, ptx: Path, backend_argv: Sequence[str], entry: str | None = None,
              source: Path | None = None) -> CompileOutcome:
        """Assemble PTX with ptxas under back-end arguments; parse ``-v`` metrics. ``source``: the file the PTX
        was made of (a failure names the PTX as that file's, not by its scratch path)."""
        out = self.workdir / "cubin" / f"{self._key(ptx.name, *backend_argv)}.cubin"
        argv = [self.ptxas, f"-arch={self.arch}", "-v", *backend_argv, str(ptx), "-o", str(out)]
        shown = {str(ptx): _ptx_of(source)} if source else None
        return self._assemble(argv, out, entry, cwd=None, shown=shown)

    def full(self, source: Path, frontend_argv: Sequence[str], backend_argv: Sequence[str],
             entry: str | None = None) -> CompileOutcome:
        """One ``nvcc -cubin`` call (back-end arguments passed through ``-Xptxas``)."""
        compiled, extra = self.compiled(source)
        key = self._key(self._digest(source, frontend_argv), "full", self.context.key(), *frontend_argv,
                        *backend_argv)
        out = self.workdir / "cubin" / f"{key}.cubin"
        xptxas = [a for tok in backend_argv for a in ("-Xptxas", tok)]
        argv = shell_safe([self.nvcc, f"-arch={self.arch}", "-cubin", *self.context.argv(), *extra, *frontend_argv,
                           "-Xptxas", "-v", *xptxas, str(compiled), "-o", str(out)])
        return self._assemble(argv, out, entry, cwd=source.parent, shown={str(compiled): str(source)})

    def _assemble(self, argv: list[str], out: Path, entry: str | None, cwd: Path | None,
                  shown: dict[str, str] | None = None) -> CompileOutcome:
        """Run a compile whose argv ends in ``-o out`` (atomically, see ``build``), parse ``-v``."""
        res, outcome = build(lambda target: [*argv[:-1], str(target)], out, self.timeout_s, cwd, shown)
        if outcome.ok:
            outcome.metrics = parse_ptxas_verbose(res.stdout + res.stderr, entry)
            outcome.metrics["backend_time_s"] = res.elapsed_s
        return outcome

    def compiled(self, source: Path) -> tuple[Path, list[str]]:
        """The file nvcc is given for ``source`` and the arguments that come with it (``nvcc_input``, its device part
        written into the work folder), worked out once per content of the source (every compile of a candidate asks);
        the lines a PyTorch extension's binding held are said once."""
        try:
            key = (source, hashlib.sha256(source.read_bytes()).hexdigest())
        except OSError:  # the compile says so
            return source, []
        with self._guard:
            view = self._views.get(key)
        if view is not None:
            return view
        path, extra, part = nvcc_input(source, self.workdir / "device")
        with self._guard:
            self._views[key] = (path, extra)
        if part is not None:
            with _SAID_LOCK:  # by content: the canary's scratch compiler and the run's write copies of their own
                first = path.name not in _SAID
                _SAID.add(path.name)
            if first:
                lines = ", ".join(f"{a}-{b}" if b > a else str(a) for a, b in part.lines)
                log.warning("%s is a PyTorch extension's file: its binding (line%s %s) is left out, which the tuner "
                            "never runs, and its device code is compiled", source.name,
                            "s" if "," in lines or "-" in lines else "", lines)
        return path, extra

    def headers(self, source: Path, frontend_argv: Sequence[str]) -> tuple[Path, ...]:
        """The files ``source`` reads outside the toolchain under these front-end arguments (``header_deps``,
        asked once per include-changing argument set)."""
        wanted = tuple(a for a in frontend_argv if a.startswith(_INCLUDE_CHANGING))
        with self._guard:
            deps = self._deps.get(wanted)
        if deps is None:
            source, extra = self.compiled(source)
            try:
                deps = header_deps(self.nvcc, self.arch, source, [*self.context.argv(), *extra, *wanted],
                                   min(self.timeout_s, DEPS_TIMEOUT_S))
            except ConfigurationError as exc:
                if self.timeout_s >= DEPS_TIMEOUT_S:
                    raise
                raise ConfigurationError(f"{exc} (that limit is the run's compile limit, timeout_s / --timeout "
                                         f"{self.timeout_s:g} s: raise it if the compiler is only slow)") from None
            with self._guard:
                self._deps[wanted] = deps
        return deps

    def _digest(self, source: Path, frontend_argv: Sequence[str]) -> str:
        """sha256 of the source and of every header it reads (a changed header is a new key)."""
        h = hashlib.sha256(source.read_bytes())
        for f in self.headers(source, frontend_argv):
            with contextlib.suppress(OSError):  # a header that is gone: the compile says so
                h.update(str(f).encode() + b"\0" + f.read_bytes())
        return h.hexdigest()


#: What nvcc's own steps read in an argument: it runs cicc, ptxas and fatbinary through a shell, each argument in
#: double quotes, inside which these still act (a file named 'k$(cmd).cu' would run cmd); a define's quotes nvcc
#: escapes itself (-DMSG="a b" is a string), its $, backquotes and backslashes not.
_SHELL_CHARS, _DEFINE_SHELL_CHARS = frozenset('$`"\\'), frozenset("$`\\")


def shell_safe(argv: Sequence[str]) -> list[str]:
    """``argv`` (an nvcc command), refused where an argument holds a character nvcc's shell steps would act on.

    Raises:
        ConfigurationError: Naming the argument (a path of the kernel, its headers or the work folder) and the fix.
    """
    for arg in argv[1:]:
        if set(arg) & (_DEFINE_SHELL_CHARS if arg.startswith("-D") else _SHELL_CHARS):
            raise ConfigurationError(
                "an nvcc argument (a path of the kernel, its include folders or the work folder; a define's value) "
                f"must hold none of $ ` \" \\ (a define: none of $ ` \\), which nvcc's own shell steps would act on (a "
                f"file named 'k$(cmd).cu' would run cmd), but got {arg!r}; rename that file or folder, or copy the "
                "kernel to a path without them")
    return list(argv)


def _ptx_of(source: Path) -> str:
    """What a compile error calls a source's PTX, in place of the scratch file's path."""
    return f"{source.stem}.ptx (nvcc -ptx of {source.name})"


#: Front-end arguments that can change which headers are read.
_INCLUDE_CHANGING = ("-D", "-U", "-I", "-std", "--std", "-include", "-isystem")


def nvcc_input(source: Path, folder: Path) -> tuple[Path, list[str], DevicePart | None]:
    """The file nvcc is given for ``source``, the arguments that come with it, and the device part where there is
    one: ``-x cu`` for a suffix other than .cu (a .cuh of kernels: nvcc goes by the suffix); for a PyTorch
    extension's file, its device part (``binding.device_part``: the binding left out, every line where it was)
    written into ``folder`` once per content, with the source's folder searched for its quoted includes and what the
    binding's headers brought the device code (fp16, bf16, fixed-width ints) included first."""
    language = [] if source.suffix == ".cu" else ["-x", "cu"]
    try:
        text = source.read_text(errors="replace")
    except OSError:  # the compile says so
        return source, language, None
    part = device_part(text)
    if part is None:
        return source, language, None
    out = folder / f"{hashlib.sha256(text.encode()).hexdigest()[:16]}-{source.name}"
    if not out.exists():
        out.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(out, part.text)
    return out, ["-I", str(source.parent), *BINDING_PRE_INCLUDES, *language], part


def header_deps(nvcc: str, arch: str, source: Path, argv: Sequence[str],
                timeout_s: float | None = None) -> tuple[Path, ...]:
    """The files a CUDA source reads outside the toolchain (``nvcc -MM``: the kernel's own and its include
    directories' headers, not the CUDA toolkit's, which its version covers), sorted; when the dependency scan
    fails (e.g. a missing header) the header files beside the source instead.

    Raises:
        ConfigurationError: If nvcc hangs on the scan (limit ``timeout_s``, default ``DEPS_TIMEOUT_S``).
    """
    limit = DEPS_TIMEOUT_S if timeout_s is None else timeout_s
    shell_safe([nvcc, *argv, str(source)])
    return scan_deps([nvcc, f"-arch={arch}", "-MM", *argv], source, limit, Path(nvcc).resolve().parent.parent)


_ARCH_PROBES: dict[tuple[str, str], str] = {}
_PROBE = "__global__ void compileiq_probe(int *p) { p[0] = 1; }\n"


def arch_problem(nvcc: str, arch: str) -> str:
    """Why this nvcc (and its ptxas) cannot build for ``arch``, or "" when it can: an arch in ``--list-gpu-arch``
    is taken as it is, any other (``sm_90a``, ``sm_100f`` ...) is asked of the tools with a one-line probe compile,
    cached per nvcc and arch."""
    archs = supported_archs(nvcc)
    if not archs or arch in archs:
        return ""
    key = (nvcc, arch)
    if key not in _ARCH_PROBES:
        with tempfile.TemporaryDirectory(prefix="arch-probe-") as tmp:
            src = Path(tmp) / "probe.cu"
            src.write_text(_PROBE)
            res = probe_tool([nvcc, f"-arch={arch}", "-cubin", str(src), "-o", str(Path(tmp) / "probe.cubin")],
                             ARCH_PROBE_TIMEOUT_S)
        first = first_line(res.stderr + "\n" + res.stdout)
        _ARCH_PROBES[key] = "" if res.returncode == 0 else (
            f"this nvcc ({tool_version(nvcc)}) cannot target {arch!r}: a probe compile for it failed ({first}); "
            f"it targets {archs} and the variants of those it accepts (e.g. 'sm_90a' where the toolchain has it)")
    return _ARCH_PROBES[key]


def ptx_problem(ptxas: str, version: str | None, target: str | None, arch: str) -> str:
    """Why this ptxas cannot assemble a PTX module of ISA ``version`` and ``.target`` for ``arch``, or "" when it
    can: asked of ptxas itself with a stub module of the same header (cached per ptxas and header)."""
    key = (ptxas, f"{version}|{target}|{arch}")
    if key not in _ARCH_PROBES:
        with tempfile.TemporaryDirectory(prefix="ptx-probe-") as tmp:
            src = Path(tmp) / "probe.ptx"
            src.write_text(f".version {version or '7.0'}\n.target {target or arch}\n.address_size 64\n"
                           ".visible .entry compileiq_probe() { ret; }\n")
            res = probe_tool([ptxas, f"-arch={arch}", str(src), "-o", str(Path(tmp) / "probe.cubin")],
                             ARCH_PROBE_TIMEOUT_S)
        said = " ".join(ln.split("fatal", 1)[-1].lstrip(" :") for ln in (res.stderr + res.stdout).splitlines()
                        if "fatal" in ln and "aborted" not in ln)
        _ARCH_PROBES[key] = "" if res.returncode == 0 else (
            f"the PTX (.version {version}, .target {target}) must be assembled for --arch {arch} by the installed "
            f"ptxas ({tool_version(ptxas)}), but ptxas says: {said or first_line(res.stderr + res.stdout)}. "
            + ("Regenerate the PTX for an ISA this ptxas reads (Triton: ptx_version; nvcc: an older toolkit), or "
               "install a newer CUDA toolkit." if ".version" in said.lower() else
               f"Pass --arch {target} (the module's own target), or regenerate the PTX for {arch} (nvcc -ptx "
               f"-arch={arch})."))
    return _ARCH_PROBES[key]


def supported_archs(nvcc: str) -> list[str]:
    """Real GPU targets of an nvcc (``--list-gpu-arch``, compute_XX turned into sm_XX).

    Raises:
        ConfigurationError: If nvcc cannot be started or hangs (limit ``PROBE_TIMEOUT_S``).
    """
    res = probe_tool([nvcc, "--list-gpu-arch"])
    found = {a.replace("compute_", "sm_") for a in re.findall(r"compute_\d+[a-z]?", res.stdout)}
    return sorted(found, key=lambda a: (int(re.sub(r"\D", "", a)), a))  # by number: sm_75 before sm_100
