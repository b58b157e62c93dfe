"""Shared fixtures: quiet temporary run stores and the toy problem."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from compileiq_lab.testing import toy_objective, toy_space


@pytest.fixture
def store_path(tmp_path: Path) -> str:
    """A fresh run-store path inside the test's temporary folder."""
    return str(tmp_path / "run.db")


@pytest.fixture
def toy() -> tuple[Any, dict[str, Any]]:
    """The quickstart objective and its space."""
    return toy_objective, toy_space()


@pytest.fixture(autouse=True)
def _no_default_store_in_repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Search(store=None) writes under ./compileiq_runs: keep that inside the test folder
    monkeypatch.chdir(tmp_path)
