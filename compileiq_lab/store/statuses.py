"""The statuses an evaluation can end with: the vocabulary of stored rows, shared by measurements and the store."""

from __future__ import annotations

__all__ = ["OK", "STATUSES"]

OK = "ok"
#: Every status an evaluation can end with. Only "ok" carries scores the search ranks.
STATUSES = (
    "ok",            # scores are finite numbers
    "error",         # the objective raised
    "invalid",       # NaN/inf, None, a non-number or the wrong number of values
    "timeout",       # the objective exceeded timeout_s and its worker was killed
    "crashed",       # the worker process died during the call
    "compile_error", "compile_timeout", "run_error", "run_timeout", "wrong_output",
)
