"""Shared fixtures: quiet temporary run stores and the toy problem."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from compileiq_lab.exceptions import ConfigurationError
from compileiq_lab.testing import toy_objective, toy_space


@pytest.fixture
def store_path(tmp_path: Path) -> str:
    """A fresh run-store path inside the test's temporary folder."""
    return str(tmp_path / "run.db")


@pytest.fixture
def toy() -> tuple[Any, dict[str, Any]]:
    """The quickstart objective and its space."""
    return toy_objective, toy_space()


@pytest.fixture
def one_line_error() -> Callable[..., str]:
    """``one_line_error(call, *args, **kwargs)``: the message of the ConfigurationError the call raises, checked to be
    one line."""
    def error(call: Callable[..., Any], *args: Any, **kwargs: Any) -> str:
        with pytest.raises(ConfigurationError) as info:
            call(*args, **kwargs)
        text = str(info.value)
        assert "\n" not in text, text
        return text

    return error


@pytest.fixture(autouse=True)
def _no_default_store_in_repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Search(store=None) writes under ./compileiq_runs: keep that inside the test folder
    monkeypatch.chdir(tmp_path)


_GPU_REASON: list[str | None] = []


def gpu_reason() -> str | None:
    """Why GPU tests cannot run here (probed once, in a subprocess), or None."""
    if not _GPU_REASON:
        from compileiq_lab.measure.gpu import gpu_unavailable_reason

        _GPU_REASON.append(gpu_unavailable_reason())
    return _GPU_REASON[0]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Skip tests marked ``gpu`` where no NVIDIA GPU is usable through CuPy, saying why."""
    gpu_items = [item for item in items if "gpu" in item.keywords]
    if not gpu_items:
        return
    reason = gpu_reason()
    if reason:
        for item in gpu_items:
            item.add_marker(pytest.mark.skip(reason=f"needs an NVIDIA GPU: {reason}"))
