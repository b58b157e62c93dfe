"""Where a dashboard's warnings and failed widget messages go: its own notes and error lines, not the log console."""

from __future__ import annotations

import html
import logging
import threading
import traceback
import weakref
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from compileiq_lab.store import Results
    from compileiq_lab.store.header import RunHeader
    from compileiq_lab.store.sqlite import EvalRecord

__all__ = ["COMM_LOGGER", "NOTES", "CommErrors", "NoteSink", "Notes", "baseline_banner", "notes_html", "status_html"]

#: The logger ipykernel's comm layer reports a failed widget message on (a plotly update, an observer).
COMM_LOGGER = "Comm"


class NoteSink(Protocol):
    """What the handlers need of a dashboard."""

    run: Any

    def queue_note(self, message: str) -> None: ...

    def show_error(self, message: str, tb: str = "") -> None: ...


class Notes(logging.Handler):
    """The package's warnings from a dashboard's own work (its callbacks, its run's thread): queued for that
    dashboard's notes line instead of the kernel's stderr, which JupyterLab shows only in its log console.
    Warnings from anything else are written to stderr as Python does without a handler. One per process."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.dashboards: weakref.WeakSet[Any] = weakref.WeakSet()
        self.active = threading.local()  # .dashboard: the one whose callback runs in this thread

    def emit(self, record: logging.LogRecord) -> None:
        try:
            owner = getattr(self.active, "dashboard", None)
            if owner is None:
                owner = next((d for d in list(self.dashboards) if d.run is not None and d.run.owns_current_thread()),
                             None)
            if owner is not None:
                owner.queue_note(record.getMessage())
            elif logging.lastResort is not None and record.levelno >= logging.lastResort.level:
                logging.lastResort.handle(record)
        except Exception:  # noqa: BLE001 - a handler must never raise into the code that logged
            self.handleError(record)


#: The one Notes handler, on the "compileiq_lab" logger once a dashboard exists.
NOTES = Notes()


class CommErrors(logging.Handler):
    """Shows an error the kernel's comm layer logs (a widget message that raised) in the dashboard too, not only
    in JupyterLab's log console."""

    def __init__(self, dashboard: NoteSink) -> None:
        super().__init__(logging.ERROR)
        self._dashboard = weakref.ref(dashboard)

    def emit(self, record: logging.LogRecord) -> None:
        dash = self._dashboard()
        if dash is None:
            logging.getLogger(COMM_LOGGER).removeHandler(self)
            return
        tb = "".join(traceback.format_exception(*record.exc_info)) if record.exc_info else ""
        dash.show_error(f"a widget update failed: {record.getMessage()}", tb)


def baseline_banner(results: Results, explain: Callable[[str], str] = str) -> str:
    """A banner's HTML when the baseline (compiler defaults) failed: its status and the compiler's message, and why the
    run stopped after it where it did (``explain``: the reason as the dashboard says it); "" when it did not fail."""
    base = results.baseline_record
    if base is None or base.status == "ok":
        return ""
    after = {"baseline_failed": "after the baseline", "stopped": "after its first generation"}
    why = explain(results.header.stop_reason) if results.header.stop_reason else ""
    stopped = f"<div>The run stopped {after[results.status]}: {html.escape(why)}</div>" \
        if results.status in after and why else ""
    message = html.escape(base.error.strip()[-1500:] or "(no message)")
    return ("<div style='border:2px solid #b00;padding:6px;background:#fff4f4'>"
            f"<b style='color:#b00'>The baseline (compiler defaults) failed: {html.escape(base.status)}</b>"
            f"{stopped}<pre style='white-space:pre-wrap;max-height:12em;overflow:auto'>{message}</pre></div>")


#: What ended a run before its generations, in words, for each such ``RunHeader.stop_reason``.
_LIMITS = {"max_evaluations": "its evaluation limit was reached", "time_budget": "its time budget was spent"}


def status_html(p: Mapping[str, Any], records: Sequence[EvalRecord], header: RunHeader | None, store_path: str, *,
                edited: bool = False, form: bool = False) -> str:
    """A run's status line from its ``progress()``: its rows as the dashboard has them (a reopened run's stored rows
    too, where the run counts this session's evaluations); an idle run's says what Start does: continue it, build the
    form's run once the form was ``edited``, or nothing more for a finished run (the ``form`` makes new ones)."""
    fails = ", ".join(f"{n} {html.escape(s)}" for s, n in sorted(p["statuses"].items()) if s != "ok")
    eta = f", about {p['eta_s']:.0f} s left" if p["eta_s"] and p["state"] == "running" else \
        " (it ends when the calls in flight do)" if p["state"] == "stopping" else ""
    n = len(records)
    last = max(r.generation for r in records) if n else 0  # (idle: before Start replays the stored rows)
    limit = _LIMITS.get(header.stop_reason) if header is not None and header.status == "finished" else None
    done = header is not None and header.status == "finished" and (last >= p["generations"] or limit is not None)
    then = "Start builds a new run from the form" if edited else "finished" + (
        ": edit the form for a new run" if form else "") if done else "Start continues"
    stored = f", {n} stored up to generation {last} ({then})" if p["state"] == "idle" and n else (
        f" this session, {n} stored" if n > p["evaluations"] else "")
    ended = f" ({limit})" if limit and p["state"] in ("idle", "finished") else ""
    return (f"<b>{html.escape(p['state'])}</b>{ended}: generation {p['generation']}/{p['generations']}, "
            f"{p['evaluations']} evaluations{stored}{' (failed: ' + fails + ')' if fails else ''}, "
            f"{p['elapsed_s']:.0f} s{eta}; store <code>{html.escape(store_path)}</code>")


def notes_html(notes: Iterable[str]) -> str:
    """Notes as the lab shows them: one amber "note: ..." line each."""
    return "".join(f"<div style='color:#8a6d00'>note: {html.escape(n)}</div>" for n in notes)
