"""Where a tune run's warm start comes from: the run it continues, a run named with --warm-start, or the earlier runs
of the same kernel found beside its store."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from compileiq_lab.analysis.registry import warm_start_configs
from compileiq_lab.exceptions import CompileIQLabError, ConfigurationError
from compileiq_lab.kernels import KernelRun
from compileiq_lab.store import DEFAULT_DIR, KernelMeta, load_results

__all__ = ["check_warm_start", "warm_start"]


def check_warm_start(args: argparse.Namespace) -> None:
    """Refuse a --warm-start store that is not there, before anything is built (the warm start is read after the
    canary's builds)."""
    given = args.warm_start
    if given not in ("auto", "none") and not _continues(args) and not Path(given).is_file():
        raise ConfigurationError(f"--warm-start takes auto, none or a run store's .db file, but got {given!r}, which "
                                 f"{'is a folder' if Path(given).is_dir() else 'does not exist'}; name an existing "
                                 f"run's .db (tune writes them to {DEFAULT_DIR}/ unless --store names one), or auto")


def warm_start(args: argparse.Namespace, run: KernelRun,
                facts: dict[str, Any]) -> tuple[list[dict[str, Any]], list[str]]:
    """Configs from earlier runs (see --warm-start); when continuing an existing store, the ones it started with
    (a continued run keeps its trajectory, whatever other runs the folder holds by now). ``facts``: the run's
    ``metadata()``."""
    if _continues(args):
        return _stored_warm_start(args.store)
    if args.warm_start == "none":
        return [], []
    if args.warm_start != "auto":
        given = load_results(args.warm_start)
        other = given.header.kernel.kernel if given.header.kernel is not None else None
        if other is not None and other != run.kernel.name:
            print(f"note: --warm-start {args.warm_start} is a run of kernel {other!r}, not {run.kernel.name!r}: "
                  "only its configs this run's space takes start it", file=sys.stderr)
        return [r.params for r in given.front_records() if r.params], [args.warm_start]
    directory = Path(args.store).resolve().parent if args.store else Path(DEFAULT_DIR)
    meta = KernelMeta.from_dict(facts)  # its entry as stored runs are matched on (a bare file's or kernel.toml's)
    return warm_start_configs(run.kernel.name, run.arch, run.catalog_name, directory,
                              source_sha256=facts["source_sha256"], entry=meta.entry if meta else None,
                              build=facts.get("build"), headers_sha256=facts.get("headers_sha256"))


def _continues(args: argparse.Namespace) -> bool:
    """Whether the run continues a store that exists (which keeps the warm start it was made with)."""
    return bool(args.store and Path(args.store).exists())


def _stored_warm_start(path: str) -> tuple[list[dict[str, Any]], list[str]]:
    """The warm start a stored run was made with; none when its header cannot be read (opening the store then
    says what is wrong with it)."""
    try:
        header = load_results(path).header
    except CompileIQLabError:
        return [], []
    sources = header.metadata.get("warm_start_from")
    return list(header.config.get("warm_start") or []), [str(s) for s in sources] if isinstance(sources, list) else []
