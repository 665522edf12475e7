"""TCP forwarding across a sandbox's network namespace, over one Unix socket.

A sandboxed agent has a network namespace of its own with only a loopback interface, so it
reaches nothing of the host. This module carries the few TCP ports it may reach (its tool
server and the public endpoints of its task) across that boundary:

- outside, :class:`Relay` (run by the harness) accepts connections on a Unix socket; each
  starts with a line holding a port number, and is relayed to ``127.0.0.1:PORT`` only when
  that port is on the relay's allow list;
- inside, ``python3 netbridge.py SOCKET PORTS -- COMMAND...`` listens on ``127.0.0.1:PORT`` of
  the sandbox for each allowed port, forwards each connection through the socket, runs the
  command and exits with its status (so the sandbox ends when the agent does).

The file uses the standard library alone: it is bound into the sandbox by itself.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Callable, Iterable
from typing import Any

_CHUNK = 65536
_HEADER_MAX = 8
#: Connections a relay carries at once; more are refused (a flood costs the harness nothing).
MAX_CONNECTIONS = 64


def _pump(
    src: socket.socket, dst: socket.socket, seen: Callable[[bytes], None] | None = None
) -> None:
    """Copy ``src`` to ``dst`` until end of stream, then half-close ``dst``.

    ``seen`` gets a copy of each piece before it is passed on, so a request is seen before
    its answer can come back (a failing observer never stops the copy).
    """
    try:
        while True:
            data = src.recv(_CHUNK)
            if not data:
                break
            if seen is not None:
                try:
                    seen(data)
                except Exception:
                    seen = None
            dst.sendall(data)
    except OSError:
        pass
    finally:
        with contextlib.suppress(OSError):
            dst.shutdown(socket.SHUT_WR)


def splice(a: socket.socket, b: socket.socket, watcher: Any = None) -> None:
    """Relay two connected sockets both ways until both directions end; closes both.

    A ``watcher`` (with ``sent(data)`` and ``received(data)``) sees a copy of what ``a``
    sends and of what ``b`` sends back.
    """
    back_seen = watcher.received if watcher is not None else None
    back = threading.Thread(target=_pump, args=(b, a, back_seen), daemon=True)
    back.start()
    _pump(a, b, watcher.sent if watcher is not None else None)
    back.join()
    a.close()
    b.close()


def _read_header(conn: socket.socket) -> int | None:
    data = b""
    while not data.endswith(b"\n"):
        if len(data) > _HEADER_MAX:
            return None
        piece = conn.recv(1)
        if not piece:
            return None
        data += piece
    text = data.strip()
    return int(text) if text.isdigit() else None


class Relay:
    """The harness's side: a Unix socket that forwards to allowed ports of 127.0.0.1.

    Args:
        path: Where to create the socket (its directory must be private to the harness
            except for the sandbox that binds it).
        ports: The TCP ports of 127.0.0.1 a connection may ask for.
        watch: Gives the watcher of a new connection to a port (an object with
            ``sent(data)`` and ``received(data)``, see :class:`itbench.httpwatch.HttpWatcher`),
            or None to leave it unwatched.
    """

    def __init__(
        self, path: str, ports: Iterable[int], watch: Callable[[int], Any] | None = None
    ) -> None:
        self.path = path
        self.ports = frozenset(ports)
        self.watch = watch
        self.refused: list[int | None] = []
        self._slots = threading.BoundedSemaphore(MAX_CONNECTIONS)
        self._live: set[socket.socket] = set()
        self._live_lock = threading.Lock()
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._sock.bind(path)
        os.chmod(path, 0o666)
        self._sock.listen(64)
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True, name="itbench-relay")
        self._thread.start()

    def _serve(self) -> None:
        while not self._stopped.is_set():
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return
            if not self._slots.acquire(blocking=False):
                conn.close()
                continue
            threading.Thread(target=self._handle_slot, args=(conn,), daemon=True).start()

    def _handle_slot(self, conn: socket.socket) -> None:
        with self._live_lock:
            self._live.add(conn)
        try:
            self._handle(conn)
        finally:
            with self._live_lock:
                self._live.discard(conn)
            self._slots.release()

    def _handle(self, conn: socket.socket) -> None:
        conn.settimeout(10)
        try:
            port = _read_header(conn)
        except OSError:
            port = None
        if port is None or port not in self.ports:
            self.refused.append(port)
            conn.close()
            return
        try:
            upstream = socket.create_connection(("127.0.0.1", port), timeout=10)
        except OSError:
            conn.close()
            return
        conn.settimeout(None)
        upstream.settimeout(None)
        with self._live_lock:
            self._live.add(upstream)
        try:
            splice(conn, upstream, self.watch(port) if self.watch is not None else None)
        finally:
            with self._live_lock:
                self._live.discard(upstream)

    def stop(self) -> None:
        """Stop accepting and remove the socket. Idempotent."""
        self._stopped.set()
        with contextlib.suppress(OSError):
            self._sock.shutdown(socket.SHUT_RDWR)
        self._sock.close()
        with self._live_lock:
            live = list(self._live)
        for conn in live:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)


def _listen_inside(sock_path: str, port: int) -> None:
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind(("127.0.0.1", port))
    server.listen(64)

    def forward(conn: socket.socket) -> None:
        out = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            out.connect(sock_path)
            out.sendall(f"{port}\n".encode())
        except OSError:
            conn.close()
            out.close()
            return
        splice(conn, out)

    def serve() -> None:
        while True:
            conn, _ = server.accept()
            threading.Thread(target=forward, args=(conn,), daemon=True).start()

    threading.Thread(target=serve, daemon=True).start()


def main(argv: list[str]) -> int:
    """Inside the sandbox: forward the ports, run the command, return its exit status."""
    if len(argv) < 4 or argv[2] != "--":
        print("usage: netbridge.py SOCKET PORT[,PORT...] -- COMMAND...", file=sys.stderr)
        return 2
    sock_path, ports, command = argv[0], argv[1], argv[3:]
    for port in filter(None, ports.split(",")):
        _listen_inside(sock_path, int(port))
    try:
        proc = subprocess.Popen(command)
    except OSError as exc:
        print(f"cannot run {command[0]}: {exc}", file=sys.stderr)
        return 127
    return proc.wait()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
