"""Triton kernels as PTX without a GPU: a user's ``@triton.jit`` function compiled up to Triton's 'ptx' stage."""

from __future__ import annotations

import hashlib
import importlib
import importlib.metadata
import importlib.util
import json
import logging
import re
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from compileiq_lab.exceptions import ConfigurationError
from compileiq_lab.kernels.rules import fail, need
from compileiq_lab.kernels.triton_args import SIGNATURE_HINT, TRITON_PREFIX, check_launch, parse_signature
from compileiq_lab.kernels.triton_pipeline import (
    TRITON_MISSING,
    Attrs,
    Triton,
    compile_error,
    constexprs_of,
    environment,
    jit_function,
    load_module,
    to_ptx,
)
from compileiq_lab.measure.build import write_atomic
from compileiq_lab.measure.entries import ptx_entries, ptx_header

__all__ = ["TRITON_DEFAULT_ARCH", "TRITON_MISSING", "TritonPtx", "installed_triton_version", "triton_arch",
           "triton_ptx"]

log = logging.getLogger(__name__)

_ARCH = re.compile(r"sm_(\d+)(a?)\Z")
_PTX_VERSION = re.compile(r"(\d+)\.(\d)\Z")
#: The PTX ISA a ``.target`` needs at least (PTX ISA manual, "PTX Target Architecture"); unlisted ones unchecked.
_MIN_PTX = {"sm_75": "6.3", "sm_80": "7.0", "sm_86": "7.1", "sm_87": "7.4", "sm_89": "7.8", "sm_90": "7.8",
            "sm_90a": "8.0", "sm_100": "8.6", "sm_100a": "8.6", "sm_101": "8.6", "sm_101a": "8.6", "sm_103": "8.8",
            "sm_103a": "8.8", "sm_110": "9.0", "sm_110a": "9.0", "sm_120": "8.7", "sm_120a": "8.7",
            "sm_121": "8.8", "sm_121a": "8.8"}
#: Instructions only an arch-specific target (sm_90a, sm_100a ...) has: PTX using one has no plain-target form.
_ARCH_SPECIFIC = re.compile(r"(?m)^\s*(?:@!?%p\d+\s+)?((?:wgmma|setmaxnreg|tcgen05)\.[\w.:]*)")
#: Triton's switches (environment variables its passes read) that keep the arch-specific matrix instructions out:
#: wgmma (MMA v3, sm_90a) and tcgen05 (MMA v5, sm_100a); Triton has no option for them.
_PLAIN_TARGET_ENV = {"DISABLE_MMA_V3": "1", "DISABLE_MMA_V5": "1"}
#: The names Triton gives the pointer parameters it appends to every kernel, in order (Triton 3.6 appends both,
#: 3.4 the first only).
_TRITON_PARAMS = ("global_scratch", "profile_scratch")
_PTX_PARAM = re.compile(r"\.param\s+[^,)]*?(\w+)\s*[,)]")
_CACHE_FORMAT = 1


@dataclass(frozen=True)
class TritonPtx:
    """The PTX Triton generated for one kernel, and what a launch of it needs.

    ``signature`` holds the runtime parameters in the function's order (a ``:16`` hint kept as given); they are
    the PTX entry's first parameters, and ``params`` names all of them, Triton's own trailing pointers included.
    A launch uses ``num_warps * 32`` threads per block, ``shared_bytes`` of dynamic shared memory and, where
    ``global_scratch_bytes`` > 0, a global buffer of that many bytes per program for the ``global_scratch``
    pointer (else null; ``profile_scratch`` is null outside Triton's profiler).
    """

    path: Path
    entry: str
    target: str
    ptx_version: str
    triton_version: str
    signature: dict[str, str]
    constexprs: dict[str, int | float | bool | str]
    num_warps: int
    num_stages: int
    shared_bytes: int
    params: tuple[str, ...] = ()
    global_scratch_bytes: int = 0


def installed_triton_version() -> str | None:
    """Triton's version where it is installed here, else None (read from the package metadata: nothing imported
    unless the distribution is not named ``triton``)."""
    if importlib.util.find_spec("triton") is None:
        return None
    try:
        return importlib.metadata.version("triton")
    except importlib.metadata.PackageNotFoundError:
        pass
    try:
        return str(importlib.import_module("triton").__version__)
    except Exception:  # noqa: BLE001 - a broken install is "no usable Triton", said by triton_ptx when used
        return None


#: A Triton kernel's target where no GPU is here to take it from (Triton's own for a compute capability 9.0 GPU).
TRITON_DEFAULT_ARCH = "sm_90a"


def triton_arch(gpu: str | None) -> str:
    """The target a Triton kernel is compiled for when none is given: the GPU's own as Triton picks it (its
    arch-specific variant from sm_90 on: "sm_90" -> "sm_90a", "sm_80" stays), or ``TRITON_DEFAULT_ARCH`` without
    a GPU (``gpu`` None)."""
    if gpu is None:
        return TRITON_DEFAULT_ARCH
    cc, specific = _parse_arch(gpu)
    return gpu if specific or cc < 90 else f"{gpu}a"


def _parse_arch(arch: str) -> tuple[int, bool]:
    match = _ARCH.match(arch) if isinstance(arch, str) else None
    need(match, "arch", "the target looks like 'sm_90' or 'sm_90a'", arch,
         "Triton compiles for one compute capability: sm_<major><minor>, with 'a' for the arch-specific target.")
    assert match is not None
    cc, specific = int(match.group(1)), bool(match.group(2))
    need(not specific or cc >= 90, "arch", "only sm_90 and later have an arch-specific ('a') target", arch,
         f"Use sm_{cc}.")
    return cc, specific


def _ptx_isa(version: str | None, target: str) -> int | None:
    if version is None:
        return None
    match = _PTX_VERSION.match(version) if isinstance(version, str) else None
    need(match, "ptx_version", "the PTX ISA version looks like '9.0'", version,
         "Give the version the installed ptxas reads (ptxas 13.0 reads up to 9.0, 12.8 up to 8.7).")
    assert match is not None
    isa = int(match.group(1)) * 10 + int(match.group(2))
    least = _MIN_PTX.get(target)
    if least is not None and isa < int(least.replace(".", "")):
        raise fail("ptx_version", f"the PTX ISA version is at least {least}, the first that has .target {target}",
                   version, "Triton can lower the version it writes only as far as the target allows: raise it, "
                            "or use a newer ptxas.")
    return isa


def _cached(meta_path: Path) -> TritonPtx | None:
    try:
        data = json.loads(meta_path.read_text(encoding="utf-8"))
        if data.pop("cache_format") != _CACHE_FORMAT:
            return None
        data["path"] = meta_path.with_suffix(".ptx")
        data["params"] = tuple(data["params"])
        result = TritonPtx(**data)
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return result if result.path.is_file() else None


def triton_ptx(module: Path, function: str, signature: Mapping[str, str] | str, constexprs: Mapping[str, Any],
               arch: str, out_dir: Path, *, ptx_version: str | None = None, num_warps: int = 4,
               num_stages: int = 3) -> TritonPtx:
    """Compile the ``@triton.jit`` ``function`` of the user's file ``module`` to PTX for ``arch`` (sm_90, sm_90a,
    sm_100a ...) without a GPU, into ``out_dir`` (reused while the file, the function with what it calls, the
    arguments, Triton's version and its environment switches are the same).

    ``signature`` types the runtime parameters (text or mapping, see :func:`parse_signature`), ``constexprs`` gives
    the ``tl.constexpr`` parameters (their defaults otherwise) and may also fix a runtime parameter to a constant.
    ``ptx_version`` (e.g. "8.7") is the PTX ISA version written in the file, for a ptxas older than the one Triton
    bundles; by default Triton's choice (from its bundled ptxas: 8.7 for Triton 3.6 up to sm_90a, 8.8 beyond).

    Triton targets the arch-specific variant (sm_90a) from compute capability 9.0 on; for a plain target (sm_90)
    Triton's arch-specific matrix instructions (wgmma, tcgen05) are switched off while it compiles
    (``DISABLE_MMA_V3``/``DISABLE_MMA_V5`` in the environment, restored after) and the ``.target`` is rewritten.

    Raises:
        OptionalDependencyError: Triton is not installed.
        ConfigurationError: A bad reference, signature, constant or option; the file fails to import; the name is no
            @triton.jit function; Triton cannot compile it for ``arch``.
    """
    who = f"Triton kernel {TRITON_PREFIX}{module}:{function}"
    module = Path(module).resolve()
    need(module.is_file() and module.suffix == ".py", who, "the file is an existing .py file", str(module),
         "Check the path.")
    cc, specific = _parse_arch(arch)
    target = f"sm_{cc}a" if specific else f"sm_{cc}"
    isa = _ptx_isa(ptx_version, target)
    check_launch(who, num_warps, num_stages)
    t = Triton()
    fn = jit_function(t, load_module(module, who, function), function, who)
    values = constexprs_of(fn, constexprs, who)
    runtime = [p.name for p in fn.params if not p.is_constexpr and p.name not in values]
    types = parse_signature(signature, runtime) if isinstance(signature, str) else parse_signature(
        ",".join(f"{k}={v}" for k, v in signature.items()), runtime)

    options: dict[str, Any] = {"num_warps": num_warps, "num_stages": num_stages, "arch": f"sm{cc}"}
    if isa is not None:
        options["ptx_version"] = isa
    env = {} if specific or cc < 90 else _PLAIN_TARGET_ENV
    ptx_path = _cache_path(t, module, function, fn, (types, values, target, options), env, Path(out_dir))
    hit = _cached(ptx_path.with_suffix(".json"))
    if hit is not None:
        log.debug("%s: PTX for %s reused from %s", who, target, hit.path)
        return hit

    start = time.perf_counter()
    with environment(env):
        ptx, metadata = _compile(t, fn, types, values, cc, options, who, target)
    elapsed = time.perf_counter() - start

    ptx, version = _for_target(ptx, who, cc, specific, ptx_version if isa is not None else None, t.version)
    entries = ptx_entries(ptx)
    entry = str(metadata.get("name") or (entries[0] if entries else function))
    count = len(_entry_params(ptx, entry))
    params = tuple(runtime) + _TRITON_PARAMS[:max(0, count - len(runtime))]
    if count != len(params):
        log.warning("%s: the PTX entry %s has %d parameters; expected %d (%s)", who, entry, count, len(params),
                    ", ".join(params))
    result = TritonPtx(path=ptx_path, entry=entry, target=target, ptx_version=version,
                       triton_version=t.version, signature=types, constexprs=values,
                       num_warps=int(metadata.get("num_warps") or num_warps), num_stages=num_stages,
                       shared_bytes=int(metadata.get("shared") or 0), params=params,
                       global_scratch_bytes=int(metadata.get("global_scratch_size") or 0))
    _write(result, ptx)
    log.info("%s: PTX for %s (PTX ISA %s) by Triton %s in %.1f s: %s", who, target, version, t.version,
             elapsed, ptx_path)
    return result


def _cache_path(t: Triton, module: Path, function: str, fn: Any,
                arguments: tuple[Mapping[str, str], Mapping[str, Any], str, Mapping[str, Any]], env: Mapping[str, str],
                out_dir: Path) -> Path:
    """Where the PTX of ``function`` (``fn``) for these ``arguments`` (signature types, constants, target, Triton's
    options) is kept in ``out_dir``: named by a hash of the file, the function with what it calls, the arguments,
    Triton's version and the environment switches it reads (as they will be while it compiles), so that any change
    compiles anew."""
    types, values, target, options = arguments
    with environment(env):
        switches = t.libtriton.get_cache_invalidating_env_vars()
    key_data = {"format": _CACHE_FORMAT, "file": hashlib.sha256(module.read_bytes()).hexdigest(),
                "function": function, "code": fn.cache_key, "signature": types,
                "constexprs": {k: [type(v).__name__, v] for k, v in values.items()}, "arch": target,
                "options": options, "triton": t.version, "env": switches}
    key = hashlib.sha256(json.dumps(key_data, sort_keys=True, default=str).encode()).hexdigest()[:16]
    out_dir.mkdir(parents=True, exist_ok=True)
    return out_dir / f"{function}.{target}.{key}.ptx"


def _compile(t: Triton, fn: Any, types: Mapping[str, str], values: Mapping[str, Any], cc: int,
             options: Mapping[str, Any], who: str, target: str) -> tuple[str, dict[str, Any]]:
    """Triton's PTX of ``fn`` and its metadata; whatever Triton raises is the kernel's failure, said in one line
    (all of it in the log)."""
    sig = {name: ("constexpr" if name in values else types[name].removesuffix(SIGNATURE_HINT))
           for name in fn.arg_names if name in values or name in types}
    attrs: Attrs = {(fn.arg_names.index(k),): [["tt.divisibility", 16]]
                    for k, v in types.items() if v.endswith(SIGNATURE_HINT)}
    try:
        return to_ptx(t, fn, sig, dict(values), attrs, cc, dict(options))
    except KeyboardInterrupt:
        raise
    except Exception as exc:
        log.debug("%s: Triton failed for %s", who, target, exc_info=True)
        raise compile_error(t, exc, fn, who, target) from None


def _for_target(ptx: str, who: str, cc: int, specific: bool, version: str | None,
                triton_version: str) -> tuple[str, str]:
    """Triton's PTX for the target asked for, and its PTX ISA version: a plain target's (sm_90 from compute capability
    9.0 on) ``.target`` rewritten from the arch-specific one Triton writes, refused where it still uses an
    arch-specific instruction; checked to have that ``.target`` and the PTX ISA ``version`` asked for (any, where
    None)."""
    target = f"sm_{cc}a" if specific else f"sm_{cc}"
    if not specific and cc >= 90:
        ptx = re.sub(rf"(?m)^(\s*\.target\s+)sm_{cc}a\b", rf"\1sm_{cc}", ptx)
        found = _ARCH_SPECIFIC.search(ptx)
        if found:
            raise fail(who, f"the PTX for {target} uses no instruction only sm_{cc}a has", found.group(1),
                       f"Triton emitted it anyway; compile for --arch sm_{cc}a.")
    header = ptx_header(ptx)
    if header.target != target or header.version is None or (version is not None and header.version != version):
        raise ConfigurationError(f"{who}: `Triton writes .target {target}` and the PTX ISA version asked for "
                                 f"must hold, but its PTX has .target {header.target} and .version "
                                 f"{header.version}. Triton {triton_version} cannot produce that target or version.")
    return ptx, header.version


def _write(result: TritonPtx, ptx: str) -> None:
    """The PTX at ``result.path`` and, beside it, the record ``_cached`` reads back (written last: a PTX file
    without its record is compiled again)."""
    write_atomic(result.path, ptx.encode("utf-8"))
    record = {k: v for k, v in asdict(result).items() if k != "path"}
    record.update(cache_format=_CACHE_FORMAT, params=list(result.params))
    text = json.dumps(record, indent=1, sort_keys=True) + "\n"
    write_atomic(result.path.with_suffix(".json"), text.encode("utf-8"))


def _entry_params(ptx: str, entry: str) -> list[str]:
    """The parameter names of the PTX entry ``entry``, in order."""
    match = re.search(rf"\.entry\s+{re.escape(entry)}\s*\(([^)]*)\)", ptx)
    return _PTX_PARAM.findall(match.group(1) + ")") if match else []
