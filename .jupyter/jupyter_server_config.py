"""Jupyter server config for `make lab`: notebooks are saved without outputs, execution counts or widget state."""

from __future__ import annotations

import warnings
from typing import Any

# cell metadata that only describes a run or its outputs (timings, collapsed/scrolled output areas)
RUN_CELL_METADATA = ("execution", "collapsed", "scrolled", "ExecuteTime")


def strip_notebook(nb: dict[str, Any]) -> dict[str, Any]:
    """Drop what running a notebook adds to it, in place; returns ``nb``.

    Code cells lose their outputs and execution counts, every cell its run metadata, the notebook
    its widget state and the kernel's language details beyond the language name. What is left is
    what the repository stores, so saving a notebook after running it leaves the file unchanged.
    """
    for cell in nb.get("cells", []):
        if cell.get("cell_type") == "code":
            cell["outputs"] = []
            cell["execution_count"] = None
        meta = cell.get("metadata", {})
        for key in RUN_CELL_METADATA:
            meta.pop(key, None)
        jupyter = meta.get("jupyter")
        if isinstance(jupyter, dict):
            jupyter.pop("outputs_hidden", None)
            if not jupyter:
                del meta["jupyter"]
    meta = nb.get("metadata", {})
    meta.pop("widgets", None)
    info = meta.get("language_info")
    if isinstance(info, dict):  # the kernel fills in its version, lexer, mimetype...: keep only the name
        meta["language_info"] = {"name": info["name"]} if "name" in info else {}
    return nb


def strip_outputs_pre_save_hook(model: dict[str, Any], **kwargs: Any) -> None:
    """ContentsManager.pre_save_hook: strip notebook models before they are written; other files pass."""
    if model.get("type") == "notebook" and isinstance(model.get("content"), dict):
        strip_notebook(model["content"])


if "get_config" in globals():  # loaded by Jupyter (imported by the tests, this is skipped)
    c = get_config()  # type: ignore[name-defined]  # noqa: F821
    c.ContentsManager.pre_save_hook = strip_outputs_pre_save_hook
    # the server re-applies its config to the contents manager when extensions load, and the hook's
    # validator then warns that this hook overrides itself; a different hook overriding it still warns
    warnings.filterwarnings("ignore", message=r"Overriding existing pre_save_hook \(strip_outputs_pre_save_hook\) "
                            r"with a new one \(strip_outputs_pre_save_hook\)", category=UserWarning)
