"""The package version, importable without loading the package's public API."""

__version__ = "0.1.0"
