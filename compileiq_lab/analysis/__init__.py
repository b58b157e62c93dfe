"""Learning from runs: re-measurement with certificates, control influence, widening searches, earlier runs."""

from __future__ import annotations
