"""Exception hierarchy: one root, members also inherit the matching built-in."""

from __future__ import annotations

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
