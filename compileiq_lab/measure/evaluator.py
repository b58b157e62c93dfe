"""KernelEvaluator: a config of compiler controls -> compile (a backend) -> metrics -> run (a runner) -> Measurement."""

from __future__ import annotations

import hashlib
import logging
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from compileiq_lab.exceptions import ConfigurationError, did_you_mean
from compileiq_lab.measure.backends.base import Backend
from compileiq_lab.measure.binary import inspect_elf
from compileiq_lab.measure.build import CompileOutcome, write_atomic
from compileiq_lab.measure.ignored import find_ignored
from compileiq_lab.measure.kernel import Kernel
from compileiq_lab.measure.measurement import Measurement
from compileiq_lab.measure.runner import Runner
from compileiq_lab.space import params as ss
from compileiq_lab.space.catalogs.base import Catalog, controls_of, run_argv
from compileiq_lab.toolchain.nvidia_acf import KEY as NVIDIA_ACF_KEY
from compileiq_lab.toolchain.tools import keep_lines

__all__ = ["MESSAGE_CHARS", "Built", "KernelEvaluator", "config_argv", "config_conflict", "finish_built",
           "kernel_space"]

log = logging.getLogger(__name__)


def config_argv(kernel: Kernel, catalog: Catalog, config: Mapping[str, Any],
                files: Mapping[str, str] | None = None) -> dict[str, list[str]]:
    """The compiler arguments of a config (controls + ``defines`` group + NVIDIA control file) per stage.

    CUDA: {"frontend": -D knobs + front-end controls, "backend": ptxas controls (+ ``--apply-controls FILE``)};
    C: {"c": -D knobs + the catalog's base arguments + controls}. ``files``: the control files' paths as written
    elsewhere (an ACF's, relative), by label; default: where the kernel run found them.
    """
    label = config.get(NVIDIA_ACF_KEY)
    path = None if label is None else files[label] if files is not None else kernel.nvidia_acfs[label].path
    return run_argv(catalog, config, kernel.define_args(config.get("defines")), path)


def _threads(value: Any) -> int:
    """Threads per block of a ``--maxntid`` value (``256`` or ``"16,16"``)."""
    total = 1
    for part in str(value).split(","):
        total *= int(part) if part.strip().isdigit() else 1
    return total


def kernel_space(kernel: Kernel, catalog: Catalog) -> dict[str, Any]:
    """The search space of a kernel run: the catalog's controls plus a ``defines`` group for the kernel's knobs.

    ``--maxntid`` values below the kernel's launch block are not offered (a launch with more threads than the
    assumed maximum fails); with none left the control is left out.
    """
    sp: dict[str, Any] = dict(catalog.space())
    block = getattr(kernel, "block_threads", lambda: None)()
    if block and "maxntid" in sp:
        param = sp["maxntid"]
        fits = [v for v in param.values if _threads(v) >= block]
        if not fits:
            del sp["maxntid"]
        elif len(fits) < len(param.values):
            sp["maxntid"] = ss.choice(fits, knockout_prob=param.knockout_prob)
    if kernel.defines:
        sp["defines"] = {k: ss.choice(list(v), default=v[0]) for k, v in kernel.defines.items()}
    if kernel.nvidia_acfs:  # "none" (the baseline) as likely as each file
        sp[NVIDIA_ACF_KEY] = ss.choice(sorted(kernel.nvidia_acfs), knockout_prob=1 / (len(kernel.nvidia_acfs) + 1))
    return sp


#: A failure's message is kept to this many characters: its start (the first error, a listing of the module's
#: kernels) and its end (the last error, the compiler's summary).
MESSAGE_CHARS = 1500


@dataclass
class Built:
    """A compiled candidate waiting for its run (the compile stage's result where runs happen on another machine).

    Attributes:
        binary: The compiled file's bytes.
        name: Its file name (the cache's: unique per code and launch).
        run_key: What makes two runs the same (machine-code hash + launch geometry): one run serves all of them.
        defines: The -D knob values (they set the launch geometry).
        metrics: The static metrics of the compile.
        detail: The row's detail so far (argv, code hash, ignored controls).
        objectives: Objective names, in score order.
    """

    binary: bytes
    name: str
    run_key: str
    defines: Mapping[str, Any] | None
    metrics: dict[str, float]
    detail: dict[str, Any]
    objectives: list[str] = field(default_factory=list)


def finish_built(built: Built, run: Mapping[str, Any]) -> Measurement:
    """The Measurement of a built candidate once its run is back (``run``: status, error, metrics, reused)."""
    detail = {**built.detail, **({"run_reused": bool(run["reused"])} if "reused" in run else {})}
    metrics = dict(built.metrics)
    if run["status"] != "ok":
        return Measurement(run["status"], error=run["error"], detail={**detail, "metrics": metrics})
    metrics.update(run["metrics"])
    missing = [o for o in built.objectives if o not in metrics]
    if missing:
        return Measurement("error", error=f"no value for objectives {missing}", detail={**detail, "metrics": metrics})
    detail["metrics"] = metrics
    return Measurement("ok", scores=tuple(metrics[o] for o in built.objectives), detail=detail)


def config_conflict(catalog: Catalog, config: Mapping[str, Any]) -> str | None:
    """Why the compiler would reject a config (a known conflict of the catalog), or None."""
    return catalog.conflict(controls_of(config))


class KernelEvaluator:
    """Evaluate configs of one catalog on one kernel, through one compile backend and, for run objectives, a runner.

    The config holds catalog controls by name and, when the kernel declares ``-D`` knobs, a
    ``defines`` group. Known compiler conflicts are rejected before any compile (see
    ``constraint``). Candidates whose machine code is identical to an earlier one (same hash of
    the code sections, same launch) reuse that one's run measurement instead of running again.
    Controls the compiler says it ignored ("ignoring ..." warnings) are marked in the measurement
    (``ignored_controls``, ``effective_params``: the config without them) and, with ``learn``, the rule
    each teaches is kept in the row too (``ignored_rules``): the search learns it as it learns the conflicts
    failed compiles name (``compileiq_lab.search.conflicts``, ``SearchConfiguration.learn_conflicts``) and asks no
    config in it again, also where this evaluator runs in another process. With an entry, the static metrics and the
    code hash are that kernel's own.
    Build one with ``compileiq_lab.kernels.KernelRun``, which picks the backend and the runner.

    Args:
        kernel: The kernel spec.
        catalog: The controls searched.
        objectives: Objective names, in score order (static ones from the backend, run ones from the runner).
        backend: The compile path.
        runner: Runs the binaries (None when every objective is static, or when ``runs_elsewhere``).
        runs_elsewhere: Run objectives another process measures (``compile_stage`` then hands out a ``Built``).

    Raises:
        ConfigurationError: An objective neither the backend nor the runner measures.
    """

    def __init__(self, kernel: Kernel, catalog: Catalog, objectives: Sequence[str], backend: Backend,
                 runner: Runner | None = None, learn: bool = True,
                 runs_elsewhere: frozenset[str] = frozenset()) -> None:
        self.kernel, self.catalog, self.objectives = kernel, catalog, list(objectives)
        self.backend, self.runner = backend, runner
        measured = backend.metrics() | (runner.metrics() if runner is not None else runs_elsewhere)
        missing = [o for o in self.objectives if o not in measured]
        if missing or not self.objectives:
            raise ConfigurationError(f"objectives must be among {sorted(measured)} (what this {backend.name} build"
                                     f"{' and its runs' if runner else ''} measure), but got {self.objectives}"
                                     f"{did_you_mean(missing, measured)}")
        self._run_objectives = set(self.objectives) - backend.metrics()
        self._lock = threading.Lock()
        self._run_lock = threading.Lock()  # one timed run at a time: parallel runs distort each other
        self._by_hash: dict[str, dict[str, Any]] = {}
        self._hashes: set[str] = set()
        self.stats = {"compiles": 0, "unique_code": 0, "runs": 0, "runs_saved": 0, "conflicts": 0, "ignored": 0}
        self.learn = learn

    @property
    def gpu_info(self) -> dict[str, Any]:
        """The runner's device facts (the GPU's name, arch, driver, NVML state), else {}."""
        return self.runner.info if self.runner is not None else {}

    def close(self) -> None:
        """Release the runner (its worker process, if any; it also ends with this process)."""
        if self.runner is not None:
            self.runner.close()

    def __repr__(self) -> str:
        return (f"KernelEvaluator(kernel={self.kernel.name!r}, catalog={self.catalog.compiler!r}, "
                f"backend={self.backend.name!r}, objectives={self.objectives!r})")

    @property
    def code_hashes(self) -> set[str]:
        """Distinct machine codes seen so far."""
        return set(self._hashes)

    def toolchain(self) -> dict[str, str]:
        """Compiler versions used (for the run header)."""
        return self.backend.toolchain()

    def space(self) -> dict[str, Any]:
        """The search space: the catalog's controls plus a ``defines`` group for the kernel's knobs."""
        return kernel_space(self.kernel, self.catalog)

    def constraint(self, config: Mapping[str, Any]) -> str | None:
        """Why a config is not worth compiling: the compiler would reject it (a known conflict of the catalog); None
        otherwise. What a run learns (conflicts, ignored combinations) the search holds: see ``search.conflicts``."""
        return config_conflict(self.catalog, config)

    def argv(self, config: Mapping[str, Any]) -> dict[str, list[str]]:
        """The compiler arguments of a config, per stage."""
        return config_argv(self.kernel, self.catalog, config)

    def __call__(self, config: Mapping[str, Any]) -> Measurement:
        """Compile (and for run objectives, run) one config."""
        staged = self.compile_stage(config)
        if isinstance(staged, Measurement):
            return staged
        if self.runner is None:
            raise ConfigurationError("this evaluator's runs happen elsewhere; call compile_stage and hand the Built "
                                     "to a runner's evaluator (run_stage)")
        return finish_built(staged, self.run_stage(staged))

    def compile_stage(self, config: Mapping[str, Any]) -> Measurement | Built:
        """Compile one config: its final Measurement when there is nothing to run (a failure, static objectives
        only), else the ``Built`` candidate its run needs."""
        reason = config_conflict(self.catalog, config)  # a learned rule only steers the search: such code is valid
        if reason:
            with self._lock:
                self.stats["conflicts"] += 1
            return Measurement("compile_error", error=reason, detail={"conflict": True})
        argv = self.argv(config)
        outcome = self.backend.compile(argv)
        with self._lock:
            self.stats["compiles"] += 1
        if not outcome.ok or outcome.path is None:
            return Measurement(outcome.status, error=keep_lines(outcome.error, MESSAGE_CHARS),
                               detail={"argv": argv, "failed_stage": outcome.stage})
        info = inspect_elf(outcome.path, kind=self.backend.binary_kind, entry=outcome.symbol)
        metrics = dict(outcome.metrics)
        metrics.update(text_bytes=float(info.text_bytes), binary_size=float(info.file_bytes),
                       compile_time=metrics.get("frontend_time_s", 0.0) + metrics.get("backend_time_s", 0.0)
                       + metrics.get("compile_time_s", 0.0))
        if self.backend.binary_kind == "cubin":
            metrics["sass_instructions"] = float(info.sass_instructions)
        detail: dict[str, Any] = {"argv": argv, "code_hash": info.code_hash}
        if outcome.symbol:
            detail["entry_symbol"] = outcome.symbol
        self._mark_ignored(config, outcome.log, detail)
        with self._lock:
            detail["duplicate_code"] = info.code_hash in self._hashes
            self._hashes.add(info.code_hash)
        defines = config.get("defines")
        key = info.code_hash + self._launch_identity(defines)
        if not self._run_objectives:
            return finish_built(Built(b"", str(outcome.path), key, defines, metrics, detail, list(self.objectives)),
                                {"status": "ok", "error": "", "metrics": {}})
        if self.runner is None:  # the run happens on another machine: the binary travels with the Built
            name = hashlib.sha256(key.encode()).hexdigest()[:24] + outcome.path.suffix
            return Built(outcome.path.read_bytes(), name, key, defines, metrics, detail, list(self.objectives))
        return Built(b"", str(outcome.path), key, defines, metrics, detail, list(self.objectives))

    def run_stage(self, built: Built, folder: Path | None = None) -> dict[str, Any]:
        """Run a built candidate (once per run key: identical code under the same launch reuses the first run);
        returns its status, error, metrics and whether it was reused. A binary that travelled with the Built is
        written into ``folder`` first."""
        if self.runner is None:
            raise ConfigurationError("run_stage needs an evaluator with a runner (objectives measured by runs)")
        path = Path(built.name)
        if built.binary:
            if folder is None:
                raise ConfigurationError("run_stage needs a folder for a binary compiled elsewhere")
            path = folder / built.name
            path.parent.mkdir(parents=True, exist_ok=True)
            if not path.exists():
                write_atomic(path, built.binary)
        return self._run_once(self.runner, built.run_key, path, built.defines)

    def _launch_identity(self, defines: Mapping[str, Any] | None) -> str:
        """What besides the code makes two runs differ: the runner's say, else (runs elsewhere) the launch."""
        if self.runner is not None:
            return self.runner.identity(defines)
        if self._run_objectives and hasattr(self.kernel, "launch_dims"):
            return repr(self.kernel.launch_dims(defines))
        return ""

    def _mark_ignored(self, config: Mapping[str, Any], log_text: str, detail: dict[str, Any]) -> None:
        """Mark the controls the compiler ignored in ``detail``, with the rules they teach (see the class docstring)."""
        found = find_ignored(self.catalog, config, log_text) if log_text else []
        if not found:
            return
        detail["ignored_controls"] = {name: rule.message for name, rule in found}
        detail["effective_params"] = {k: v for k, v in config.items() if k not in detail["ignored_controls"]}
        with self._lock:
            self.stats["ignored"] += 1
        if self.learn:
            detail["ignored_rules"] = [rule.record() for _, rule in found]

    def compile(self, config: Mapping[str, Any]) -> CompileOutcome:
        """Compile one config through the backend (no conflict check, no run)."""
        return self.backend.compile(self.argv(config))

    def build(self, config: Mapping[str, Any]) -> tuple[Path, str]:
        """Compile one config (cached); returns (binary path, code hash).

        Raises:
            ConfigurationError: The config conflicts or does not compile.
        """
        reason = config_conflict(self.catalog, config)
        outcome = None if reason else self.compile(config)
        if outcome is None or not outcome.ok or outcome.path is None:
            why = reason or (outcome.error if outcome is not None else "")
            raise ConfigurationError(f"the config must compile, but it failed: {why[-400:]}")
        return outcome.path, self.identity(outcome)

    def identity(self, outcome: CompileOutcome, whole: bool = False) -> str:
        """The machine-code hash of a successful compile: the entry's own code when the run names an entry, unless
        ``whole`` (the whole module, as version-1 ACFs recorded it)."""
        if outcome.path is None:
            raise ConfigurationError("identity() needs a successful compile")
        entry = None if whole else outcome.symbol
        return inspect_elf(outcome.path, kind=self.backend.binary_kind, entry=entry).code_hash

    def _run_once(self, runner: Runner, key: str, binary: Path,
                  defines: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """``key``: the code hash and the launch (the same code under another launch geometry is another run)."""
        with self._run_lock:
            if key in self._by_hash:
                with self._lock:
                    self.stats["runs_saved"] += 1
                return {**self._by_hash[key], "reused": True}
            r = runner.run(binary, defines)
            result = {"status": r.status, "error": r.error, "metrics": dict(r.metrics), "reused": False}
            self._by_hash[key] = result
        with self._lock:
            self.stats["runs"] += 1
            self.stats["unique_code"] += 1
        return result
