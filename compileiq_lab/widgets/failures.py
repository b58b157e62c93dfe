"""FailuresView: failed evaluations grouped by status, their messages, controls and learned conflicts; a pick of one."""

from __future__ import annotations

import html
import json
import logging
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import ipywidgets as w

from compileiq_lab.viz.data import failure_groups

if TYPE_CHECKING:
    from compileiq_lab.store.results import Results

__all__ = ["NO_FAILURES", "FailuresView", "failures_html"]

log = logging.getLogger(__name__)

#: What the table reads when nothing failed.
NO_FAILURES = "no failures"
#: Controls of a group's shared set listed before "+N more".
_SHARED_SHOWN = 6


def _value(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.6g}"
    return v if isinstance(v, str) else json.dumps(v, default=str)


def _cut(text: str, limit: int) -> str:
    """Escaped text, cut to ``limit`` characters with the whole of it in a title (hover) attribute."""
    if len(text) <= limit:
        return html.escape(text)
    return f"<span title=\"{html.escape(text, quote=True)}\">{html.escape(text[:limit - 1])}…</span>"


def failures_html(groups: list[dict[str, Any]], limit: int = 100, learned: Sequence[str] = ()) -> str:
    """The groups of ``compileiq_lab.viz.data.failure_groups`` as an HTML table (``NO_FAILURES`` for none).

    Args:
        groups: The groups.
        limit: Characters of a message shown; a longer one is cut, its full text in the cell's title.
        learned: What the search learned from the compiler (``Results.learned_conflicts``: conflicts its failed
            compiles named, combinations its compiles ignored), listed under the table (or alone, with no failures).
    """
    note = ""
    if learned:
        items = "".join(f"<li><code>{html.escape(line)}</code></li>" for line in learned)
        note = (f"<div class='compileiq-learned'>Learned from the compiler ({len(learned)}: conflicts its messages "
                f"named, controls it said it ignored); the search asks no config in them again:<ul>{items}</ul></div>")
    if not groups:
        return f"<i>{NO_FAILURES}</i>{note}"
    rows = []
    for g in groups:
        status = html.escape(g["status"]) + (" <small>(incl. the baseline)</small>" if g.get("baseline") else "")
        messages = "<br>".join(f"{count} &times; {_cut(text, limit)}" for text, count in g["messages"])
        shared_items = [f"<code>{html.escape(f'{k}={_value(v)}')}</code>" for k, v in g["shared"].items()]
        more = len(shared_items) - _SHARED_SHOWN
        shared = " ".join(shared_items[:_SHARED_SHOWN]) + (f" +{more} more" if more > 0 else "") or "—"
        suspects = "<br>".join(
            f"<code>{html.escape(f'{k}={_value(v)}')}</code>: {failed} failed, {ok} ok"
            for k, v, failed, ok in g["suspects"]) or "—"
        rows.append(f"<tr><td><b>{status}</b></td><td style='text-align:right'>{g['count']}</td>"
                    f"<td>{messages}</td><td>{shared}</td><td>{suspects}</td></tr>")
    head = "".join(f"<th style='text-align:left'>{h}</th>" for h in
                   ("status", "count", "messages", "set in all", "more often than in ok runs"))
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>{note}"


class FailuresView:
    """Failed evaluations grouped by status (``failure_groups``) as a table, and a menu of their eval ids that
    hands the picked one to the ``on_select`` callbacks (e.g. the dashboard's detail panel).

    Args:
        top: Messages and suspects shown per group.
        limit: Characters of a message shown (the rest in its hover).
    """

    def __init__(self, top: int = 3, limit: int = 100) -> None:
        self.top, self.limit = top, limit
        self.groups: list[dict[str, Any]] = []
        self.learned: list[str] = []
        self.table = w.HTML(f"<i>{NO_FAILURES}</i>")
        self.table.add_class("compileiq-failures")
        self.pick = w.Dropdown(options=[], value=None, description="show:",
                               layout=w.Layout(width="auto", display="none"))
        self.pick.add_class("compileiq-failure-pick")
        self.message = w.HTML()
        self.box = w.VBox([self.table, self.pick, self.message])
        self._callbacks: list[Callable[[int], object]] = []
        self._seen: tuple[Any, ...] | None = None
        self._quiet = False
        self.pick.observe(self._picked, names="value")

    def on_select(self, callback: Callable[[int], object]) -> None:
        """Call ``callback(eval_id)`` when a failed evaluation is picked in the menu."""
        self._callbacks.append(callback)

    def update(self, results: Results, force: bool = False) -> bool:
        """Show this run's failures; cheap to call on every refresh: the groups are recomputed only when the
        run or its number of records changed (or with ``force``). Returns whether it redrew."""
        ends = [(r.eval_id, r.status, r.started_at) for r in results.records[:1] + results.records[-1:]]
        seen = (results.store_path, len(results.records), *ends)
        if seen == self._seen and not force:
            return False
        self._seen = seen
        self.groups = failure_groups(results, top=self.top)
        self.learned = results.learned_conflicts()
        self.table.value = failures_html(self.groups, self.limit, self.learned)
        options: list[tuple[str, int | None]] = [("pick a failed evaluation", None)]
        for g in self.groups:
            options += [(f"{g['status']}: eval {i}", i) for i in g["eval_ids"]]
        keep = self.pick.value if any(i == self.pick.value for _, i in options[1:]) else None
        self._quiet = True
        try:
            self.pick.options = options if self.groups else []
            if keep is not None:
                self.pick.value = keep
            elif self.groups:  # the prompt shown (a value of None would show nothing)
                self.pick.index = 0
        finally:
            self._quiet = False
        self.pick.layout.display = None if self.groups else "none"
        return True

    def _picked(self, change: dict[str, Any]) -> None:
        eval_id = change["new"]
        if self._quiet or eval_id is None:
            return
        self.message.value = ""
        for callback in self._callbacks:
            try:
                callback(int(eval_id))
            except Exception as exc:  # a failing callback is shown, never raised into the widget's event loop
                log.exception("failure pick callback failed for eval %s", eval_id)
                self.message.value = (f"<span style='color:#b00'>could not show eval {eval_id}: "
                                      f"{html.escape(f'{type(exc).__name__}: {exc}')}</span>")
