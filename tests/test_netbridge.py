"""The port relay between a sandbox and the host: allow list, connection cap, clean stop."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from pathlib import Path

from itbench import netbridge


def _upstream() -> tuple[socket.socket, list[socket.socket]]:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(512)
    accepted: list[socket.socket] = []

    def serve() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            accepted.append(conn)

    threading.Thread(target=serve, daemon=True).start()
    return server, accepted


def _connect(path: Path, header: bytes) -> socket.socket:
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    conn.connect(str(path))
    with contextlib.suppress(BrokenPipeError):  # a refused connection may be closed already
        conn.sendall(header)
    return conn


def _closed_unrelayed(conn: socket.socket) -> bool:
    conn.settimeout(5)
    try:
        return conn.recv(1) == b""
    except ConnectionResetError:
        return True


def test_only_allowed_ports_are_relayed(tmp_path: Path) -> None:
    server, accepted = _upstream()
    port = server.getsockname()[1]
    relay = netbridge.Relay(str(tmp_path / "r.sock"), [port])
    try:
        good = _connect(tmp_path / "r.sock", f"{port}\n".encode())
        good.sendall(b"ping")
        deadline = time.monotonic() + 5
        while not accepted and time.monotonic() < deadline:
            time.sleep(0.01)
        assert accepted and accepted[0].recv(4) == b"ping"
        for header in (
            b"22\n",
            b"+1\n",
            b"99999999999\n",
            b"/etc/passwd\n",
            f" {port}x\n".encode(),
        ):
            bad = _connect(tmp_path / "r.sock", header)
            assert _closed_unrelayed(bad), header
            bad.close()
        assert len(accepted) == 1
        assert 22 in relay.refused
    finally:
        relay.stop()
        server.close()


def test_a_connection_flood_is_capped_and_stop_closes_live_connections(tmp_path: Path) -> None:
    server, accepted = _upstream()
    port = server.getsockname()[1]
    relay = netbridge.Relay(str(tmp_path / "r.sock"), [port])
    threads_before = threading.active_count()
    conns = [_connect(tmp_path / "r.sock", f"{port}\n".encode()) for _ in range(300)]
    try:
        time.sleep(1.0)
        # Two pump threads per carried connection at most, for the capped number of them.
        assert len(accepted) <= netbridge.MAX_CONNECTIONS
        assert threading.active_count() - threads_before <= 2 * netbridge.MAX_CONNECTIONS + 2
    finally:
        relay.stop()
    deadline = time.monotonic() + 5
    while threading.active_count() > threads_before + 1 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert threading.active_count() <= threads_before + 1
    for c in conns:
        c.close()
    server.close()
