"""Minimal control sets: drop a point's controls one at a time while its machine code stays the same."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from compileiq_lab.exceptions import ConfigurationError
from compileiq_lab.measure.evaluator import config_conflict

if TYPE_CHECKING:
    from compileiq_lab.kernels.run import KernelRun

__all__ = ["Minimal", "minimal_controls"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Minimal:
    """A point's smallest control set found that compiles to the same machine code.

    Attributes:
        controls: The kept controls (the ``defines`` group, if any, kept as it is).
        dropped: {control: why} of the controls left out.
        code_hash: The machine-code hash both sets compile to (the entry's own when the run names one).
        compiles: Compiles it took.
    """

    controls: dict[str, Any]
    dropped: dict[str, str] = field(default_factory=dict)
    code_hash: str = ""
    compiles: int = 0


def minimal_controls(run: KernelRun, params: Mapping[str, Any], ignored: Mapping[str, str] | None = None) -> Minimal:
    """Drop ``params``' controls one at a time (those the compiler ignored first, then in catalog order), each
    time compiling the reduced set and keeping the drop only if the machine code is unchanged; then compile the
    final set once more to check it. Greedy and sequential: of two controls that only matter together, the first
    dropped is kept out only while the second still gives the same code, so both are never dropped.

    Args:
        run: The kernel run (a build-only one is enough).
        params: The point's controls.
        ignored: {control: compiler warning} of controls the compiler said it ignored for this point.

    Raises:
        ConfigurationError: The point does not compile, or the final set does not reproduce its code.
    """
    ev = run.evaluator
    outcome = ev.compile(params)
    if not outcome.ok:
        raise ConfigurationError(f"the point must compile to be minimised, but it failed: {outcome.error[-300:]}")
    target, compiles = ev.identity(outcome), 1
    current, dropped = dict(params), {}
    ignored = dict(ignored or {})
    order = [c.name for c in run.catalog.controls if c.name in current]
    order.sort(key=lambda name: name not in ignored)
    for name in order:
        trial = {k: v for k, v in current.items() if k != name}
        if config_conflict(run.catalog, trial):
            continue
        out = ev.compile(trial)
        compiles += 1
        if out.ok and ev.identity(out) == target:
            current = trial
            dropped[name] = (f"ignored by the compiler: {ignored[name]}" if name in ignored
                             else "no effect: the machine code is identical without it")
    if dropped:
        final = ev.compile(current)
        compiles += 1
        if not final.ok or ev.identity(final) != target:
            raise ConfigurationError(f"the minimal set {current} must reproduce the point's machine code, but it "
                                     "does not (a non-deterministic compiler?); export with --no-minimize")
    log.info("minimal set: dropped %s in %d compiles", sorted(dropped), compiles)
    return Minimal(current, dropped, target, compiles)
