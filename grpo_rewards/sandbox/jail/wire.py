"""Framing between the pool and a zygote: 4-byte length, a marshal-encoded dict, and passed fds.

Program data never travels in these messages: code, stdin, stdout and stderr are
memfds created by the pool and passed with ``SCM_RIGHTS``. The zygote hands them to
the child without reading them, so no program's code or output ever sits in the
zygote's memory, which every later child inherits.
"""

from __future__ import annotations

import array
import contextlib
import marshal
import socket
import struct
from typing import Any

_LEN = struct.Struct("<I")
MAX_MESSAGE = 1 << 24
MAX_FDS = 8


def send(sock: socket.socket, obj: dict[str, Any], fds: list[int] | tuple[int, ...] = ()) -> None:
    data = marshal.dumps(obj)
    payload = _LEN.pack(len(data)) + data
    if fds:
        sent = socket.send_fds(sock, [payload], list(fds))
        payload = payload[sent:]
    if payload:
        sock.sendall(payload)


def recv(sock: socket.socket) -> tuple[dict[str, Any] | None, list[int]]:
    """The next message and the fds that came with it; ``(None, [])`` when the peer closed."""
    head = bytearray()
    fds: list[int] = []
    while len(head) < _LEN.size:
        data, ancdata, _, _ = sock.recvmsg(_LEN.size - len(head), socket.CMSG_SPACE(MAX_FDS * 4))
        for level, kind, cdata in ancdata:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                got = array.array("i")
                got.frombytes(cdata[: len(cdata) - (len(cdata) % got.itemsize)])
                fds += list(got)
        if not data:
            _close(fds)
            return None, []
        head += data
    (size,) = _LEN.unpack(head)
    body = _exact(sock, size) if size <= MAX_MESSAGE else None
    if body is None:
        _close(fds)
        return None, []
    obj = marshal.loads(body)
    if not isinstance(obj, dict):
        _close(fds)
        raise ValueError("malformed message")
    return obj, fds


def _exact(sock: socket.socket, n: int) -> bytes | None:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(min(n - len(buf), 1 << 20))
        if not chunk:
            return None
        buf += chunk
    return bytes(buf)


def _close(fds: list[int]) -> None:
    import os

    for fd in fds:
        with contextlib.suppress(OSError):
            os.close(fd)
