"""Framing between the pool and a zygote: 4-byte length, then a marshal-encoded dict of plain values."""

from __future__ import annotations

import marshal
import socket
import struct
from typing import Any

_LEN = struct.Struct("<I")
MAX_MESSAGE = 1 << 30


def send(sock: socket.socket, obj: dict[str, Any]) -> None:
    data = marshal.dumps(obj)
    sock.sendall(_LEN.pack(len(data)) + data)


def recv(sock: socket.socket) -> dict[str, Any] | None:
    """The next message, or None when the peer closed the connection."""
    head = _exact(sock, _LEN.size)
    if head is None:
        return None
    (size,) = _LEN.unpack(head)
    if size > MAX_MESSAGE:
        raise ValueError(f"message of {size} bytes")
    body = _exact(sock, size)
    if body is None:
        return None
    obj = marshal.loads(body)
    if not isinstance(obj, dict):
        raise ValueError("malformed message")
    return obj


def _exact(sock: socket.socket, n: int) -> bytes | None:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(min(n - len(buf), 1 << 20))
        if not chunk:
            return None
        buf += chunk
    return bytes(buf)
