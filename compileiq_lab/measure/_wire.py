"""Length-prefixed pickle messages over pipe file descriptors, with deadlines."""

from __future__ import annotations

import os
import pickle
import select
import struct
import time
from typing import Any

__all__ = ["WireClosed", "WireTimeout", "recv", "send"]

_HEADER = struct.Struct("!Q")


class WireTimeout(Exception):
    """No complete message arrived before the deadline."""


class WireClosed(Exception):
    """The other end closed the pipe (it exited or died)."""


def send(fd: int, obj: Any, *, raw: bytes | None = None) -> None:
    """Write one message (``raw`` bytes if given, else ``pickle.dumps(obj)``)."""
    payload = raw if raw is not None else pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    data = memoryview(_HEADER.pack(len(payload)) + payload)
    while data:
        n = os.write(fd, data)
        data = data[n:]


def _read_exact(fd: int, n: int, deadline: float | None) -> bytes:
    chunks, left = [], n
    while left:
        if deadline is not None:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not select.select([fd], [], [], remaining)[0]:
                raise WireTimeout()
        chunk = os.read(fd, min(left, 1 << 20))
        if not chunk:
            raise WireClosed()
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def recv(fd: int, timeout_s: float | None = None) -> Any:
    """Read one message, waiting at most ``timeout_s`` seconds (None: forever)."""
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    (size,) = _HEADER.unpack(_read_exact(fd, _HEADER.size, deadline))
    return pickle.loads(_read_exact(fd, size, deadline))
