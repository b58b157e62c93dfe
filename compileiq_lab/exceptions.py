"""Exception hierarchy (one root; members also inherit the matching built-in) and the spelling hint of messages."""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping, Sequence

__all__ = [
    "CompileIQLabError",
    "ConfigurationError",
    "EnvironmentFaultError",
    "OptionalDependencyError",
    "SearchFailedError",
    "SearchStateError",
    "SpaceDefinitionError",
    "StaticOnlyKernelError",
    "StoreError",
    "StoreMismatchError",
    "did_you_mean",
]


class CompileIQLabError(Exception):
    """Root of every error raised by compileiq-lab."""


class SpaceDefinitionError(CompileIQLabError, ValueError):
    """A search-space parameter or space is defined with invalid values."""


class ConfigurationError(CompileIQLabError, ValueError):
    """A SearchConfiguration (or another user setting) has an invalid value."""


class StaticOnlyKernelError(ConfigurationError):
    """An objective that runs the kernel was asked of a kernel that can only be compiled (no entry, inputs, outputs,
    reference or launch)."""


class StoreError(CompileIQLabError, OSError):
    """The run store cannot be opened, read or written."""


class StoreMismatchError(StoreError):
    """A store holds a run whose space or configuration differs from the one given."""


class SearchStateError(CompileIQLabError, RuntimeError):
    """A method was called in a state where it cannot work (e.g. tell before ask)."""


class OptionalDependencyError(CompileIQLabError, ImportError):
    """An optional dependency needed by a feature is not installed."""


class SearchFailedError(CompileIQLabError, RuntimeError):
    """A run asked to end when its first generation failed entirely (``Search(exit_on_failure=True)``) did so."""


class EnvironmentFaultError(CompileIQLabError, OSError):
    """The machine failed, not the candidate (a full disk, a file-size limit): the run stops, nothing is recorded
    for the candidate and nothing partial is cached, so a resumed run evaluates it again."""


def did_you_mean(got: str | Iterable[str], valid: Iterable[str],
                 aliases: Mapping[str, Sequence[str]] | None = None) -> str:
    """`` (did you mean 'registers'?)`` for the names in ``got`` close to one of ``valid`` (difflib's ratio of at
    least 0.6, case ignored), or "" where none is. ``aliases`` maps other spellings to the valid names they may mean
    (a control's command-line option: ``--maxrregcount`` means ``maxrregcount``; an option two controls share means
    either). With several names, each suggestion says which name it is for."""
    names = [got] if isinstance(got, str) else [str(g) for g in got]
    lower = {v.lower(): v for v in valid}
    found: list[tuple[str, str]] = []
    for name in names:
        meant = list((aliases or {}).get(name, ()))
        if not meant:
            meant = [lower[c] for c in difflib.get_close_matches(name.lower(), list(lower), n=1, cutoff=0.6)]
        if meant:
            found.append((" or ".join(repr(m) for m in meant), name))
    if not found:
        return ""
    shown = [m if len(names) == 1 else f"{m} for {n!r}" for m, n in found]
    return f" (did you mean {', '.join(shown)}?)"
